"""The scans (kernels/hls/scan: cumsum, cumprod, logcumsumexp, cummax, cummin), roll, flip and the BatchNorm
overloads AOTAutograd emits, against torch on the CPU, at every XCL_OPT level.

The scans are bit exact: ATen's CPU kernels accumulate in order in their accumulate type (double
for float32), as the kernel does. Inputs are chained (the output of another kernel), and each op
must have run on the FPGA with no fallback.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from runtime_support import assert_ran

F32, F16, I32, I64, B = torch.float32, torch.float16, torch.int32, torch.int64, torch.bool


def chained(x: torch.Tensor) -> torch.Tensor:
    """x on the device as the output of a kernel (a copy kernel, then two negations where they exist)."""
    d = x.to("fpga")
    return -(-d) if x.dtype in (F32, F16, I32, I64) else d.clone()


def values(shape, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if dtype in (I32, I64):
        return torch.randint(-9, 10, shape, generator=gen, dtype=dtype)
    if dtype == B:
        return torch.randint(0, 2, shape, generator=gen).bool()
    # magnitudes over 12 orders (float16: 6, within its range), so that the order of the
    # accumulation shows in the bits
    span = 3 if dtype == F16 else 6
    x = torch.randn(shape, generator=gen) * torch.logspace(-span, span, shape[-1])
    return x.to(dtype)


SHAPE = (3, 37, 21)  # 37 * 21 lanes along dim 0 (more than one block), 21 along dim 1, rows along dim 2


@pytest.mark.parametrize("dtype", [F32, F16, I32, I64, B], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(level, dim, dtype):
    aten_fpga.reset_stats()
    x = values(SHAPE, dtype, seed=dim + 1)
    actual = torch.cumsum(chained(x), dim)
    expected = torch.cumsum(x, dim)  # integers and bool: int64
    assert actual.device.type == "fpga" and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    assert_ran("cumsum.out")


def test_cumsum_float32_accumulates_in_double(level):
    """The sum of 1 and 2^-30 per step: float accumulation would never leave 1."""
    x = torch.full((4, 1000), 2.0**-30)
    x[:, 0] = 1.0
    actual = torch.cumsum(chained(x), 1).cpu()
    torch.testing.assert_close(actual, torch.cumsum(x, 1), rtol=0, atol=0)
    assert actual[0, -1] > 1.0


@pytest.mark.parametrize("dtype", [F32, F16, I64], ids=str)
def test_cumprod(level, dtype):
    aten_fpga.reset_stats()
    x = values((5, 40), dtype) if dtype == I64 else (1 + 0.1 * torch.randn(5, 40)).to(dtype)
    x[1, 7] = 0
    for dim in (0, 1):
        torch.testing.assert_close(torch.cumprod(chained(x), dim).cpu(), torch.cumprod(x, dim), rtol=0, atol=0)
    assert_ran("cumprod.out")


@pytest.mark.parametrize("dtype", [F32, F16], ids=str)
def test_logcumsumexp(level, dtype):
    aten_fpga.reset_stats()
    x = (torch.randn(6, 50) * 30).to(dtype)
    x[0, :3] = torch.tensor([-math.inf, -math.inf, 1.0])
    x[1, 5] = math.inf
    x[2, 9] = math.nan
    x[3, :] = -math.inf
    for dim in (0, 1):
        actual = torch.logcumsumexp(chained(x), dim).cpu()
        torch.testing.assert_close(actual, torch.logcumsumexp(x, dim), rtol=0, atol=0, equal_nan=True)
    assert_ran("_logcumsumexp")


def test_cumsum_dtype_out_and_edges(level):
    aten_fpga.reset_stats()
    x = values((7, 9), F32)
    torch.testing.assert_close(torch.cumsum(chained(x), 1, dtype=F16).cpu(), torch.cumsum(x, 1, dtype=F16),
                               rtol=0, atol=0, equal_nan=True)
    out = torch.empty(9, 7, device="fpga").t()  # a strided out: written through a temporary
    torch.cumsum(chained(x), 0, out=out)
    torch.testing.assert_close(out.cpu(), torch.cumsum(x, 0), rtol=0, atol=0)
    y = chained(x).clone()
    y.cumsum_(1)  # in place
    torch.testing.assert_close(y.cpu(), torch.cumsum(x, 1), rtol=0, atol=0)
    torch.testing.assert_close(torch.cumsum(torch.tensor(3.5, device="fpga"), 0).cpu(), torch.tensor(3.5))
    assert torch.cumsum(torch.empty(0, 3, device="fpga"), 0).shape == (0, 3)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.cumsum(chained(x), 2)
    assert_ran("cumsum.out")


def test_cumsum_backward_and_mask_positions(level):
    """A training step through cumsum (its gradient is flip, cumsum, flip), and the position ids a
    Hugging Face decoder builds from an attention mask."""
    aten_fpga.reset_stats()
    x = values((4, 30), F32)
    g = torch.randn(4, 30)
    xd = chained(x).requires_grad_()
    torch.cumsum(xd, 1).backward(g.to("fpga"))
    xc = x.clone().requires_grad_()
    torch.cumsum(xc, 1).backward(g)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=0, atol=0)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    pos = chained(mask).long().cumsum(-1) - 1
    pos = pos.masked_fill(chained(mask) == 0, 1)
    torch.testing.assert_close(pos.cpu(), (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1))
    assert_ran("cumsum.out", "flip")


def extremes(shape, dtype, seed=0):
    """Few distinct values (ties everywhere); floats add NaN, +-inf, -0.0 and 0.0."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=gen)
    if dtype in (I32, I64):
        return x.to(dtype)
    special = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0], dtype=dtype)
    where = torch.randint(0, 6, shape, generator=gen) == 0
    return torch.where(where, special[torch.randint(0, 5, shape, generator=gen)], x.to(dtype) / 2)


