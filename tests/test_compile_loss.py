"""torch.compile(backend="aten_fpga") of the cross entropy (log_softmax + nll_loss, forward and
backward): nll_loss decomposes into class selections (aten_fpga/compile/loss.py) that fuse with the
log_softmax chains around them -- a few fused kernels where eager launches about 40 -- and the
gradient equals eager "fpga"'s bit for bit (the loss within rounding: its sum adds in another
order), ignored targets included. Cases it does not
decompose (class weights, another reduction) run eager's nll_loss, unchanged."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
import aten_fpga.compile  # noqa: F401  (registers the backend)
from aten_fpga.compile import codegen, runner
from aten_fpga.compile.fuse import FusedKernel
import compile_models as cm
from cnn_support import on_device
from compile_support import card_without_fused_kernels, fresh_dynamo, keep_global_rng  # noqa: F401


def logits(seed=3, rows=8, classes=10, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, classes, generator=g) * 3).to(dtype)


def step(f, z, t):
    """f(z, t) and its backward on "fpga", z a kernel's output (device-resident): the loss, z's
    gradient and the launches per op of the step."""
    dz = on_device(z, requires_grad=True)
    aten_fpga.reset_stats()
    loss = f(dz, t.to("fpga"))
    loss.backward()
    launched = {op: r["launches"] for op, r in aten_fpga.report().items() if r["launches"]}
    assert not any(r["cpu_fallback"] for r in aten_fpga.report().values())
    return loss.detach().cpu(), dz.grad.cpu(), launched


def compiled_step(f, z, t):
    """step() of f compiled, after a first step that compiles it; the fused kernels it ran render
    lint-clean at every level."""
    compiled = torch.compile(f, backend="aten_fpga")
    step(compiled, z, t)
    runner.RECORDED.clear()
    got = step(compiled, z, t)
    assert_lint_clean(runner.RECORDED.values())
    return got


def assert_lint_clean(kernels):
    for kernel in kernels:
        for lv in (1, 2, 3, 4):
            assert codegen.lint(kernel, lv) == [], (kernel.name, lv)


def assert_same(got, expected):
    """The gradient bit for bit (the same element functions on the same values); the loss within
    rounding: its sum adds the picked log-probabilities in another order than eager's row sums."""
    torch.testing.assert_close(got[1], expected[1], rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(got[0], expected[0], rtol=2e-7 if got[0].dtype == torch.float32 else 1e-3, atol=0,
                               equal_nan=True)


@pytest.mark.parametrize("ignore_index, target", [
    (-100, [1, 3, -100, 9, 3, 0, 5, -100]),  # the default: some targets ignored
    (3, [1, 3, 7, 9, 3, 0, 5, 3]),  # an ignored class that targets name
    (-100, [-100] * 8),  # every target ignored: 0 / 0, NaN as eager
])
@pytest.mark.parametrize("classes", [10, 16])  # rows of whole 512-bit words or not (XCL_OPT 4: elements or words)
def test_cross_entropy_is_five_kernels_and_matches_eager(level, ignore_index, target, classes):
    """Forward: the row maximum (a lone reduction), exp of the shifted rows and their sums, the
    count of valid targets, and log + the selected log-probabilities' sum, negated and divided by
    the count; backward: one kernel. Eager makes about 40 launches."""
    def f(z, t):
        return F.cross_entropy(z, t, ignore_index=ignore_index)

    z, t = logits(classes=classes), torch.tensor(target)
    expected = step(f, z, t)
    got = compiled_step(f, z, t)
    # the row maximum of whole-word rows is the table's amax kernel; the fill is backward()'s seed
    row_max = {"aten_fpga::fused": 5} if classes == 10 else {"aten_fpga::fused": 4, "amax.out": 1}
    assert got[2] == {**row_max, "fill_.Scalar": 1}, got[2]
    assert sum(expected[2].values()) >= 35, expected[2]
    assert_same(got, expected)
    if ignore_index == -100 and min(target) >= 0 or ignore_index != -100:
        torch.testing.assert_close(got[0], F.cross_entropy(z, t, ignore_index=ignore_index), rtol=1e-6, atol=1e-6)


def test_float16_cross_entropy_matches_eager():
    """float16 logits: the class selections step in float16 as eager's kernels store."""
    def f(z, t):
        return F.cross_entropy(z, t)

    z, t = logits(seed=4, dtype=torch.float16), torch.tensor([0, 9, 2, -100, 4, 4, 7, 1])
    expected = step(f, z, t)
    got = compiled_step(f, z, t)
    # log_softmax's decomposition computes float16 in float32 (conversions split its chains); the
    # nll_loss part fuses: no one-hot kernels of eager's host op
    assert "eq.Tensor_out" not in got[2] and "eq.Tensor_out" in expected[2], (got[2], expected[2])
    assert_same(got, expected)


@pytest.mark.parametrize("case", ["weight", "sum"])
def test_weighted_or_summed_nll_loss_stays_eager(case):
    """Class weights or a sum reduction: nll_loss is not decomposed; eager's host op runs (its
    one-hot eq kernel), with eager's values."""
    w = torch.rand(10, generator=torch.Generator().manual_seed(5)).to("fpga")
    kw = {"weight": w} if case == "weight" else {"reduction": "sum"}

    def f(z, t):
        return F.cross_entropy(z, t, **kw)

    z, t = logits(seed=6), torch.tensor([1, 3, -100, 9, 3, 0, 5, 2])
    expected = step(f, z, t)
    got = compiled_step(f, z, t)
    assert got[2]["eq.Tensor_out"] == 2 and got[2]["aten_fpga::fused"] == 5, got[2]  # nll_loss forward + backward
    assert_same(got, expected)


def test_classifier_reads_its_padded_logits_in_place(level, monkeypatch):
    """A linear classifier's step: the fused GEMM's output rows of 10 (padded to whole words at
    XCL_OPT 4) are read in place by the chain after it (a "pitched" port), no dense copy; the
    loss and the gradients equal eager's; every fused kernel renders lint-clean at every level."""
    torch.manual_seed(0)
    eager = cm.WithLoss("cnn", torch.nn.Linear(84, 10)).to("fpga")  # "cnn": the cross entropy
    fused = copy.deepcopy(eager)
    g = torch.Generator().manual_seed(7)
    x, t = on_device(torch.randn(8, 84, generator=g)), torch.tensor([1, 3, -100, 9, 3, 0, 5, 2]).to("fpga")

    def run(m):
        aten_fpga.reset_stats()
        loss = m(x, t)
        loss.backward()
        return loss.detach().cpu(), aten_fpga.report()

    loss_e, _ = run(eager)
    compiled = torch.compile(fused, backend="aten_fpga")
    run(compiled)
    fused.zero_grad(set_to_none=True)
    runner.RECORDED.clear()
    loss_c, rep = run(compiled)
    torch.testing.assert_close(loss_c, loss_e, rtol=2e-7, atol=0)
    for (name, pe), pc in zip(eager.named_parameters(), fused.parameters()):
        torch.testing.assert_close(pc.grad.cpu(), pe.grad.cpu(), rtol=1e-6, atol=1e-6, msg=name)
    kernels = [k for k in runner.RECORDED.values() if isinstance(k, FusedKernel)]
    modes = {p.mode for k in kernels for p in k.inputs}
    assert ("pitched" in modes) == (level == 4), modes
    copies = rep["copy_"]["launches"] if "copy_" in rep else 0
    if level == 4:  # read as dense rows instead, the logits are copied first (the GEMMs' own copies aside)
        monkeypatch.setattr(runner, "_padded_rows", lambda t: None)
        fused.zero_grad(set_to_none=True)
        torch._dynamo.reset()  # new fused groups: a group decides its ports once per input layout
        _, dense = run(torch.compile(fused, backend="aten_fpga"))
        assert dense["copy_"]["launches"] > copies, (dense["copy_"], copies)
    assert_lint_clean(runner.RECORDED.values())


def test_cross_entropy_runs_unfused_where_a_card_lacks_its_kernels(monkeypatch):
    """On XRT without the fused kernels in the xclbin, the class selections run as their unfused
    form (eq against the class indices, where: table kernels) with the same values."""
    def f(z, t):
        return F.cross_entropy(z, t, ignore_index=3)

    z, t = logits(seed=8), torch.tensor([1, 3, 7, 9, 3, 0, 5, 2])
    expected = step(f, z, t)
    card_without_fused_kernels(monkeypatch)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        got = compiled_step(f, z, t)
    assert "aten_fpga::fused" not in got[2] and got[2]["eq.Tensor_out"] >= 2, got[2]
    assert_same(got, expected)
