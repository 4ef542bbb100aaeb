"""softmax and log_softmax over any dim, with their gradients, on "fpga" against torch on the CPU.

Device-resident and non-contiguous inputs, every dim, a dim of size 1, a row past the reduction
tile, -inf entries; every XCL_OPT level; nothing may fall back. exp differs from ATen's by an ulp
(docs/kernels.md), hence tolerances a few ulps wide. float16 computes in float and rounds once; its
reference is the CPU's float32 result rounded to float16 (ATen's float16 log_softmax rounds
intermediate results: 2-3% off where x - max - log(sum) cancels).
"""
from __future__ import annotations

import pytest
import torch

import aten_fpga
from cnn_support import assert_ran, close, on_device

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float16: dict(rtol=1e-3, atol=1e-3)}
SHAPES = [((5, 37), 1), ((5, 37), 0), ((4, 3, 6), 1), ((4, 1, 6), 1), ((3, 5000), -1), ((7,), 0)]


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("shape,dim", SHAPES, ids=[f"{s}-dim{d}" for s, d in SHAPES])
def test_softmax(level, shape, dim, dtype, log):
    aten_fpga.reset_stats()
    g = torch.Generator().manual_seed(len(shape) * 10 + dim)
    x = (torch.randn(shape, generator=g) * 4).to(dtype)
    x.view(-1)[::7] = -float("inf")  # masked entries, as attention masks make them
    grad = torch.randn(shape, generator=g).to(dtype)
    fn = torch.log_softmax if log else torch.softmax
    xc = x.float().clone().requires_grad_()
    yc = fn(xc, dim)
    yc.backward(grad.float())
    xf = on_device(x, True)
    yf = fn(xf, dim)
    yf.backward(on_device(grad))
    close(yf.detach(), yc.detach().to(dtype), **TOL[dtype])
    close(xf.grad, xc.grad.to(dtype), **TOL[dtype])
    name = "_log_softmax" if log else "_softmax"
    assert_ran(f"{name}.out", f"{name}_backward_data.out")


def test_softmax_non_contiguous_and_float_output(level):
    aten_fpga.reset_stats()
    x = torch.randn(6, 9)
    xf = on_device(x).t()  # [9, 6], strided
    close(torch.softmax(xf, 1), torch.softmax(x.t(), 1), **TOL[torch.float32])
    close(torch.log_softmax(xf, 0), torch.log_softmax(x.t(), 0), **TOL[torch.float32])
    h = x.half()
    close(torch.softmax(on_device(h), 1, dtype=torch.float32), torch.softmax(h, 1, dtype=torch.float32),
          **TOL[torch.float32])
    assert_ran("_softmax.out", "_log_softmax.out")
