"""batch_norm, layer_norm and group_norm, forward and backward, on "fpga" against torch on the CPU.

Inputs are device-resident (made by another kernel), some non-contiguous; every XCL_OPT level;
nothing may fall back to the CPU. The statistics are reductions (the CPU's and ours sum in other
orders), so results are compared within tolerances: float32 at 1e-5 relative / 1e-5 absolute
(2e-4 for gradients, which subtract nearly equal sums), float16 at float16's defaults.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from cnn_support import assert_ran, close, level, on_device  # noqa: F401 (level is a fixture)

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=1e-3, atol=1e-3)}
GRAD_TOL = {torch.float32: dict(rtol=2e-4, atol=2e-4), torch.float16: dict(rtol=1e-2, atol=1e-2)}

# (shape, transpose the last two dims first): 2-d, one channel, odd sizes, a long reduction, strided.
BN_SHAPES = [((6, 5), False), ((3, 1, 17), False), ((4, 3, 5, 7), False), ((2, 4, 64, 65), False),
             ((4, 3, 6, 5), True)]


def inputs(shape, dtype, transpose, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3 + 1.5).to(dtype)
    return x.transpose(-1, -2) if transpose else x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("shape,transpose", BN_SHAPES, ids=[f"{s}{'T' if t else ''}" for s, t in BN_SHAPES])
def test_batch_norm_train(level, shape, transpose, dtype):
    aten_fpga.reset_stats()
    x = inputs(shape, dtype, transpose)
    c = x.shape[1]
    w, b = torch.rand(c, dtype=dtype) + 0.5, torch.randn(c, dtype=dtype)
    rm, rv = torch.randn(c, dtype=dtype), torch.rand(c, dtype=dtype) + 1
    grad = torch.randn(x.shape, dtype=dtype)

    xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, b))
    rmc, rvc = rm.clone(), rv.clone()
    yc = F.batch_norm(xc, rmc, rvc, wc, bc, training=True, momentum=0.2, eps=1e-5)
    yc.backward(grad)

    xf, wf, bf = on_device(x, True), on_device(w, True), on_device(b, True)
    rmf, rvf = on_device(rm), on_device(rv)
    yf = F.batch_norm(xf, rmf, rvf, wf, bf, training=True, momentum=0.2, eps=1e-5)
    yf.backward(on_device(grad))

    close(yf.detach(), yc.detach(), **TOL[dtype])
    close(rmf, rmc, **TOL[dtype])
    close(rvf, rvc, **TOL[dtype])
    close(xf.grad, xc.grad, **GRAD_TOL[dtype])
    close(wf.grad, wc.grad, **GRAD_TOL[dtype])
    close(bf.grad, bc.grad, **GRAD_TOL[dtype])
    assert_ran("native_batch_norm", "native_batch_norm_backward")


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_batch_norm_eval(level, affine):
    aten_fpga.reset_stats()
    x = inputs((4, 3, 5, 7), torch.float32, False, seed=1)
    w, b = (torch.rand(3) + 0.5, torch.randn(3)) if affine else (None, None)
    rm, rv = torch.randn(3), torch.rand(3) + 1
    grad = torch.randn(x.shape)
    xc = x.clone().requires_grad_()
    yc = F.batch_norm(xc, rm, rv, w, b, training=False, eps=1e-3)
    yc.backward(grad)
    xf = on_device(x, True)
    dev = (lambda t: None if t is None else on_device(t))
    yf = F.batch_norm(xf, dev(rm), dev(rv), dev(w), dev(b), training=False, eps=1e-3)
    yf.backward(on_device(grad))
    close(yf.detach(), yc.detach(), **TOL[torch.float32])
    close(xf.grad, xc.grad, **GRAD_TOL[torch.float32])
    assert_ran("native_batch_norm", "native_batch_norm_backward")


def test_batch_norm_module_and_group_norm_forward(level):
    """nn.BatchNorm2d (train, then eval) and group_norm's forward (ATen's composite reaches
    native_batch_norm) run without a fallback."""
    aten_fpga.reset_stats()
    x = inputs((4, 6, 5, 5), torch.float32, False, seed=2)
    bn_c = torch.nn.BatchNorm2d(6)
    bn_f = torch.nn.BatchNorm2d(6).to("fpga")
    for _ in range(2):
        close(bn_f(on_device(x)), bn_c(x).detach(), **TOL[torch.float32])
    close(bn_f.running_mean, bn_c.running_mean, **TOL[torch.float32])
    close(bn_f.running_var, bn_c.running_var, **TOL[torch.float32])
    bn_c.eval(), bn_f.eval()
    close(bn_f(on_device(x)), bn_c(x).detach(), **TOL[torch.float32])
    w, b = torch.rand(6) + 0.5, torch.randn(6)
    close(F.group_norm(on_device(x), 3, on_device(w), on_device(b)), F.group_norm(x, 3, w, b),
          **TOL[torch.float32])
    assert_ran("native_batch_norm")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("shape,normalized", [((7, 33), 1), ((2, 3, 1), 1), ((4, 5, 6), 2), ((3, 4097), 1)],
                         ids=["rows", "size1", "two_dims", "long"])
def test_layer_norm(level, shape, normalized, dtype):
    aten_fpga.reset_stats()
    x = inputs(shape, dtype, False, seed=3)
    nshape = shape[-normalized:]
    w, b = torch.rand(nshape, dtype=dtype) + 0.5, torch.randn(nshape, dtype=dtype)
    grad = torch.randn(shape, dtype=dtype)
    xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, b))
    yc = F.layer_norm(xc, nshape, wc, bc, eps=1e-5)
    yc.backward(grad)
    xf, wf, bf = on_device(x, True), on_device(w, True), on_device(b, True)
    yf = F.layer_norm(xf, nshape, wf, bf, eps=1e-5)
    yf.backward(on_device(grad))
    close(yf.detach(), yc.detach(), **TOL[dtype])
    close(xf.grad, xc.grad, **GRAD_TOL[dtype])
    close(wf.grad, wc.grad, **GRAD_TOL[dtype])
    close(bf.grad, bc.grad, **GRAD_TOL[dtype])
    assert_ran("native_layer_norm", "native_layer_norm_backward")


def test_layer_norm_non_contiguous(level):
    aten_fpga.reset_stats()
    x = inputs((6, 9), torch.float32, True, seed=4)  # [9, 6], strided
    close(F.layer_norm(on_device(x.contiguous()).t().contiguous().t(), (6,)), F.layer_norm(x, (6,)),
          **TOL[torch.float32])
    assert_ran("native_layer_norm")


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_backward(level, groups):
    aten_fpga.reset_stats()
    x = inputs((3, 6, 4, 5), torch.float32, False, seed=5)
    w, b = torch.rand(6) + 0.5, torch.randn(6)
    grad = torch.randn(x.shape)
    xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, b))
    F.group_norm(xc, groups, wc, bc).backward(grad)
    xf, wf, bf = on_device(x, True), on_device(w, True), on_device(b, True)
    F.group_norm(xf, groups, wf, bf).backward(on_device(grad))
    close(xf.grad, xc.grad, **GRAD_TOL[torch.float32])
    close(wf.grad, wc.grad, **GRAD_TOL[torch.float32])
    close(bf.grad, bc.grad, **GRAD_TOL[torch.float32])
    assert_ran("native_batch_norm", "native_group_norm_backward")
