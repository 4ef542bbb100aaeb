"""`a + b` and `a * b` on device "fpga", at every XCL_OPT level, bit for bit against the CPU."""
import pytest
import torch

import aten_fpga

from runtime_support import exact

pytestmark = pytest.mark.usefixtures("fresh_stats")  # `level` (conftest.py) loads each image


def fpga(t):
    return t.to("fpga")


def ran_on_fpga(op, times=1):
    s = aten_fpga.stats().get(op, {"fpga": 0, "cpu_fallback": 0})
    assert s["fpga"] == times and s["cpu_fallback"] == 0, s


# Sizes around the tile (4096), the vector width (16 floats) and the CU split.
SIZES = [1, 7, 16, 17, 4095, 4096, 4097, 100_003]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["add", "mul"])
def test_same_shape(level, op, n):
    a, b = torch.randn(n), torch.randn(n)
    exact(getattr(torch, op)(fpga(a), fpga(b)), getattr(torch, op)(a, b))
    ran_on_fpga(f"{op}.out")


@pytest.mark.parametrize("op", ["add", "mul"])
def test_broadcast(level, op):
    a, b = torch.randn(3, 1), torch.randn(1, 4)
    exact(getattr(torch, op)(fpga(a), fpga(b)), getattr(torch, op)(a, b))
    ran_on_fpga(f"{op}.out")


@pytest.mark.parametrize("op", ["add", "mul"])
def test_transposed_operand(level, op):
    a, b = torch.randn(37, 129), torch.randn(129, 37)
    exact(getattr(torch, op)(fpga(a).t(), fpga(b)), getattr(torch, op)(a.t(), b))
    ran_on_fpga(f"{op}.out")


def test_python_scalar(level):
    a = torch.randn(1000)
    exact(fpga(a) + 2, a + 2)
    exact(fpga(a) * 2.5, a * 2.5)
    exact(3 * fpga(a), 3 * a)


def test_alpha(level):
    a, b = torch.randn(5000), torch.randn(5000)
    for alpha in (0.37, -2, 1e-3):
        exact(torch.add(fpga(a), fpga(b), alpha=alpha), torch.add(a, b, alpha=alpha))
    ran_on_fpga("add.out", 3)


@pytest.mark.parametrize("op", ["add_", "mul_"])
def test_in_place(level, op):
    a, b = torch.randn(64, 33), torch.randn(64, 33)
    x = fpga(a)
    ptr = x.data_ptr()
    getattr(x, op)(fpga(b))
    assert x.data_ptr() == ptr
    exact(x, getattr(a.clone(), op)(b))
    x = fpga(a)
    getattr(x, op)(x)  # an input aliasing the output
    exact(x, getattr(a.clone(), op)(a))


@pytest.mark.parametrize("op", ["add", "mul"])
def test_out(level, op):
    a, b = torch.randn(300), torch.randn(300)
    out = torch.empty(0, device="fpga")
    r = getattr(torch, op)(fpga(a), fpga(b), out=out)
    assert r is out and out.shape == (300,)
    exact(out, getattr(torch, op)(a, b))
    # out= a strided view: written through, the rest of its storage untouched
    base = torch.zeros(300, 2, device="fpga")
    getattr(torch, op)(fpga(a), fpga(b), out=base[:, 1])
    expected = torch.zeros(300, 2)
    expected[:, 1] = getattr(torch, op)(a, b)
    exact(base, expected)


def test_sliced_misaligned_operands(level):
    a, b = torch.randn(9_999), torch.randn(10_000)
    exact(fpga(a)[3:] + fpga(b)[:-4], a[3:] + b[:-4])
    exact(fpga(a)[::3] * fpga(b)[1:-1:3], a[::3] * b[1:-1:3])


def test_special_values(level):
    a = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-45, -1e-40, 3.4e38] * 5)
    b = torch.tensor([1.0, -float("inf"), -float("inf"), 0.0, -0.0, 1e-45, 1e-40, 3.4e38] * 5)
    exact(fpga(a) + fpga(b), a + b)
    exact(fpga(a) * fpga(b), a * b)
    exact(torch.add(fpga(a), fpga(b), alpha=-1.5), torch.add(a, b, alpha=-1.5))


def test_empty(level):
    a = torch.randn(0, 3)
    exact(fpga(a) + fpga(a), a + a)


def test_chained_ops_stay_on_device(level):
    a, b = torch.randn(2048), torch.randn(2048)
    x, y = fpga(a), fpga(b)
    exact((x + y) * y + x, (a + b) * b + a)
    s = aten_fpga.stats()
    assert s["add.out"]["fpga"] == 2 and s["mul.out"]["fpga"] == 1


def test_mixed_dtypes_promote(level):
    a, b = torch.randn(100), torch.randint(-5, 5, (100,))
    exact(fpga(a) + fpga(b), a + b)  # int64 cast to float32 on the device


def test_unsupported_dtype_falls_back_and_is_counted(level):
    a, b = torch.randint(-9, 9, (50,), dtype=torch.int16), torch.randint(-9, 9, (50,), dtype=torch.int16)
    exact(fpga(a) + fpga(b), a + b)
    s = aten_fpga.stats()["add.out"]
    assert s["fpga"] == 0 and s["cpu_fallback"] == 1


@pytest.mark.parametrize("call", [lambda x, y: x + y, lambda x, y: x.add_(y), lambda x, y: torch.add(x, y, out=x)],
                         ids=["functional", "in_place", "out"])
def test_one_dispatch_per_op(level, call):
    """x + y and x.add_(y) have wrappers of their own (host/ps/structured.h): one aten::add (or
    aten::add_) in the profiler, holding the kernel's range, where ATen's composite kernel would
    dispatch add.out inside it (an aten::add more)."""
    x, y = fpga(torch.randn(100)) * 1, fpga(torch.randn(100))  # x: a kernel's output
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        call(x, y)
    names = [e.name for e in prof.events()]
    assert len([n for n in names if n.startswith("aten::add")]) == 1 and names.count("v_add_float32") == 1, names
    ran_on_fpga("add.out")


def test_in_place_errors_as_the_cpu(level):
    """The in-place wrapper refuses what ATen's does, with its words."""
    cases = [lambda x: x.add_(torch.ones(3, 2, device=x.device)),                # would grow self
             lambda x: x.long().add_(torch.ones(2, device=x.device))]            # float into int64
    for case in cases:
        with pytest.raises(RuntimeError) as cpu:
            case(torch.ones(2))
        with pytest.raises(RuntimeError) as dev:
            case(fpga(torch.ones(2)))
        assert str(dev.value) == str(cpu.value)


def test_in_place_strided_self(level):
    """In place on a transposed view: computed through the iterator's order into self's storage."""
    a, b = torch.randn(33, 17), torch.randn(17, 33)
    x = fpga(a) + 0  # a kernel's output
    view = x.t()
    view.mul_(fpga(b))
    exact(x, (a.t() * b).t())
    ran_on_fpga("mul.out")
