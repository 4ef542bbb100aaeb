"""Integer division with a rounding mode (kernels/hls/idiv, a bit-serial divider) against torch on
the CPU, bit exact, at every XCL_OPT level: int32 and int64, 'trunc' and 'floor', negative operands
of every sign combination and magnitudes across the range, broadcasting, Python-number divisors,
floor_divide; a zero divisor raises ZeroDivisionError as on the CPU. Inputs are chained (made by
other kernels), and the ops must have launched kernels with no fallback."""
from __future__ import annotations

import pytest
import torch

import aten_fpga
from runtime_support import assert_ran

INTS = [torch.int32, torch.int64]


def operands(dtype, n=3000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    info = torch.iinfo(dtype)
    # magnitudes of every bit width, both signs, the extremes (INT_MIN / -1 aside: ATen traps)
    shift = torch.randint(0, info.bits - 1, (n,), generator=gen)
    a = torch.randint(info.min, info.max, (n,), generator=gen, dtype=dtype) >> shift.to(dtype)
    b = torch.randint(info.min, info.max, (n,), generator=gen, dtype=dtype) >> torch.randint(
        0, info.bits - 1, (n,), generator=gen).to(dtype)
    edge = torch.tensor([0, 1, -1, 7, -7, info.max, info.min + 1, info.min], dtype=dtype)
    a = torch.cat([a, edge.repeat_interleave(8)])
    b = torch.cat([b, edge.roll(1).repeat(8)])
    b[b == 0] = 3
    keep = ~((a == info.min) & (b == -1))
    return a[keep], b[keep]


def chained(x):
    return -(-x.to("fpga"))


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_div_rounding_modes_bit_exact(level, fresh_stats, dtype, mode):
    a, b = operands(dtype)
    got = torch.div(chained(a), chained(b), rounding_mode=mode)
    assert got.dtype == dtype and got.device.type == "fpga"
    assert torch.equal(got.cpu(), torch.div(a, b, rounding_mode=mode))
    assert_ran("div.Tensor_mode")


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_broadcast_python_numbers_and_floor_divide(fresh_stats, dtype):
    a, _ = operands(dtype, n=200, seed=1)
    a = a.view(-1, 1)[:200]
    cols = torch.tensor([5, -3, 2, -1], dtype=dtype)
    assert torch.equal(torch.div(chained(a), chained(cols), rounding_mode="floor").cpu(),
                       torch.div(a, cols, rounding_mode="floor"))
    assert torch.equal(torch.div(chained(a), 5, rounding_mode="floor").cpu(), torch.div(a, 5, rounding_mode="floor"))
    assert torch.equal(torch.div(chained(a), -5, rounding_mode="trunc").cpu(), torch.div(a, -5, rounding_mode="trunc"))
    assert torch.equal(torch.floor_divide(chained(a), chained(cols)).cpu(), torch.floor_divide(a, cols))
    assert torch.equal((chained(a) // 4).cpu(), a // 4)
    assert_ran("div.Tensor_mode", "floor_divide")


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_zero_divisor_raises_as_on_the_cpu(fresh_stats, mode):
    a = torch.tensor([4, -9, 12])
    b = torch.tensor([2, 0, 5])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a, b, rounding_mode=mode)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(chained(a), chained(b), rounding_mode=mode)
    assert aten_fpga.stats().get("div.Tensor_mode", {"cpu_fallback": 0})["cpu_fallback"] == 0  # the status word raised


def test_other_dtypes_and_modes_still_run(fresh_stats):
    """The functional overload now goes through fpga_idiv.cpp: floats and true division go on to
    div.out_mode's kernels, with ATen's result dtype."""
    x = torch.randn(100)
    y = torch.randn(100).abs() + 0.5
    for mode in (None, "trunc", "floor"):
        got = torch.div(chained(x), chained(y), rounding_mode=mode)
        assert torch.equal(got.cpu(), torch.div(x, y, rounding_mode=mode)), mode
    i = torch.arange(-6, 6)
    got = torch.div(chained(i), 4)  # true division of integers: the default float dtype
    assert got.dtype == torch.float32 and torch.equal(got.cpu(), torch.div(i, 4))
    assert_ran("div.Tensor_mode", "div.out_mode")
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(chained(x), chained(y), rounding_mode="round")
