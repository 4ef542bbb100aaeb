"""gather, scatter (src, value, reduce=), scatter_add, index_put_ and arange on device "fpga"
(kernels/hls/index, kernels/hls/range; host/ps/fpga_index.cpp, fpga_rng.cpp) at every XCL_OPT
level, against PyTorch on the CPU, bit for bit.

Inputs (data and indices) are produced by fpga kernels, so they are valid only in device memory:
a missing sync would read the host shadow (poisoned under ATEN_FPGA_SANITIZE=1). Repeated indices
accumulate (scatter_add, index_put_ with accumulate) and overwrite (scatter, index_put_) in the
CPU's order; the tests use values whose float sums depend on that order."""
import pytest
import torch

import aten_fpga

from test_kernels_index_copy import check, device_only, sample

DTYPES = (torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.bool)
NUMERIC = DTYPES[:-1]


def indices(shape, bound, seed=0, dtype=torch.int64):
    """Random indices in [0, bound), with repeats."""
    return torch.randint(0, bound, shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def order_sensitive(shape, dtype, seed=0):
    """Values whose float sums depend on the order of addition (large and small magnitudes)."""
    x = sample(shape, dtype, seed)
    if dtype.is_floating_point:
        scale = torch.tensor([1.0, 1e4, 1e-3], dtype=torch.float64)[torch.arange(x.numel()) % 3].reshape(shape)
        x = (x.double() * scale).to(dtype)
    return x


# --- gather -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(level, dtype, dim):
    x = sample((5, 6, 7), dtype)
    shape = [3, 4, 5]
    shape[dim] = 9  # longer than self along dim; shorter in the others
    idx = indices(shape, x.shape[dim])
    check(lambda a, i: torch.gather(a, dim, i), x, idx, ops=["gather.out"])


def test_gather_int32_index_and_strided_operands(level):
    x = sample((6, 8), torch.float32)
    idx = indices((8, 6), 6, dtype=torch.int32)
    # a transposed self, a transposed int32 index, and a strided out=
    check(lambda a, i: torch.gather(a.t(), 1, i.t()), x, idx, ops=["gather.out"])

    def into_strided(a, i):
        out = torch.zeros(6, 16, dtype=a.dtype, device=a.device)[:, ::2]
        return torch.gather(a, 0, i.t().long(), out=out)
    check(into_strided, x, idx, ops=["gather.out"])


def test_gather_across_cus(level):
    x = sample((300, 257), torch.float32)  # > 16384 elements per compute unit
    check(lambda a, i: torch.gather(a, 0, i), x, indices((300, 257), 300), ops=["gather.out"])


# --- scatter, scatter_add, reduce= ------------------------------------------------------------

def scatter_cases():
    x = order_sensitive((5, 6, 7), torch.float64)
    return x


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add_repeated_indices(level, dtype, dim):
    x = sample((5, 6, 7), dtype, 1)
    shape = [5, 6, 7]
    shape[dim] = 12  # every destination receives about two elements, in index order
    src = order_sensitive(shape, dtype, 2)
    idx = indices(shape, x.shape[dim], 3)
    check(lambda a, i, s: torch.scatter_add(a, dim, i, s), x, idx, src, ops=["scatter_add.out"])
    check(lambda a, i, s: a.clone().scatter_add_(dim, i, s), x, idx, src, ops=["scatter_add.out"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_src_and_value(level, dtype):
    x, src = sample((6, 9), dtype, 1), sample((4, 9), dtype, 2)
    # a permutation per column: scatter's result is defined (no repeated destination)
    idx = torch.stack([torch.randperm(6, generator=torch.Generator().manual_seed(c))[:4] for c in range(9)], 1)
    value = True if dtype == torch.bool else 3
    check(lambda a, i, s: torch.scatter(a, 0, i, s), x, idx, src, ops=["scatter.src_out"])
    check(lambda a, i: torch.scatter(a, 0, i, value), x, idx, ops=["scatter.value_out"])
    check(lambda a, i: a.clone().scatter_(0, i, value), x, idx, ops=["scatter.value_out"])


def test_scatter_repeated_indices_last_wins(level):
    # ATen's CPU kernel writes in index order along dim: the last of repeated indices wins
    x, src = sample((4, 3), torch.float32, 1), sample((10, 3), torch.float32, 2)
    check(lambda a, i, s: torch.scatter(a, 0, i, s), x, indices((10, 3), 4, 4), src, ops=["scatter.src_out"])


@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_scatter_reduce_argument(level, reduce, dtype):
    x, src = sample((5, 8), dtype, 1), sample((9, 8), dtype, 2)
    idx = indices((9, 8), 5, 3)
    check(lambda a, i, s: torch.scatter(a, 0, i, s, reduce=reduce), x, idx, src, ops=["scatter.reduce_out"])
    check(lambda a, i: torch.scatter(a, 1, i[:5, :6], 2, reduce=reduce), x, idx, ops=["scatter.value_reduce_out"])


def test_scatter_strided_operands_and_small_index(level):
    # a transposed self and src, an index smaller than self in the other dim, a sliced index
    x, src = sample((9, 6), torch.float32, 1), sample((9, 8), torch.float32, 2)
    idx = indices((8, 12), 6, 3)
    check(lambda a, i, s: torch.scatter_add(a.t(), 0, i[:, ::2], s.t()[:, 2:]), x, idx, src, ops=["scatter_add.out"])


def test_scatter_add_across_cus(level):
    # outer slabs on several compute units; repeated destinations within each slab
    x, src = sample((64, 40, 16), torch.float32, 1), order_sensitive((64, 90, 16), torch.float32, 2)
    check(lambda a, i, s: torch.scatter_add(a, 1, i, s), x, indices((64, 90, 16), 40, 3), src,
          ops=["scatter_add.out"])


# --- x[i] (index.Tensor) ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_index_tensor(level, dtype):
    x = sample((6, 5, 4), dtype, 1)
    i, j = torch.tensor([[0, 5], [3, -6]]), torch.tensor([1, -1])  # broadcast together; negative indices
    check(lambda a, i: a[i], x, i, ops=["index.Tensor_out"])
    check(lambda a, i, j: a[:, j], x, i, j, ops=["index.Tensor_out"])
    check(lambda a, i, j: a[i, j], x, i, j, ops=["index.Tensor_out"])
    check(lambda a, i, j: a.transpose(0, 2)[:, j.int()], x, i, j, ops=["index.Tensor_out"])  # strided self, int32


# --- index_put_ -------------------------------------------------------------------------------

@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_put(level, accumulate, dtype):
    if accumulate and dtype == torch.bool:
        pytest.skip("ATen's CPU kernel accumulates bool by +=: checked by the float cases")
    x = sample((7, 5, 3), dtype, 1)
    rows = torch.tensor([6, 0, 2, 6, 5])  # 6 twice
    src = order_sensitive((5, 5, 3), dtype, 2) if accumulate else sample((5, 5, 3), dtype, 2)
    expected_ops = ["_index_put_impl_"]
    if not accumulate:  # the last of repeated indices wins on the CPU; keep the test defined
        rows = torch.tensor([6, 0, 2, 4, 5])
    check(lambda a, i, v: a.clone().index_put_((i,), v, accumulate=accumulate), x, rows, src, ops=expected_ops)


def test_index_put_accumulate_repeated_rows_in_order(level):
    x = sample((4, 8), torch.float32, 1)
    rows = indices((40,), 4, 5)  # every row about ten times
    src = order_sensitive((40, 8), torch.float32, 2)
    check(lambda a, i, v: a.clone().index_put_((i,), v, accumulate=True), x, rows, src, ops=["_index_put_impl_"])


def test_index_put_forms(level):
    x = sample((6, 5, 4), torch.float32, 1)
    i, j = torch.tensor([[0, 5], [3, 3]]), torch.tensor([1, -1])  # broadcast together; a negative index

    def forms(a, i, j):
        a = a.clone()
        a[i, j] = 7.0                              # two adjacent index tensors, a scalar value
        a[:, j] += torch.ones(6, 2, 4, device=a.device)  # a leading slice: x[:, j] += v
        a.index_put_((i.int(),), a[0, 0].clone(), accumulate=True)  # int32 indices, a broadcast value
        return a
    check(forms, x, i, j, ops=["_index_put_impl_"])


def test_index_put_cpu_index_list(level):
    # x[[...]] = v from Python: the index tensor is made on the CPU and copied in
    x = device_only(sample((5, 3), torch.float32, 1))
    expected = sample((5, 3), torch.float32, 1)
    aten_fpga.reset_stats()
    x[[4, 1]] = 2.5
    expected[[4, 1]] = 2.5
    torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=0)
    assert aten_fpga.stats()["_index_put_impl_"]["fpga"] == 1


def test_index_put_mask_falls_back_counted(level):
    x, m = device_only(sample((5, 3), torch.float32, 1)), device_only(sample((5, 3), torch.bool, 2))
    expected = sample((5, 3), torch.float32, 1)
    expected[sample((5, 3), torch.bool, 2)] = 1.0
    aten_fpga.reset_stats()
    x[m] = 1.0
    torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=0)
    assert aten_fpga.stats()["_index_put_impl_"]["cpu_fallback"] == 1


# --- edge cases: empty tensors, errors as on the CPU -----------------------------------------

def test_empty(level):
    x = sample((4, 3), torch.float32, 1)
    e = torch.zeros((0, 3), dtype=torch.int64)
    check(lambda a, i: torch.gather(a, 0, i), x, e, ops=[])
    check(lambda a, i: torch.scatter_add(a, 0, i, a), x, e, ops=[])
    check(lambda a, i: a.clone().index_put_((i[:, 0],), a[:0], accumulate=True), x, e, ops=[])
    check(lambda a, i: torch.gather(a[:0], 0, i), x, e, ops=[])


def errors(fn, *xs):
    """The exception class fn raises on the CPU and on fpga inputs valid only on the device."""
    def raised(args):
        try:
            fn(*args)
        except (IndexError, RuntimeError) as e:
            return type(e)
        return None
    return raised(xs), raised([device_only(x) for x in xs])


@pytest.mark.parametrize("case", ["gather_high", "gather_negative", "scatter", "scatter_add", "index", "index_put",
                                  "index_put_negative", "index_put_accumulate", "shape", "dtype"])
def test_errors_match_the_cpu(level, case):
    x, src = sample((4, 3), torch.float32, 1), sample((4, 3), torch.float32, 2)
    bad = torch.tensor([[0, 4, 1]]) if case != "gather_negative" else torch.tensor([[0, -1, 1]])
    fn = {
        "gather_high": lambda a, i: torch.gather(a, 0, i),
        "gather_negative": lambda a, i: torch.gather(a, 0, i),
        "scatter": lambda a, i: torch.scatter(a, 0, i, 1.0),
        "scatter_add": lambda a, i: torch.scatter_add(a, 0, i, a),
        "index": lambda a, i: a[:, i[0]],
        "index_put": lambda a, i: a.index_put_((i[0],), torch.ones((), device=a.device)),
        "index_put_negative": lambda a, i: a.index_put_((i[0] - 9,), torch.ones((), device=a.device)),
        "index_put_accumulate": lambda a, i: a.index_put_((i[0],), torch.ones(3, 3, device=a.device),
                                                          accumulate=True),
        "shape": lambda a, i: torch.gather(a, 0, i.reshape(3, 1, 1)),
        "dtype": lambda a, i: torch.scatter_add(a, 0, i, a.double()),
    }[case]
    cpu, fpga = errors(fn, x, bad)
    assert cpu is not None and fpga is cpu, (cpu, fpga)


# --- arange -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64])
@pytest.mark.parametrize("args", [(32,), (-5, 70000, 3), (2.5, -9.5, -0.25), (1, 2, 0.5)])
def test_arange(level, dtype, args):
    if dtype == torch.float16 and max(abs(a) for a in args) > 2048:
        args = (-5, 2000, 3)
    if not dtype.is_floating_point and any(a != int(a) for a in args):
        pytest.skip("ATen truncates a fractional step to 0 for integers: an error on both devices")
    expected = torch.arange(*args, dtype=dtype)
    aten_fpga.reset_stats()
    actual = torch.arange(*args, dtype=dtype, device="fpga")
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
    assert aten_fpga.stats()["arange.start_out"] == {"fpga": 1, "cpu_fallback": 0}


def test_arange_inexact_step_within_an_ulp(level):
    # ATen's vector loop rounds each 16-element block's base to float first; ours rounds once
    expected = torch.arange(0, 100, 0.1)
    actual = torch.arange(0, 100, 0.1, device="fpga").cpu()
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=2**-23, atol=0)


def test_arange_out_and_beyond_2_53(level):
    out = torch.zeros(5, 2, device="fpga")[:, 0]  # strided, resized with ATen's warning
    with pytest.warns(UserWarning, match="does not match the computed number"):
        torch.arange(0, 7, out=out)
    torch.testing.assert_close(out.cpu(), torch.arange(0., 7))
    aten_fpga.reset_stats()
    big = torch.arange(2**60, 2**60 + 5, device="fpga")  # int64 beyond double: the counted fallback
    assert torch.equal(big.cpu(), torch.arange(2**60, 2**60 + 5))
    assert aten_fpga.stats()["arange.start_out"]["cpu_fallback"] == 1


def test_arange_feeds_other_kernels(level):
    # positions of a transformer: arange on the device, then an embedding gather, no host copy
    w = sample((16, 4), torch.float32)
    check(lambda a: a.index_select(0, torch.arange(3, 15, 2, device=a.device)), w, ops=["arange.start_out",
                                                                                         "index_select"])
