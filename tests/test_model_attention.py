"""Causal self-attention on device "fpga": F.scaled_dot_product_attention's math path (PyTorch's
reference implementation, the one a PrivateUse1 device gets) against the CPU, with the set of ops
that still fall back to the CPU asserted to be within an explicit list.

EXPECTED_FALLBACKS shrinks as kernels land: it lists each op that has no kernel yet and which
part of the project brings it. Everything else -- the causal mask (ones, tril, logical_not,
masked_fill / where), the copies and transposes, dropout's Bernoulli mask -- runs as kernels."""

import pytest
import torch
import torch.nn.functional as F

import aten_fpga

# op -> why it still falls back (remove the line when its kernel lands)
EXPECTED_FALLBACKS: dict[str, str] = {}  # none: bmm, softmax, masks, fills and isneginf are kernels


def qkv(seed, b=2, h=4, t=16, d=8):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, t, d, generator=g) for _ in range(3)]


def fallbacks():
    return {k for k, v in aten_fpga.stats().items() if v["cpu_fallback"]}


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_forward_and_backward(causal):
    q, k, v = qkv(0)
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    out_ref = F.scaled_dot_product_attention(*ref, is_causal=causal)
    out_ref.backward(torch.ones_like(out_ref))

    dev = [(t.to("fpga") * 1).detach().requires_grad_() for t in (q, k, v)]  # valid only on the device
    aten_fpga.reset_stats()
    out = F.scaled_dot_product_attention(*dev, is_causal=causal)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(out.cpu(), out_ref.detach(), rtol=1e-5, atol=1e-5)
    for a, b in zip(dev, ref):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)
    unexpected = fallbacks() - set(EXPECTED_FALLBACKS)
    assert not unexpected, (unexpected, aten_fpga.stats())


def test_sdpa_explicit_causal_mask_and_dropout():
    q, k, v = qkv(1)
    t = q.shape[-2]
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    dev = [x.to("fpga") * 1 for x in (q, k, v)]
    aten_fpga.reset_stats()
    out = F.scaled_dot_product_attention(*dev, attn_mask=mask.to("fpga"))
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert not fallbacks() - set(EXPECTED_FALLBACKS), aten_fpga.stats()

    # dropout inside attention: reproducible for a seed, and its mask comes from the device RNG
    torch.fpga.manual_seed(3)
    a = F.scaled_dot_product_attention(*dev, is_causal=True, dropout_p=0.1).cpu()
    torch.fpga.manual_seed(3)
    aten_fpga.reset_stats()
    b = F.scaled_dot_product_attention(*dev, is_causal=True, dropout_p=0.1).cpu()
    assert torch.equal(a, b) and torch.isfinite(a).all()
    s = aten_fpga.stats()
    assert s.get("native_dropout", {}).get("fpga", 0) + s.get("bernoulli_.float", {}).get("fpga", 0) >= 1, s
    assert not fallbacks() - set(EXPECTED_FALLBACKS), s
