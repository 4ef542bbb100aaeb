"""*_overrideable ops (convolution's) work on "fpga": the convolutions the im2col + GEMM kernels
serve run on the device, and the rest (transposed ones) reach the counted CPU fallback, which runs
them as their CPU equivalent (their ATen kernels throw on a backend they do not know)."""
from __future__ import annotations

import copy

import pytest
import torch

import aten_fpga

MODULES = {
    "conv2d": (lambda: torch.nn.Conv2d(3, 8, 3, padding=1, stride=2), (2, 3, 9, 9)),
    "conv1d": (lambda: torch.nn.Conv1d(2, 4, 5, dilation=2, groups=2), (3, 2, 20)),
    "conv_transpose2d": (lambda: torch.nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1), (1, 4, 5, 6)),
    "conv2d_no_bias": (lambda: torch.nn.Conv2d(2, 2, 1, bias=False), (1, 2, 4, 4)),
}


@pytest.mark.parametrize("name", MODULES)
def test_convolution_forward_and_backward(name):
    make, shape = MODULES[name]
    torch.manual_seed(0)
    cpu = make()
    dev = copy.deepcopy(cpu).to("fpga")
    x = torch.randn(shape)
    X = (x.to("fpga") * 1).requires_grad_()  # valid only in device memory
    x.requires_grad_()
    aten_fpga.reset_stats()
    Y = dev(X)
    Y.square().sum().backward()
    y = cpu(x)
    y.square().sum().backward()
    assert Y.device.type == "fpga"
    torch.testing.assert_close(Y.cpu(), y.detach())
    torch.testing.assert_close(X.grad.cpu(), x.grad)
    for p, q in zip(dev.parameters(), cpu.parameters()):
        assert p.grad.device.type == "fpga"
        torch.testing.assert_close(p.grad.cpu(), q.grad)
    s = aten_fpga.stats()
    where = {"fpga": 0, "cpu_fallback": 1} if "transpose" in name else {"fpga": 1, "cpu_fallback": 0}
    assert s["convolution_overrideable"] == where
    assert s["convolution_backward_overrideable"] == where


def test_convolution_backward_without_input_grad():
    """output_mask selects the gradients: weights only, as for a first layer."""
    conv = torch.nn.Conv2d(1, 2, 3).to("fpga")
    x = torch.randn(1, 1, 6, 6)
    conv(x.to("fpga")).sum().backward()
    ref = torch.nn.Conv2d(1, 2, 3)
    ref.load_state_dict({k: v.cpu() for k, v in conv.state_dict().items()})
    ref(x).sum().backward()
    torch.testing.assert_close(conv.weight.grad.cpu(), ref.weight.grad)
    torch.testing.assert_close(conv.bias.grad.cpu(), ref.bias.grad)


def test_fused_attention_hooks_run_as_the_cpus_flash_attention():
    """The attention hooks (reached when a backend picks them) run as the CPU's flash attention."""
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    Q, K, V = ((t.to("fpga") * 1) for t in (q, k, v))
    aten_fpga.reset_stats()
    got = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(Q, K, V, is_causal=True)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)
    torch.testing.assert_close(got[0].cpu(), out, rtol=0, atol=0)
    torch.testing.assert_close(got[1].cpu(), lse, rtol=0, atol=0)
    assert got[4] == 5 and got[5] == 5
    g = torch.randn_like(out)
    grads = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
        g.to("fpga"), Q, K, V, torch.Tensor().to("fpga"), [True, True, True, False], got[0], got[1], got[2], got[3],
        got[4], got[5], 0.0, True, got[6], got[7])
    expected = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(g, q, k, v, out, lse, 0.0, True)
    for a, e in zip(grads[:3], expected):
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0)
    s = aten_fpga.stats()
    assert s["_scaled_dot_product_fused_attention_overrideable"]["cpu_fallback"] == 1
    assert s["_scaled_dot_product_fused_attention_overrideable_backward"]["cpu_fallback"] == 1
