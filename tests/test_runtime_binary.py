"""fpga_kernel on everything a binary op's TensorIterator can present: type promotion and casts,
broadcasting and strided operands (made contiguous on the device, never through the host), 0-dim
tensors and Python scalars (filled on the device), out= with resize, in-place ops and aliasing,
zero-size tensors, and a tensor over 2 GiB. Each result is compared bit for bit with the CPU."""
import pytest
import torch

import aten_fpga
from runtime_support import exact, op_report


@pytest.fixture(params=[3, 4], ids=["opt3-multiCU", "opt4-vector"])
def level(request):
    aten_fpga.load(request.param)
    aten_fpga.reset_stats()
    yield request.param
    aten_fpga.load(4)


def on_fpga(t):
    return t.to("fpga")


def values(dtype, n=2000, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(n, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g) * 100).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=g).to(dtype)


# Pairs whose common dtype is float32 (the image's kernels): the other operand is cast on the device.
PROMOTING = [(torch.int32, torch.float32), (torch.float32, torch.int64), (torch.bool, torch.float32),
             (torch.float16, torch.float32), (torch.float32, torch.bfloat16), (torch.uint8, torch.float32)]


@pytest.mark.parametrize("da,db", PROMOTING, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("op", [torch.add, torch.mul])
def test_type_promotion_runs_the_common_dtype_kernel(level, op, da, db):
    a, b = values(da, seed=1), values(db, seed=2)
    exact(op(on_fpga(a), on_fpga(b)), op(a, b))
    assert op_report(f"{op.__name__}.out")["fpga"] == 1


def test_common_dtype_without_kernel_falls_back():
    a, b = values(torch.float64), values(torch.float32)  # float64: no kernel in the image
    aten_fpga.reset_stats()
    exact(on_fpga(a) + on_fpga(b), a + b)
    assert op_report("add.out") == {**op_report("add.out"), "fpga": 0, "cpu_fallback": 1}


@pytest.mark.parametrize("out_dtype", [torch.float64, torch.complex64, torch.float32])
def test_out_of_a_wider_dtype_is_cast_on_the_device(level, out_dtype):
    a, b = values(torch.float32, seed=3), values(torch.int32, seed=4)
    out = torch.empty(0, dtype=out_dtype, device="fpga")
    torch.add(on_fpga(a), on_fpga(b), alpha=3, out=out)
    exact(out, torch.add(a, b, alpha=3, out=torch.empty(0, dtype=out_dtype)))
    assert op_report("add.out")["fpga"] == 1


def test_out_of_a_narrower_dtype_is_refused_like_the_cpu():
    a = values(torch.float32)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int"):
        torch.add(on_fpga(a), on_fpga(a), out=torch.empty(0, dtype=torch.int32, device="fpga"))


def test_operand_on_another_device_is_refused():
    with pytest.raises(RuntimeError, match="same device"):
        on_fpga(values(torch.float32)) + values(torch.float32)


def device_resident(t):
    """t on fpga with its bytes valid only on the device (written by a kernel)."""
    x = on_fpga(t)
    x.add_(0)
    return x


@pytest.mark.parametrize("case", ["broadcast", "transposed", "strided-slices", "expanded-0-dim", "misaligned"])
def test_non_contiguous_operands_are_made_contiguous_on_the_device(level, case):
    a, b = torch.randn(64, 96), torch.randn(96, 64)
    x, y = device_resident(a), device_resident(b)
    aten_fpga.reset_stats()
    make = {
        "broadcast": lambda p, q: p[:, :1] + q.t()[:1],
        "transposed": lambda p, q: p * q.t(),
        "strided-slices": lambda p, q: p[::2, 1::3] + q.t()[1::2, ::3],
        "expanded-0-dim": lambda p, q: p[3, 5] * q.t(),
        "misaligned": lambda p, q: p.flatten()[5:5000] + q.flatten()[1:4996],
    }[case]
    result = make(x, y)
    r = op_report("add.out" if case in ("broadcast", "strided-slices", "misaligned") else "mul.out")
    copies = op_report("_copy_from")
    assert r["fpga"] == 1
    # Nothing crossed between host and device: the gathers ran on the device copies.
    assert r["bytes_to_host"] == r["bytes_to_device"] == copies["bytes_to_host"] == copies["bytes_to_device"] == 0
    exact(result, make(a, b))


@pytest.mark.parametrize("scalar", [2, -0.37, True, torch.tensor(1.5), torch.tensor(7, dtype=torch.int64),
                                    torch.tensor(2.25, dtype=torch.float64)],
                         ids=["int", "float", "bool", "cpu-0dim-f32", "cpu-0dim-i64", "cpu-0dim-f64"])
def test_python_and_cpu_scalars_are_filled_on_the_device(level, scalar):
    a = torch.randn(50_000)
    x = device_resident(a)
    aten_fpga.reset_stats()
    results = [x + scalar, scalar * x, torch.add(x, scalar, alpha=2)]
    add, mul = op_report("add.out"), op_report("mul.out")
    assert add["fpga"] == 2 and mul["fpga"] == 1
    # The scalar's broadcast buffer is written on the device: no host-to-device traffic at all.
    assert add["bytes_to_device"] == mul["bytes_to_device"] == 0
    for r, e in zip(results, [a + scalar, scalar * a, torch.add(a, scalar, alpha=2)]):
        exact(r, e)


def test_int_tensor_with_a_float_scalar_promotes_and_runs_on_the_fpga():
    a = values(torch.int32)
    aten_fpga.reset_stats()
    exact(on_fpga(a) * 2.5, a * 2.5)
    assert op_report("mul.out")["fpga"] == 1


@pytest.mark.parametrize("sa,sb", [((), ()), ((), (7,)), ((3, 1), ()), ((1,), (5, 4))])
def test_zero_dim_fpga_tensors(level, sa, sb):
    a, b = torch.randn(sa), torch.randn(sb)
    exact(on_fpga(a) + on_fpga(b), a + b)
    exact(on_fpga(a) * on_fpga(b), a * b)


def test_out_is_resized_and_reused(level):
    a, b = torch.randn(40, 30), torch.randn(30)
    out = torch.empty(0, device="fpga")
    torch.mul(on_fpga(a), on_fpga(b), out=out)
    exact(out, a * b)
    ptr = out.data_ptr()
    torch.add(on_fpga(a), on_fpga(b), out=out)  # same shape: written in place
    assert out.data_ptr() == ptr
    exact(out, a + b)
    small = torch.empty(5, device="fpga")
    with pytest.warns(UserWarning, match="resized"):
        torch.add(on_fpga(a), on_fpga(b), out=small)  # a non-empty out of another shape: resized, as on the CPU
    exact(small, a + b)


def test_aliasing_inputs_and_outputs(level):
    a, b = torch.randn(70_001), torch.randn(70_001)
    x = on_fpga(a)
    x.add_(x)
    exact(x, a + a)
    x = on_fpga(a)
    x.mul_(x)
    exact(x, a * a)
    x, y = on_fpga(a), on_fpga(b)
    torch.add(x, y, alpha=2, out=y)  # out is the second input
    exact(y, torch.add(a, b, alpha=2))
    x, y = on_fpga(a), on_fpga(b)
    torch.mul(x, y, out=x)  # out is the first input
    exact(x, a * b)
    x = on_fpga(a)
    x[::2].add_(x[1::2][:35_001 - 1].flip(0)[:1].expand(35_001))  # a strided in-place output, broadcast input
    expected = a.clone()
    expected[::2].add_(a[1::2][:35_000].flip(0)[:1].expand(35_001))
    exact(x, expected)


def test_partial_overlap_is_refused_like_the_cpu():
    x = on_fpga(torch.randn(100))
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.add(x[1:], x[:-1], out=x[:-1])


@pytest.mark.parametrize("sa,sb", [((0,), (0,)), ((3, 0), (1, 0)), ((0, 4), (4,)), ((2, 0, 3), (0, 1))])
def test_zero_size(level, sa, sb):
    a, b = torch.randn(sa), torch.randn(sb)
    exact(on_fpga(a) + on_fpga(b), a + b)
    out = torch.empty(0, device="fpga")
    torch.mul(on_fpga(a), on_fpga(b), out=out)
    exact(out, a * b)
    x = on_fpga(a)
    x.add_(on_fpga(b))
    exact(x, a + b)


def _available_memory():
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable"))


def test_float32_add_over_2gib():
    """64-bit sizes and offsets: operands of 2 GiB + 1 MiB at a 64-byte offset, checked around
    byte offset 2^31 and at both ends (only those windows are written: first touches of fresh
    memory dominate the time of a test this size)."""
    n = (1 << 29) + (1 << 18)  # elements: (2 GiB + 1 MiB) / 4 bytes
    # An fpga tensor is a host shadow and a device copy: x and out hold ~8.1 GiB.
    if _available_memory() < 11 << 30:
        pytest.skip("needs 11 GiB of free memory")
    aten_fpga.load(4)
    x = torch.empty(n, device="fpga")
    windows = [(0, 4096), ((1 << 29) - 4096, (1 << 29) + 4096), (n - 4096, n)]
    for lo, hi in windows:
        x[lo:hi] = torch.arange(lo, hi, dtype=torch.float32)
    out = x[16:] + x[:-16]  # offsets of 64 bytes: straight to the kernel ports
    assert out.numel() == n - 16 and out.nbytes > (1 << 31)
    for lo, hi in windows:
        exact(out[lo:hi - 16], torch.arange(lo + 16, hi, dtype=torch.float32) + torch.arange(lo, hi - 16, dtype=torch.float32))
    del x, out
    torch.fpga.empty_cache()
