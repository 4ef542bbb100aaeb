"""Data movement and indexing on device "fpga" (kernels/hls/copy, kernels/hls/index; host/ps/
fpga_copy.cpp, fpga_index.cpp) at every XCL_OPT level, against PyTorch on the CPU, bit for bit.

Inputs are produced by an fpga kernel (`* 1`, `+ 0`), so they are valid only in device memory: a
missing sync would read the host shadow (poisoned under ATEN_FPGA_SANITIZE=1). Each test asserts
the op ran as a kernel (aten_fpga.stats()) and did not fall back."""
import pytest
import torch

import aten_fpga

DTYPES = (torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.bool)
# Fill ops (torch.ones, torch.zeros inside embedding's backward) get their kernels in another
# branch of the project (the fill kernels); until it is merged they are the only allowed fallbacks.
PENDING_FILL = {"fill_.Scalar", "zero_"}




def device_only(x):
    """x on the fpga, produced by a kernel: valid only in device memory."""
    if x.dtype == torch.bool:
        return x.to("fpga").logical_and(torch.ones((), dtype=torch.bool, device="fpga"))
    return x.to("fpga") * 1


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype in (torch.int32, torch.int64):
        return torch.randint(-100, 100, shape, generator=g, dtype=dtype)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def check(fn, *xs, ops):
    """fn on fpga inputs valid only on the device equals fn on the CPU, bit for bit; each of `ops`
    ran as a kernel and nothing fell back."""
    expected = fn(*xs)
    dev = [device_only(x) for x in xs]
    aten_fpga.reset_stats()
    actual = fn(*dev)
    stats = aten_fpga.stats()
    assert actual.device.type == "fpga"
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    for op in ops:
        assert stats.get(op, {}).get("fpga", 0) >= 1, (op, stats)
    fallbacks = {k: v for k, v in stats.items() if v["cpu_fallback"] and k not in PENDING_FILL}
    assert not fallbacks, fallbacks
    return actual


STRIDED = {
    "transpose": lambda a: a.transpose(0, 2).contiguous(),
    "permute": lambda a: a.permute(1, 2, 0).contiguous(),
    "expand": lambda a: a[:, :1].expand(9, 5, 37).contiguous(),
    "repeat": lambda a: a[:2].repeat(2, 1, 3),
    "slice": lambda a: a[::2, 1:4, 3::5].contiguous(),
    "channels_last": lambda a: a.reshape(1, 9, 5, 37).contiguous(memory_format=torch.channels_last),
}


@pytest.mark.parametrize("case", sorted(STRIDED))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_strided_copy(level, case, dtype):
    out = check(STRIDED[case], sample((9, 5, 37), dtype), ops=["copy_"])
    assert out.is_contiguous() or case == "channels_last"


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast(level, src, dst):
    x = sample((3, 70), src)
    if src.is_floating_point and not dst.is_floating_point and dst != torch.bool:
        x = x * 40  # values that truncate to several integers
    check(lambda a: a.t().to(dst), x, ops=["copy_"] if src != dst else [])


def test_copy_into_strided_views(level):
    x = sample((6, 5, 7), torch.float32)

    def into_slice(a):
        y = torch.zeros(6, 9, 7, device=a.device) if a.device.type == "cpu" else (torch.zeros(6, 9, 7) + 0).to(a.device) * 1
        y[:, 2:7] = a           # rows at a pitch: one launch
        y[:, 8].copy_(a[:, 0].half())  # a cast into a strided view
        return y
    check(into_slice, x, ops=["copy_"])


def test_copy_across_cus_and_tiles(level):
    x = sample((300, 257), torch.float32)  # > 16384 elements per CU and several tiles
    check(lambda a: a.t().contiguous(), x, ops=["copy_"])


@pytest.mark.parametrize("fn", ["tril", "triu"])
@pytest.mark.parametrize("k", [-2, 0, 3])
def test_tril_triu(level, fn, k):
    f = getattr(torch, fn)
    check(lambda a: f(a, k), sample((3, 7, 11), torch.float32), ops=[f"{fn}.out"])
    check(lambda a: f(a.transpose(1, 2), k), sample((2, 6, 5), torch.int64), ops=[f"{fn}.out"])
    check(lambda a: f(a, k), sample((5, 4), torch.bool), ops=[f"{fn}.out"])


def test_causal_mask(level):
    # how attention builds its mask: ones -> tril -> logical_not -> masked_fill
    x = sample((2, 8, 8), torch.float32)

    def f(a):
        mask = torch.ones(8, 8, dtype=torch.bool, device=a.device).tril()
        return a.masked_fill(mask.logical_not(), float("-inf"))
    check(f, x, ops=["tril.out", "masked_fill_.Scalar"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill(level, dtype):
    x, m = sample((4, 33), dtype), sample((4, 33), torch.bool, seed=1)
    value = True if dtype == torch.bool else 3
    check(lambda a, b: a.masked_fill(b, value), x, m, ops=["masked_fill_.Scalar"])
    check(lambda a, b: a.masked_fill(b[0], torch.tensor(value)), x, m, ops=["masked_fill_.Tensor"])  # broadcast mask


def test_masked_fill_rejects_non_bool_masks(level):
    x = device_only(sample((4,), torch.float32))
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.masked_fill_(torch.ones(4, dtype=torch.int64, device="fpga"), 0)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(level, dim):
    xs = [sample((4, 3, 5), torch.float32, s) for s in range(3)]
    xs[1] = sample((4, 3, 5), torch.float32, 7)
    # along dim 0 each input is one block of the result: device-to-device copies, no kernel launch
    check(lambda *a: torch.cat(a, dim), *xs, ops=["cat.out"] if dim != 0 else [])
    check(lambda a, b: torch.cat([a, b.half()], dim), xs[0], xs[1], ops=["cat.out"])  # promoted to float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_select(level, dtype, dim):
    x = sample((7, 6, 5), dtype)
    idx = torch.tensor([3, 0, 3, 4, 1])
    check(lambda a, i: a.index_select(dim, i), x, idx, ops=["index_select"])


def test_index_select_out_of_range(level):
    x = device_only(sample((7, 5), torch.float32))
    with pytest.raises(IndexError, match="out of range"):
        x.index_select(0, torch.tensor([1, 7], device="fpga"))


def test_embedding_forward_and_backward(level):
    w = sample((50, 16), torch.float32)
    ids = torch.randint(0, 50, (4, 9), generator=torch.Generator().manual_seed(3))
    ids[0, :3] = 7  # repeated rows accumulate in the backward
    grad = sample((4, 9, 16), torch.float32, seed=5)

    def f(weight, i, g, padding_idx=None):
        weight = weight.detach().requires_grad_()
        out = torch.nn.functional.embedding(i, weight, padding_idx=padding_idx)
        out.backward(g)
        return torch.cat([out.reshape(-1, 16), weight.grad])
    check(f, w, ids, grad, ops=["index_select", "embedding_dense_backward"])
    check(lambda *a: f(*a, padding_idx=7), w, ids, grad, ops=["embedding_dense_backward"])
