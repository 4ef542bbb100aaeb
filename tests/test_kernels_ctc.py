"""CTC loss (kernels/hls/ctc: the alpha and beta recursions) against torch on the CPU, at every
XCL_OPT level: the loss with every reduction and zero_infinity, its gradient, targets padded [batch,
max] and concatenated, lengths as lists and as tensors. Inputs are chained (log_softmax run by a
kernel), and _ctc_loss / _ctc_loss_backward must have launched kernels with no fallback.

The kernels compute ATen's operations in ATen's order (its log-sum-exp steps, the gradient's
collection in descending s), so the loss and its gradient agree to float32 rounding.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import aten_fpga

# The gradient goes on through log_softmax's backward, whose row sums are the reduce kernels' order.
TOL = dict(rtol=1e-5, atol=1e-5)


def problem(time=30, batch=4, labels=7, max_target=6, seed=0, repeats=True):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(time, batch, labels, generator=gen)
    target_lengths = torch.randint(1, max_target + 1, (batch,), generator=gen)
    target_lengths[0] = max_target
    input_lengths = torch.randint(2 * max_target + 1, time + 1, (batch,), generator=gen)
    input_lengths[0] = time
    targets = torch.randint(1, labels, (batch, max_target), generator=gen)
    if repeats:
        targets[0, 1] = targets[0, 0]  # a repeated label: no skip transition between them
    return logits, targets, input_lengths, target_lengths


def run(device, logits, targets, il, tl, **kw):
    x = logits.to(device).requires_grad_(True)
    lp = F.log_softmax(x, dim=-1)
    loss = F.ctc_loss(lp, targets.to(device), il.to(device) if torch.is_tensor(il) else il,
                      tl.to(device) if torch.is_tensor(tl) else tl, **kw)
    (loss * torch.linspace(0.5, 1.5, loss.numel()).view(loss.shape).to(device)).sum().backward()
    return loss.detach().cpu(), x.grad.cpu()


def assert_ran(*ops):
    """Each op (by base name: F.ctc_loss reaches the list or the .Tensor overload) ran kernels, and
    nothing fell back."""
    stats = aten_fpga.stats()
    for op in ops:
        runs = sum(s["fpga"] for name, s in stats.items() if name.split(".")[0] == op)
        assert runs >= 1, (op, stats)
    assert not {op: s for op, s in stats.items() if s["cpu_fallback"]}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss_and_gradient(level, fresh_stats, reduction):
    logits, targets, il, tl = problem()
    loss, grad = run("fpga", logits, targets, il, tl, reduction=reduction)
    ref_loss, ref_grad = run("cpu", logits, targets, il, tl, reduction=reduction)
    torch.testing.assert_close(loss, ref_loss, **TOL)
    torch.testing.assert_close(grad, ref_grad, **TOL)
    assert_ran("_ctc_loss", "_ctc_loss_backward")


def test_concatenated_targets_and_list_lengths(level, fresh_stats):
    logits, targets, il, tl = problem(seed=1)
    flat = torch.cat([targets[b, :tl[b]] for b in range(targets.shape[0])])
    loss, grad = run("fpga", logits, flat, il.tolist(), tl.tolist(), reduction="sum")
    ref_loss, ref_grad = run("cpu", logits, flat, il.tolist(), tl.tolist(), reduction="sum")
    torch.testing.assert_close(loss, ref_loss, **TOL)
    torch.testing.assert_close(grad, ref_grad, **TOL)
    assert_ran("_ctc_loss", "_ctc_loss_backward")


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignment(level, fresh_stats, zero_infinity):
    """An item whose input is too short for its target has an infinite loss; zero_infinity zeroes
    that loss and its gradient, as ATen does."""
    logits, targets, il, tl = problem(seed=2)
    il[1] = 3  # shorter than its target needs
    tl[1] = 5
    loss, grad = run("fpga", logits, targets, il, tl, reduction="none", zero_infinity=zero_infinity)
    ref_loss, ref_grad = run("cpu", logits, targets, il, tl, reduction="none", zero_infinity=zero_infinity)
    assert torch.isinf(ref_loss[1]) != zero_infinity
    torch.testing.assert_close(loss, ref_loss, **TOL)
    if zero_infinity:
        torch.testing.assert_close(grad, ref_grad, **TOL)
    assert_ran("_ctc_loss")


def test_forward_outputs_against_aten(fresh_stats):
    """_ctc_loss's own outputs: the loss per item and log_alpha within each item's lengths (ATen leaves
    the rest uninitialized; the kernel writes -inf there)."""
    logits, targets, il, tl = problem(seed=3)
    lp = F.log_softmax(logits, -1)
    nll, alpha = torch.ops.aten._ctc_loss(F.log_softmax(logits.to("fpga"), -1), targets.to("fpga"), il.tolist(), tl.tolist())
    ref_nll, ref_alpha = torch.ops.aten._ctc_loss(lp, targets, il.tolist(), tl.tolist())
    torch.testing.assert_close(nll.cpu(), ref_nll, **TOL)
    alpha = alpha.cpu()
    for b in range(logits.shape[1]):
        t, s = int(il[b]), 2 * int(tl[b]) + 1
        torch.testing.assert_close(alpha[b, :t, :s], ref_alpha[b, :t, :s], **TOL)
        assert torch.all(alpha[b, t:] == -torch.inf) and torch.all(alpha[b, :, s:] == -torch.inf)
    assert_ran("_ctc_loss")


def test_bad_blank_is_atens_error(fresh_stats):
    """Arguments ATen rejects run on the CPU (counted), so the error is ATen's own."""
    logits, targets, il, tl = problem()
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(F.log_softmax(logits.to("fpga"), -1), targets.to("fpga"), il, tl, blank=99)
    assert sum(s["cpu_fallback"] for op, s in aten_fpga.stats().items() if op.split(".")[0] == "_ctc_loss") == 1
