"""Upsampling under torch.compile stays one op, forward and backward: PyTorch's Python
decompositions would trace it as index, clamp and index_put ops (about 20 launches where the table
runs it in 1-2, and more than eager), so the backend keeps it whole while it traces."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from compile_support import fresh_dynamo, keep_global_rng  # noqa: F401  fixtures

MODES = [("nearest", {}), ("bilinear", {"align_corners": False}), ("bilinear", {"align_corners": True})]


def step(fn, x, w):
    """fn's output and the input's gradient, and the launches and fallbacks they took."""
    aten_fpga.reset_stats()
    x = x.detach().requires_grad_()
    y = fn(x)
    (y * w).sum().backward()
    stats = aten_fpga.stats().values()
    return y.detach().cpu(), x.grad.cpu(), sum(s["fpga"] for s in stats), sum(s["cpu_fallback"] for s in stats)


@pytest.mark.parametrize("mode,kw", MODES, ids=["nearest", "bilinear", "bilinear-corners"])
def test_compiled_upsampling_is_the_table_op(mode, kw):
    g = torch.Generator().manual_seed(3)
    x = torch.neg(torch.neg(torch.randn(2, 3, 6, 7, generator=g).to("fpga")))  # made by a kernel
    w = torch.randn(2, 3, 12, 14, generator=g).to("fpga")

    def fn(t):
        return F.interpolate(t, scale_factor=2, mode=mode, **kw)

    y_e, gx_e, launches_e, fallbacks_e = step(fn, x, w)
    compiled = torch.compile(fn, backend="aten_fpga")
    step(compiled, x, w)  # traces
    y_c, gx_c, launches_c, fallbacks_c = step(compiled, x, w)
    assert fallbacks_e == fallbacks_c == 0
    assert launches_c <= launches_e, (launches_c, launches_e)
    assert aten_fpga.stats()[f"upsample_{mode}2d.out"]["fpga"] == 1
    torch.testing.assert_close(y_c, y_e, rtol=0, atol=0)
    torch.testing.assert_close(gx_c, gx_e, rtol=0, atol=0)
    x_cpu = x.cpu().requires_grad_()
    y = fn(x_cpu)
    (y * w.cpu()).sum().backward()
    torch.testing.assert_close(y_c, y.detach())
    torch.testing.assert_close(gx_c, x_cpu.grad)