def same_bits(actual, expected):
    bits = {F32: torch.int32, F16: torch.int16, I32: I32, I64: I64}[expected.dtype]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual.view(bits), expected.view(bits)), (actual, expected)


@pytest.mark.parametrize("dtype", [F32, F16, I32, I64], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin(level, dim, dtype):
    """Values bit for bit and ATen's indices: the last of equal values, a NaN sticks (each later
    NaN's index), -0.0 and 0.0 tie."""
    aten_fpga.reset_stats()
    x = extremes(SHAPE, dtype, seed=dim + 11)
    for op in (torch.cummax, torch.cummin):
        actual, expected = op(chained(x), dim), op(x, dim)
        assert actual.values.device.type == "fpga"
        same_bits(actual.values.cpu(), expected.values)
        torch.testing.assert_close(actual.indices.cpu(), expected.indices, rtol=0, atol=0)
    assert_ran("_cummax_helper", "_cummin_helper")


def test_cummax_out_and_edges(level):
    aten_fpga.reset_stats()
    x = extremes((7, 9), F32, seed=4)
    values = torch.empty(9, 7, device="fpga").t()  # strided outs: written through temporaries
    indices = torch.empty(9, 7, device="fpga", dtype=I64).t()
    torch.cummax(chained(x), 0, out=(values, indices))
    expected = torch.cummax(x, 0)
    same_bits(values.cpu(), expected.values)
    torch.testing.assert_close(indices.cpu(), expected.indices, rtol=0, atol=0)
    scalar = torch.cummin(torch.tensor(1.5, device="fpga"), 0)
    assert scalar.values.item() == 1.5 and scalar.indices.item() == 0
    assert torch.cummax(torch.empty(0, 3, device="fpga"), 1).values.shape == (0, 3)
    nan_first = torch.tensor([math.nan, 1.0, math.nan, 5.0])
    torch.testing.assert_close(torch.cummax(chained(nan_first), 0).indices.cpu(), torch.tensor([0, 0, 2, 2]))
    assert_ran("_cummax_helper")  # the 0-dim cummin is ATen's composite alone (a fill)


def test_cummax_backward(level):
    """cummax's gradient scatters into the indices it returned (a training step through it)."""
    aten_fpga.reset_stats()
    x = extremes((4, 30), F32, seed=9).nan_to_num(0.0)
    g = torch.randn(4, 30)
    xd = chained(x).requires_grad_()
    torch.cummax(xd, 1).values.backward(g.to("fpga"))
    xc = x.clone().requires_grad_()
    torch.cummax(xc, 1).values.backward(g)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=0, atol=0)
    assert aten_fpga.stats()["_cummax_helper"]["fpga"] >= 1


