"""Weight normalization (host/ps/fpga_weight_norm.cpp: reduce/norm2, reduce/sum and binary kernels)
against torch on the CPU, forward and backward, keeping the first or the last dim, at every
XCL_OPT level. The norms are sums over the reduced dims in the reduce kernels' order: within
float32 rounding of ATen's, not bit exact."""
from __future__ import annotations

import pytest
import torch

import aten_fpga
from runtime_support import assert_ran

TOL = dict(rtol=3e-6, atol=1e-6)


def weight_norm_step(device, v, g, grad_w, dim):
    v = v.to(device).requires_grad_(True)
    g = g.to(device).requires_grad_(True)
    # chained: the operands are kernel outputs
    w = torch._weight_norm(-(-v), g * 1.0, dim)
    (w * grad_w.to(device)).sum().backward()
    return w.detach().cpu(), v.grad.cpu(), g.grad.cpu()


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_forward_backward(level, fresh_stats, dim):
    gen = torch.Generator().manual_seed(dim)
    v = torch.randn(32, 16, 8, generator=gen)
    g_shape = [1, 1, 1]
    g_shape[dim] = v.shape[dim]
    g = torch.randn(g_shape, generator=gen)
    grad_w = torch.randn(v.shape, generator=gen)
    got = weight_norm_step("fpga", v, g, grad_w, dim)
    ref = weight_norm_step("cpu", v, g, grad_w, dim)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, **TOL)
    assert_ran("_weight_norm_interface", "_weight_norm_interface_backward")


def test_weight_norm_interface_outputs(fresh_stats):
    """The op's second output, the norms, has g's shape."""
    v = torch.randn(6, 5, 4)
    g = torch.randn(6, 1, 1)
    w, norms = torch._weight_norm_interface(v.to("fpga"), g.to("fpga"), 0)
    ref_w, ref_norms = torch._weight_norm_interface(v, g, 0)
    assert norms.shape == ref_norms.shape
    torch.testing.assert_close(w.cpu(), ref_w, **TOL)
    torch.testing.assert_close(norms.cpu(), ref_norms, **TOL)
    assert_ran("_weight_norm_interface")


def test_module_weight_norm(fresh_stats):
    """torch.nn.utils.parametrizations.weight_norm on a conv, as wav2vec2's positional embedding."""
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(8, 8, 3, padding=1, groups=2)
    conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
    x = torch.randn(2, 8, 11)
    import copy
    dev = copy.deepcopy(conv).to("fpga")
    out = dev(x.to("fpga"))
    out.sum().backward()
    ref = conv(x)
    ref.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **TOL)
    for (n, p), (_, q) in zip(dev.named_parameters(), conv.named_parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, **TOL, msg=n)
    s = aten_fpga.stats()["_weight_norm_interface"]
    assert s["fpga"] >= 1 and s["cpu_fallback"] == 0
