"""nll_loss, nll_loss2d (and cross_entropy through them) and mse_loss, forward and backward, on
"fpga" against torch on the CPU: weights, ignore_index, every reduction, device-resident inputs,
every XCL_OPT level, nothing falling back.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from cnn_support import assert_ran, close, on_device

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float16: dict(rtol=1e-3, atol=1e-3)}
REDUCTIONS = ("none", "sum", "mean")


def run_both(fn, x, *rest, grad_shape=None, dtype=torch.float32):
    """fn(x, *rest) and its gradient in x, on the CPU and on "fpga"; returns both pairs."""
    xc = x.clone().requires_grad_()
    yc = fn(xc, *rest)
    grad = torch.randn(yc.shape, generator=torch.Generator().manual_seed(7)).to(dtype)
    yc.backward(grad)
    xf = on_device(x, True)
    yf = fn(xf, *(on_device(t) if isinstance(t, torch.Tensor) else t for t in rest))
    yf.backward(on_device(grad))
    return (yf.detach(), yc.detach()), (xf.grad, xc.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("ignore_index", [-100, 2], ids=["no_ignore", "ignore2"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(level, reduction, ignore_index, weighted, dtype):
    aten_fpga.reset_stats()
    g = torch.Generator().manual_seed(1)
    x = torch.log_softmax(torch.randn(33, 5, generator=g), 1).to(dtype)
    target = torch.randint(0, 5, (33,), generator=g)
    weight = (torch.rand(5, generator=g) + 0.5).to(dtype) if weighted else None
    fn = lambda x, t, w: F.nll_loss(x, t, w, ignore_index=ignore_index, reduction=reduction)  # noqa: E731
    (y, y_cpu), (gx, gx_cpu) = run_both(fn, x, target, weight, dtype=dtype)
    close(y, y_cpu, **TOL[dtype])
    close(gx, gx_cpu, **TOL[dtype])
    assert_ran("nll_loss_forward.output", "nll_loss_backward.grad_input")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss2d_and_cross_entropy(level, reduction):
    aten_fpga.reset_stats()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 4, 5, 6, generator=g)
    target = torch.randint(0, 4, (3, 5, 6), generator=g)
    weight = torch.rand(4, generator=g) + 0.5
    fn = lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=1, reduction=reduction)  # noqa: E731
    (y, y_cpu), (gx, gx_cpu) = run_both(fn, x, target, weight)
    close(y, y_cpu, **TOL[torch.float32])
    close(gx, gx_cpu, **TOL[torch.float32])
    assert_ran("nll_loss2d_forward", "nll_loss2d_backward", "_log_softmax.out")


def test_cross_entropy_1d_target_and_single_sample(level):
    aten_fpga.reset_stats()
    g = torch.Generator().manual_seed(3)
    for shape, tshape in [((32, 10), (32,)), ((10,), ())]:
        x, t = torch.randn(shape, generator=g), torch.randint(0, 10, tshape, generator=g)
        (y, y_cpu), (gx, gx_cpu) = run_both(F.cross_entropy, x, t)
        close(y, y_cpu, **TOL[torch.float32])
        close(gx, gx_cpu, **TOL[torch.float32])
    assert_ran("nll_loss_forward.output", "nll_loss_backward.grad_input")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss(level, reduction, dtype):
    aten_fpga.reset_stats()
    g = torch.Generator().manual_seed(4)
    x, t = torch.randn(37, 41, generator=g).to(dtype), torch.randn(37, 41, generator=g).to(dtype)
    fn = lambda x, t: F.mse_loss(x, t, reduction=reduction)  # noqa: E731
    (y, y_cpu), (gx, gx_cpu) = run_both(fn, x, t, dtype=dtype)
    close(y, y_cpu, **TOL[dtype])
    close(gx, gx_cpu, **TOL[dtype])
    assert_ran("mse_loss", "mse_loss_backward")
