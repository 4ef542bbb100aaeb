"""upsample_bicubic2d and its backward (host/ps/fpga_upsample.cpp: gathers and pointwise kernels
forward, two GEMMs backward) against torch on the CPU, at every XCL_OPT level.

The forward takes ATen's taps and weights (the same indices and float32 coefficients) and sums
them along W, then H, four taps each in tap order: within float32 rounding of ATen's (about one
output in eight differs in the last bits: ATen's CPU loop rounds its sums differently, which
multiply-add contraction alone does not explain). The backward sums each input pixel's contributions in
the GEMM's order: within float32 rounding of ATen's. Inputs are chained (the output of another
kernel); each op must have run on the FPGA with no fallback.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from runtime_support import assert_ran

F32, F16 = torch.float32, torch.float16


def chained(x: torch.Tensor) -> torch.Tensor:
    return -(-x.to("fpga"))


# (input H, W) -> size or scale: up, down, non-integer factors, a 1-pixel side (every tap clamped)
CASES = [((5, 7), dict(size=(11, 16))), ((9, 12), dict(size=(4, 5))), ((6, 6), dict(scale_factor=2.5)),
         ((8, 5), dict(scale_factor=(0.6, 1.7))), ((1, 4), dict(size=(3, 9)))]


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_bicubic_forward(level, case, align_corners):
    aten_fpga.reset_stats()
    (h, w), how = CASES[case]
    x = torch.randn(2, 3, h, w, generator=torch.Generator().manual_seed(case))
    for recompute in (False, True) if "scale_factor" in how else (False,):  # scales given to the op, or not
        kw = dict(how, mode="bicubic", align_corners=align_corners)
        if recompute:
            kw["recompute_scale_factor"] = True
        actual = F.interpolate(chained(x), **kw)
        expected = F.interpolate(x, **kw)
        assert actual.device.type == "fpga"
        torch.testing.assert_close(actual.cpu(), expected)  # float32 rounding
    assert_ran("upsample_bicubic2d.out")


def test_bicubic_float16(level):
    """float16: ATen sums in float and rounds once; the pointwise kernels round each product and sum
    to float16, so within float16 rounding of it."""
    aten_fpga.reset_stats()
    x = torch.randn(1, 4, 6, 7).to(F16)
    actual = F.interpolate(chained(x), size=(13, 10), mode="bicubic", align_corners=False)
    expected = F.interpolate(x, size=(13, 10), mode="bicubic", align_corners=False)
    torch.testing.assert_close(actual.cpu(), expected, rtol=4e-3, atol=4e-3)
    assert_ran("upsample_bicubic2d.out")


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_bicubic_backward(level, case, align_corners):
    aten_fpga.reset_stats()
    (h, w), how = CASES[case]
    gen = torch.Generator().manual_seed(case + 100)
    x = torch.randn(2, 3, h, w, generator=gen)
    kw = dict(how, mode="bicubic", align_corners=align_corners)
    g = torch.randn(F.interpolate(x, **kw).shape, generator=gen)
    xd = chained(x).requires_grad_()
    F.interpolate(xd, **kw).backward(g.to("fpga"))
    xc = x.clone().requires_grad_()
    F.interpolate(xc, **kw).backward(g)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)
    assert_ran("upsample_bicubic2d.out", "upsample_bicubic2d_backward.grad_input")


def test_bicubic_errors(level):
    with pytest.raises(RuntimeError, match="expected input_size equals to 4|expected a 4-D input"):
        torch.ops.aten.upsample_bicubic2d(chained(torch.randn(3, 4, 5)), [6, 7], False)