@pytest.mark.parametrize("dtype", [F32, F16, I64, B], ids=str)
def test_roll(level, dtype):
    aten_fpga.reset_stats()
    x = values((4, 6, 5), dtype)
    for shifts, dims in [((2, -1), (0, 2)), (3, 1), (-7, ()), (0, 1), ((1, 1), (1, 1))]:
        actual = torch.roll(chained(x), shifts, dims)
        torch.testing.assert_close(actual.cpu(), torch.roll(x, shifts, dims), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        torch.roll(chained(x), (1, 2), (0,))
    assert_ran("roll")


@pytest.mark.parametrize("dtype", [F32, F16, I64, B], ids=str)
def test_flip(level, dtype):
    aten_fpga.reset_stats()
    x = values((4, 6, 5), dtype)
    for dims in [(0,), (0, 2), (-1,), (0, 1, 2), ()]:
        torch.testing.assert_close(torch.flip(chained(x), dims).cpu(), torch.flip(x, dims), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.flip(chained(x), (0, -3))
    assert_ran("flip")


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_legit(level, training):
    """AOTAutograd's BatchNorm: the same results and running statistics as native_batch_norm's."""
    aten_fpga.reset_stats()
    x = torch.randn(4, 3, 5, 5)
    w, b = torch.rand(3) + 0.5, torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    rmd, rvd = chained(rm), chained(rv)
    actual = torch.ops.aten._native_batch_norm_legit(chained(x), chained(w), chained(b), rmd, rvd, training, 0.1, 1e-5)
    expected = torch.ops.aten._native_batch_norm_legit(x, w, b, rm, rv, training, 0.1, 1e-5)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(rmd.cpu(), rm, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(rvd.cpu(), rv, rtol=1e-6, atol=1e-7)
    if not training:
        y = torch.ops.aten._native_batch_norm_legit_no_training(chained(x), chained(w), chained(b), rmd, rvd, 0.1, 1e-5)
        torch.testing.assert_close(y[0].cpu(), expected[0], rtol=1e-5, atol=1e-6)
    else:
        y = torch.ops.aten._native_batch_norm_legit.no_stats(chained(x), chained(w), chained(b), True, 0.1, 1e-5)
        e = torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)
        torch.testing.assert_close(y[0].cpu(), e[0], rtol=1e-5, atol=1e-6)
        assert_ran("_native_batch_norm_legit.no_stats")
    assert_ran("_native_batch_norm_legit")


def test_activations_chained(level):
    """The new activations in a chain, forward and backward, as a network runs them."""
    aten_fpga.reset_stats()
    x = torch.randn(8, 33) * 4
    outs = {}
    for device in ("cpu", "fpga"):
        xd = (chained(x) if device == "fpga" else x.clone()).requires_grad_()
        y = F.mish(F.softplus(F.hardsigmoid(F.hardswish(xd)) * 3 - 1, beta=2.0))
        y.backward(torch.ones_like(y))
        outs[device] = (y.detach().cpu(), xd.grad.cpu())
    torch.testing.assert_close(outs["fpga"][0], outs["cpu"][0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(outs["fpga"][1], outs["cpu"][1], rtol=1e-5, atol=1e-6)
    assert_ran("hardswish", "hardsigmoid.out", "softplus.out", "mish.out", "hardswish_backward",
               "hardsigmoid_backward.grad_input", "softplus_backward.grad_input", "mish_backward")
