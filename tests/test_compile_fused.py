"""torch.compile(backend="aten_fpga"): chains of pointwise ops (and a reduction ending one) become
one fused kernel, compiled with g++ on demand, launched through the launch path; results equal
eager "fpga" (bit for bit where eager is exact), with fewer launches and fewer bytes."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
import aten_fpga.compile as afc
from aten_fpga.compile import cache, codegen, runner
from aten_fpga.compile.fuse import GemmEpilogue, partition, plan
from cnn_support import on_device
from compile_support import card_without_fused_kernels, fresh_dynamo, keep_global_rng  # noqa: F401
from codegen.lint import lint_source


def launches() -> int:
    return sum(r["launches"] for r in aten_fpga.report().values())


def kernel_bytes() -> int:
    return sum(r["kernel_bytes"] for r in aten_fpga.report().values())


def counted(fn, *args):
    """fn(*args), the kernel launches and the device bytes it made."""
    aten_fpga.reset_stats()
    out = fn(*args)
    return out, launches(), kernel_bytes()


def compiled_run(f, *dev):
    """f compiled, warmed up (traced and built), then run once more: its outputs, and the launches
    per op of that last run."""
    compiled = torch.compile(f, backend="aten_fpga")
    compiled(*dev)
    aten_fpga.reset_stats()
    got = compiled(*dev)
    return got, {op: r["launches"] for op, r in aten_fpga.report().items() if r["launches"]}


def chain(x, b, w):
    """gelu of a biased input, scaled, shifted by a per-row value, relu: five ops, one shape."""
    return torch.relu(F.gelu(x + b) * 2.0 - w)


def test_pointwise_chain_is_one_kernel_and_bit_exact():
    g = torch.Generator().manual_seed(0)
    x, b, w = torch.randn(64, 48, generator=g), torch.randn(48, generator=g), torch.randn(64, 1, generator=g)
    dx, db, dw = on_device(x), on_device(b), on_device(w)  # outputs of kernels: valid only on the device
    eager, eager_launches, eager_bytes = counted(chain, dx, db, dw)
    compiled = torch.compile(chain, backend="aten_fpga")
    compiled(dx, db, dw)  # compiles (and builds the fused kernel)
    out, fused_launches, fused_bytes = counted(compiled, dx, db, dw)
    assert out.device.type == "fpga"
    torch.testing.assert_close(out.cpu(), eager.cpu(), rtol=0, atol=0)  # same element functions, same rounding
    torch.testing.assert_close(out.cpu(), chain(x, b, w), rtol=1e-5, atol=1e-6)
    report = aten_fpga.report()
    assert report["aten_fpga::fused"]["launches"] == 1, report
    assert all(k.startswith("v_fused_") for k in report["aten_fpga::fused"]["kernels"])
    assert eager_launches >= 5 and fused_launches == 1, (eager_launches, fused_launches)  # eager: 5 ops + broadcasts
    assert 2 * fused_bytes <= eager_bytes, (fused_bytes, eager_bytes)


def test_every_level_runs_the_chain_and_its_reduction(level):
    """The kernel generated at the loaded image's level (1 loop, 2-3 dataflow, 4 words) computes
    what eager does, in one launch and no copy of its broadcast inputs; at level 4 with a last dim
    that is no whole number of words too (that kernel streams elements: FusedKernel.words)."""
    def f(x, b, w):
        y = chain(x, b, w)
        return y, (y * x).sum(-1)

    for cols in (48, 20):
        torch._dynamo.reset()
        g = torch.Generator().manual_seed(cols)
        x, b, w = torch.randn(16, cols, generator=g), torch.randn(cols, generator=g), torch.randn(16, 1, generator=g)
        dx, db, dw = on_device(x), on_device(b), on_device(w)
        expected = f(dx, db, dw)
        aten_fpga.reset_stats()
        got = torch.compile(f, backend="aten_fpga")(dx, db, dw)
        torch.testing.assert_close(got[0].cpu(), expected[0].cpu(), rtol=0, atol=0)
        torch.testing.assert_close(got[1].cpu(), expected[1].cpu(), rtol=1e-6, atol=1e-6)
        launches = {op: r["launches"] for op, r in aten_fpga.report().items() if r["launches"]}
        assert launches == {"aten_fpga::fused": 1}, (level, cols, launches)


def test_chain_ending_in_a_row_reduction():
    def f(x):
        e = torch.exp(x - 1.5) * x
        return e, e.sum(-1, keepdim=True), (x * x).amax(-1)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 64, generator=g)
    dx = on_device(x)
    expected = f(dx)
    compiled = torch.compile(f, backend="aten_fpga")
    aten_fpga.reset_stats()
    got = compiled(dx)
    for a, e, c in zip(got, expected, f(x)):
        assert a.shape == e.shape
        torch.testing.assert_close(a.cpu(), e.cpu(), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(a.cpu(), c, rtol=1e-5, atol=1e-5)
    assert aten_fpga.report()["aten_fpga::fused"]["launches"] == 2


def test_training_step_forward_and_backward_fuse():
    def f(x, w):
        y = torch.tanh(x * w + 0.5)
        return (y * y).sum()

    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(16, 32, generator=g), torch.randn(32, generator=g)
    ref_w = w.clone().requires_grad_()
    f(x, ref_w).backward()
    dw = on_device(w, requires_grad=True)
    compiled = torch.compile(f, backend="aten_fpga")
    loss = compiled(on_device(x), dw)
    loss.backward()
    torch.testing.assert_close(loss.detach().cpu(), f(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dw.grad.cpu(), ref_w.grad, rtol=1e-5, atol=1e-5)
    assert aten_fpga.report()["aten_fpga::fused"]["launches"] >= 2  # forward and backward


def test_dynamic_shapes_reuse_the_kernel():
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(chain, backend="aten_fpga", dynamic=True)
    for rows in (8, 24, 40):
        x, b, w = torch.randn(rows, 48), torch.randn(48), torch.randn(rows, 1)
        out = compiled(on_device(x), on_device(b), on_device(w))
        torch.testing.assert_close(out.cpu(), chain(x, b, w), rtol=1e-5, atol=1e-6)
    assert len(runner.RECORDED) >= 1
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert frames == 1, frames  # one graph for every size: the kernel takes its sizes at run time


def test_graph_break_splits_the_chain():
    def f(x):
        y = torch.sigmoid(x) * 3.0
        print("graph break")  # dynamo runs this in Python: two graphs
        return torch.exp(y) - y

    x = torch.randn(100)
    out = torch.compile(f, backend="aten_fpga")(on_device(x))
    torch.testing.assert_close(out.cpu(), f(x), rtol=1e-5, atol=1e-6)


def test_every_level_renders_lint_clean_and_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("ATEN_FPGA_CACHE", str(tmp_path))
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, b, w, s):
        y = torch.relu(F.gelu(x + b) * s - w)
        return y, (y * y).sum(-1)

    gm = make_fx(f, tracing_mode="fake")(torch.randn(4, 32), torch.randn(32), torch.randn(4, 1), torch.randn(()))
    (group,) = partition(gm)
    kernel = plan(group).kernel
    assert [p.mode for p in kernel.inputs] == ["full", "row", "scalar", "col"]
    for level in (1, 2, 3, 4):
        assert lint_source(codegen.render(kernel, level), level) == [], level
    path = cache.build(kernel, 2)
    assert os.path.exists(path) and os.path.dirname(path) == str(tmp_path)
    before = dict(cache.STATS)
    assert cache.build(kernel, 2) == path and cache.STATS["cached"] == before["cached"] + 1
    assert [f for f in os.listdir(tmp_path) if not f.endswith(".so")] == []  # no work folder left behind


def test_concurrent_processes_share_the_cache(tmp_path):
    """Two processes compiling the same kernel at once both succeed and leave one object."""
    script = (
        "import torch, aten_fpga.compile\n"
        "from torch.fx.experimental.proxy_tensor import make_fx\n"
        "from aten_fpga.compile import cache\n"
        "from aten_fpga.compile.fuse import partition, plan\n"
        "gm = make_fx(lambda x: torch.exp(x) * x + 1.0, tracing_mode='fake')(torch.randn(8))\n"
        "print(cache.build(plan(partition(gm)[0]).kernel, 1))\n")
    env = {**os.environ, "ATEN_FPGA_CACHE": str(tmp_path), "PYTHONPATH": os.getcwd()}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    paths = {p.communicate()[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1 and os.listdir(tmp_path) == [os.path.basename(paths.pop())]


def test_missing_kernel_on_a_card_runs_unfused_with_a_warning(monkeypatch):
    """On XRT, a fused kernel that the loaded xclbin lacks runs as its ops, and says how to build it."""
    card_without_fused_kernels(monkeypatch)
    g = torch.Generator().manual_seed(3)
    x, b, w = torch.randn(8, 16, generator=g), torch.randn(16, generator=g), torch.randn(8, 1, generator=g)
    compiled = torch.compile(chain, backend="aten_fpga")
    aten_fpga.reset_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(on_device(x), on_device(b), on_device(w))
    assert any("scons target=hw fused=" in str(c.message) for c in caught), [str(c.message) for c in caught]
    torch.testing.assert_close(out.cpu(), chain(x, b, w), rtol=1e-5, atol=1e-6)
    assert "aten_fpga::fused" not in aten_fpga.report()

    # Fused GEMMs with an operand prologue and moved column sums run their original nodes too.
    def grads(d, s, w1, keep, x):
        g = d * s
        y = torch.ops.aten.threshold_backward(torch.mm(g, w1), keep, 0)
        return torch.mm(g.t(), x), g.sum(0), torch.mm(y.t(), x), y.sum(0)

    torch._dynamo.reset()
    cpu = [torch.randn(32, 48, generator=g), torch.tensor(0.5), torch.randn(48, 64, generator=g),
           torch.randn(32, 64, generator=g), torch.randn(32, 16, generator=g)]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out = torch.compile(grads, backend="aten_fpga")(*[on_device(v) for v in cpu])
    for a, e in zip(out, grads(*cpu)):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)
    assert "aten_fpga::fused" not in aten_fpga.report()


def test_export_writes_the_recorded_kernels(tmp_path):
    compiled = torch.compile(chain, backend="aten_fpga")
    compiled(on_device(torch.randn(4, 8)), on_device(torch.randn(8)), on_device(torch.randn(4, 1)))
    written = afc.export(str(tmp_path), level=4)
    assert written and len(written) == len(runner.RECORDED)  # the fused GEMMs of earlier tests too
    for path in written:
        kernel = runner.RECORDED[os.path.basename(path)[:-4]]
        assert open(path).read() == codegen.render(kernel, 4) and codegen.lint(kernel, 4) == [], path
    names = open(tmp_path / "kernels.txt").read().split("\n")
    assert all(os.path.basename(p)[:-4] in names for p in written)


def test_backend_is_listed():
    assert "aten_fpga" in torch._dynamo.list_backends()


def test_export_cli_runs_a_script_and_writes_its_kernels(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch, aten_fpga\n"
                      "f = torch.compile(lambda x: torch.sigmoid(x * 2.0) + x, backend='aten_fpga')\n"
                      "f(torch.randn(64, device='fpga'))\n")
    out = tmp_path / "fused"
    r = subprocess.run([sys.executable, "-m", "aten_fpga.compile", "export", str(out), "--level", "2", str(script)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=600)
    assert r.returncode == 0, r.stderr
    (source,) = [p for p in os.listdir(out) if p.endswith(".cpp")]
    assert "fused=" in r.stdout and lint_source((out / source).read_text(), 2) == []


# --- fused GEMMs: bias and the pointwise chain after mm/addmm in the GEMM's write stage -----------

def mlp_layer(x, w, b, r):
    """A linear layer's addmm, gelu, a scale and a residual: one fused GEMM."""
    return F.gelu(F.linear(x, w, b)) * 0.5 + r


def gemm_operands(rows=64, k=48, n=32, seed=5):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, k, generator=g), torch.randn(n, k, generator=g), torch.randn(n, generator=g),
            torch.randn(rows, n, generator=g))


def test_gemm_epilogue_is_one_kernel_and_bit_exact():
    cpu = gemm_operands()
    dev = [on_device(t) for t in cpu]
    eager, eager_launches, eager_bytes = counted(mlp_layer, *dev)
    compiled = torch.compile(mlp_layer, backend="aten_fpga")
    compiled(*dev)
    out, fused_launches, fused_bytes = counted(compiled, *dev)
    torch.testing.assert_close(out.cpu(), eager.cpu(), rtol=0, atol=0)  # the GEMM's rounding, then the same steps
    torch.testing.assert_close(out.cpu(), mlp_layer(*cpu), rtol=1e-5, atol=1e-5)
    report = aten_fpga.report()
    assert report["aten_fpga::fused"]["launches"] == 1, report
    assert all(k.startswith("v_fused_gemm_") for k in report["aten_fpga::fused"]["kernels"]), report
    assert "aten::addmm" not in report, report  # the table's GEMM did not run: the fused one did its work
    # eager: the bias copied into c, the GEMM, gelu, mul, add
    assert eager_launches >= 5 and fused_launches == 1, (eager_launches, fused_launches)
    assert 2 * fused_bytes <= eager_bytes, (fused_bytes, eager_bytes)


def test_gemm_epilogue_gradients_match_eager():
    """Forward and backward of a two-layer block: addmm + gelu forward (the second with the loss's
    sum), mm + gelu_backward backward (with the bias gradient's column sum) fuse; the weight
    gradients equal eager's bit for bit (the same kernels' arithmetic), the loss and the bias
    gradients within float32 rounding (the write stage sums tile by tile, the reduce kernel in
    interleaved partial sums)."""
    def block(x, w1, b1, w2, b2):
        h = F.gelu(F.linear(x, w1, b1))
        return (F.linear(h, w2, b2) + x).pow(2).sum()

    g = torch.Generator().manual_seed(6)
    cpu = [torch.randn(32, 16, generator=g), torch.randn(64, 16, generator=g) * 0.2, torch.randn(64, generator=g),
           torch.randn(16, 64, generator=g) * 0.2, torch.randn(16, generator=g)]
    eager_args = [on_device(t, requires_grad=i > 0) for i, t in enumerate(cpu)]
    fused_args = [on_device(t, requires_grad=i > 0) for i, t in enumerate(cpu)]
    aten_fpga.reset_stats()
    block(*eager_args).backward()
    eager_launches = launches()
    compiled = torch.compile(block, backend="aten_fpga")
    compiled(*[on_device(t, requires_grad=i > 0) for i, t in enumerate(cpu)]).backward()  # compiles
    aten_fpga.reset_stats()
    loss = compiled(*fused_args)
    loss.backward()
    fused_launches = launches()
    report = aten_fpga.report()
    gemms = [k for k in report["aten_fpga::fused"]["kernels"] if k.startswith("v_fused_gemm_")]
    assert len(gemms) >= 3, report["aten_fpga::fused"]  # two addmm forward, mm + gelu_backward backward
    torch.testing.assert_close(loss.detach().cpu(), block(*eager_args).detach().cpu(), rtol=1e-6, atol=0)
    for i, (e, c) in enumerate(zip(eager_args[1:], fused_args[1:]), 1):
        exact = i in (1, 3)  # the weights; the biases (2, 4) are column sums
        torch.testing.assert_close(c.grad.cpu(), e.grad.cpu(), rtol=0 if exact else 1e-5, atol=0 if exact else 1e-5)
    assert fused_launches < eager_launches, (fused_launches, eager_launches)


def test_gemm_epilogue_every_level(level):
    """The fused GEMM generated at the loaded image's level computes what eager does, bit for bit;
    at level 4 also when c's rows are not whole words (n = 20): c and the ports laid out as it are
    allocated with padded rows, and the outputs are views of them."""
    for n in (32, 20):
        torch._dynamo.reset()
        cpu = gemm_operands(rows=40, k=24, n=n, seed=n)
        dev = [on_device(t) for t in cpu]
        expected = mlp_layer(*dev)
        aten_fpga.reset_stats()
        got = torch.compile(mlp_layer, backend="aten_fpga")(*dev)
        torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=0, atol=0)
        kernels = aten_fpga.report().get("aten_fpga::fused", {}).get("kernels", {})
        fused_gemm = any(k.startswith("v_fused_gemm_") for k in kernels)
        assert fused_gemm and aten_fpga.report()["aten_fpga::fused"]["launches"] == 1, (level, n, kernels)
        assert "aten::addmm" not in aten_fpga.report()


def test_gemm_epilogue_renders_lint_clean_at_every_level(tmp_path, monkeypatch):
    """mm and addmm with every epilogue operand mode (bias row, per-row value, full residual) and a
    second output: each level's source passes the pragma lint, and g++ builds it."""
    monkeypatch.setenv("ATEN_FPGA_CACHE", str(tmp_path))
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w, b, r, s):
        h = torch.addmm(b, x, w.t())
        return F.gelu(h.view(2, 4, 32)) * s + r, h, torch.relu(torch.mm(x, w.t()))

    gm = make_fx(f, tracing_mode="fake")(torch.randn(8, 16), torch.randn(32, 16), torch.randn(32),
                                          torch.randn(2, 4, 32), torch.randn(2, 4, 1))
    kernels = [plan(g).kernel for g in partition(gm)]
    assert [type(k).__name__ for k in kernels] == ["GemmEpilogue", "GemmEpilogue"]
    addmm = kernels[0]
    assert [p.mode for p in addmm.inputs] == ["row", "col", "full"] and addmm.beta_port == "in0"
    assert addmm.c_value == "gemm" and len(addmm.outputs) == 1  # h itself is used: c stores it
    for kernel in kernels:
        for lv in (1, 2, 3, 4):
            assert codegen.lint(kernel, lv) == [], (kernel.name, lv)
    assert os.path.exists(cache.build(addmm, 4))


def test_chain_ending_in_a_whole_reduction(level):
    """A loss: a chain reduced over every element (mean, sum) is one kernel, reading its broadcast
    bias in place."""
    def f(y, t, b):
        d = (y + b) - t
        return (d * d).mean(), torch.exp(y).sum()

    g = torch.Generator().manual_seed(7)
    y, t, b = torch.randn(8, 4, 64, generator=g), torch.randn(8, 4, 64, generator=g), torch.randn(64, generator=g)
    dev = [on_device(v) for v in (y, t, b)]
    expected = f(*dev)
    got, launched = compiled_run(f, *dev)
    assert launched == {"aten_fpga::fused": 2}, launched  # no mean or sum kernel, no copy
    for a, e, c in zip(got, expected, f(y, t, b)):
        assert a.shape == e.shape == ()
        torch.testing.assert_close(a.cpu(), e.cpu(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a.cpu(), c, rtol=1e-5, atol=1e-5)


def test_chain_ending_in_a_column_reduction(level):
    """A bias gradient: a chain summed over every dim but the last (through a view that keeps the
    rows) is one kernel; its columns sum in PARTIALS interleaved sets, so it equals eager's sum
    within float32 rounding, not bit for bit."""
    def f(g, y):
        d = g * 2.0 - y
        return d, d.view(-1, d.shape[-1]).sum(0, keepdim=True), (d * y).sum((0, 1))

    gen = torch.Generator().manual_seed(8)
    g, y = torch.randn(6, 5, 48, generator=gen), torch.randn(6, 5, 48, generator=gen)
    dev = [on_device(v) for v in (g, y)]
    expected = f(*dev)
    got, launched = compiled_run(f, *dev)
    for a, e, c in zip(got, expected, f(g, y)):
        assert a.shape == e.shape
        torch.testing.assert_close(a.cpu(), e.cpu(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(a.cpu(), c, rtol=1e-5, atol=1e-5)
    assert launched == {"aten_fpga::fused": 2}, launched  # no sum kernel, no copy


def test_column_sum_of_a_gemm_output_is_one_kernel():
    """A bias gradient of a GEMM's output: the fused GEMM's write stage sums c's columns, one launch
    where eager makes two (the GEMM, then the reduce driver's in-place column reduction)."""
    def f(x, w):
        return torch.mm(x, w).sum(0, keepdim=True)

    g = torch.Generator().manual_seed(9)
    x, w = torch.randn(40, 32, generator=g), torch.randn(32, 48, generator=g)
    dev = [on_device(v) for v in (x, w)]
    expected, eager_launches, _ = counted(f, *dev)
    got, launched = compiled_run(f, *dev)
    fused_launches = sum(launched.values())
    assert launched["aten_fpga::fused"] == 1 and not any(op.startswith("sum") for op in launched), launched
    assert fused_launches == 1 < eager_launches, (fused_launches, eager_launches)
    assert [k for k in aten_fpga.report()["aten_fpga::fused"]["kernels"]][0].startswith("v_fused_gemm_")
    torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.cpu(), f(x, w), rtol=1e-5, atol=1e-4)


def test_gemm_write_stage_sums_and_means(level):
    """Reductions in a fused GEMM's write stage, at every level: a loss (the mean of every
    element), bias gradients (column sums, a column mean) and row maxima (softmax's amax) of an mm
    whose c spans several tiles each way, and a batched product's column sum over its items and
    row maxima; each product and its reductions are one launch, equal to eager within float32
    rounding (tile by tile sums; the maxima are exact)."""
    def f(x, w, t):
        y = torch.mm(x, w)
        d = y - t
        return y, (d * d).mean(), y.sum(0), d.mean(0, keepdim=True), y.amax(1)

    def g(q, k):
        s = torch.bmm(q, k) * 0.5
        return s, s.sum((0, 1)), s.amax(-1, keepdim=True)

    gen = torch.Generator().manual_seed(12)
    cases = [(f, (torch.randn(300, 32, generator=gen), torch.randn(32, 400, generator=gen),
                  torch.randn(300, 400, generator=gen))),
             (g, (torch.randn(3, 40, 32, generator=gen), torch.randn(3, 32, 48, generator=gen)))]
    for fn, cpu in cases:
        torch._dynamo.reset()
        dev = [on_device(v) for v in cpu]
        expected = fn(*dev)
        got, launched = compiled_run(fn, *dev)
        assert launched == {"aten_fpga::fused": 1}, (level, launched)
        (name,) = aten_fpga.report()["aten_fpga::fused"]["kernels"]
        kernel = runner.RECORDED[name]
        assert isinstance(kernel, GemmEpilogue) and len(kernel.reductions) == len(got) - 1, kernel
        for lv in (1, 2, 3, 4):  # every reduction kind's write stage passes the pragma lint
            assert codegen.lint(kernel, lv) == [], (name, lv)
        torch.testing.assert_close(got[0].cpu(), expected[0].cpu(), rtol=0, atol=0)  # c: the GEMM's own value
        for a, e, c in zip(got[1:], expected[1:], fn(*cpu)[1:]):
            assert a.shape == e.shape
            torch.testing.assert_close(a.cpu(), e.cpu(), rtol=1e-5, atol=1e-4)
            torch.testing.assert_close(a.cpu(), c, rtol=1e-4, atol=1e-3)


def test_producer_chain_joins_the_gemm_it_feeds():
    """A chain whose values only a fused GEMM's chain uses (LayerNorm backward's normalized input,
    from the input and its row statistics) is computed in the GEMM's write stage: with the product,
    the chain's product and both column sums, one launch."""
    def f(x, mean, rstd, g, w):
        xhat = (x - mean) * rstd
        d = torch.mm(g, w)
        return (d * xhat).sum(0), d.sum(0)

    gen = torch.Generator().manual_seed(14)
    cpu = [torch.randn(64, 48, generator=gen), torch.randn(64, 1, generator=gen), torch.rand(64, 1, generator=gen),
           torch.randn(64, 32, generator=gen), torch.randn(32, 48, generator=gen)]
    dev = [on_device(v) for v in cpu]
    expected, eager_launches, _ = counted(f, *dev)
    got, launched = compiled_run(f, *dev)
    assert launched == {"aten_fpga::fused": 1} and eager_launches >= 5, (launched, eager_launches)
    for a, e, c in zip(got, expected, f(*cpu)):
        torch.testing.assert_close(a.cpu(), e.cpu(), rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(a.cpu(), c, rtol=1e-4, atol=1e-3)


def test_gemm_operand_prologue_and_row_sums(level):
    """A loss gradient scaled by the backward's seed (g = d * s, s a 0-dim tensor) that only the
    products of the weight and input gradients read, as their a operand, and whose column sum is
    the bias gradient: each product computes g in its read stage (a prologue) and the one that
    reads g transposed also its rows' sums (cuBLASLt's BGRADA): two launches and no kernel for g,
    at every level. The products equal eager's bit for bit (g's element function, then the same
    GEMM); the sum within float32 rounding. k (300) and m (144) span several tiles and end mid-tile;
    the rows are whole words, so that the GEMM driver copies nothing at XCL_OPT 4."""
    def f(d, s, h, w):
        g = d * s
        return torch.mm(g.t(), h), torch.mm(g, w), g.sum(0, keepdim=True)

    gen = torch.Generator().manual_seed(15)
    cpu = [torch.randn(300, 144, generator=gen), torch.tensor(0.75), torch.randn(300, 80, generator=gen),
           torch.randn(144, 64, generator=gen)]
    dev = [on_device(v) for v in cpu]
    expected, eager_launches, eager_bytes = counted(f, *dev)
    got, launched = compiled_run(f, *dev)
    assert launched == {"aten_fpga::fused": 2} and eager_launches >= 4, (level, launched, eager_launches)
    kernels = [runner.RECORDED[n] for n in aten_fpga.report()["aten_fpga::fused"]["kernels"]]
    assert all(isinstance(k, GemmEpilogue) and len(k.a_steps) == 1 for k in kernels), kernels
    assert sorted(k.a_rows is not None for k in kernels) == [False, True], kernels
    for kernel in kernels:
        for lv in (1, 2, 3, 4):
            assert codegen.lint(kernel, lv) == [], (kernel.name, lv)
    for a, e in zip(got[:2], expected[:2]):
        torch.testing.assert_close(a.cpu(), e.cpu(), rtol=0, atol=0)
    assert got[2].shape == expected[2].shape
    torch.testing.assert_close(got[2].cpu(), expected[2].cpu(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[2].cpu(), f(*cpu)[2], rtol=1e-5, atol=1e-5)


def test_column_sum_moves_to_the_product_that_reads_it_transposed(level):
    """A fused GEMM's column sum of its output (a hidden layer's bias gradient) that a later product
    reads transposed as its a (that layer's weight gradient) is summed in that product's read stage:
    the first GEMM keeps no sum over its rows (so it runs in bands over the CUs). n = 120 is no whole
    number of words: the first GEMM's output rows are padded, and the second reads them in place,
    transposed (before the fix of the driver's batch-stride check it packed a copy and summed
    nothing)."""
    def f(g, w, keep, x):
        y = torch.ops.aten.threshold_backward(torch.mm(g, w.t()), keep, 0)
        return torch.mm(y.t(), x), y.sum(0, keepdim=True)

    gen = torch.Generator().manual_seed(16)
    for m in (8, 200):
        torch._dynamo.reset()
        # keep laid out as the first GEMM's ports are (at level 4 rows of whole words): no driver copies
        pitch = 128 if level == 4 else 120
        keep = torch.randn(m, pitch, generator=gen)
        cpu = [torch.randn(m, 80, generator=gen), torch.randn(120, 80, generator=gen), keep[:, :120],
               torch.randn(m, 256, generator=gen)]
        dev = [on_device(cpu[0]), on_device(cpu[1]), on_device(keep)[:, :120], on_device(cpu[3])]
        expected = f(*dev)
        got, launched = compiled_run(f, *dev)
        assert launched == {"aten_fpga::fused": 2}, (level, m, launched)
        kernels = [runner.RECORDED[n] for n in aten_fpga.report()["aten_fpga::fused"]["kernels"]]
        assert sorted((len(k.reductions), k.a_rows is not None) for k in kernels) == [(0, False), (0, True)], kernels
        torch.testing.assert_close(got[0].cpu(), expected[0].cpu(), rtol=0, atol=0)
        torch.testing.assert_close(got[1].cpu(), expected[1].cpu(), rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(got[1].cpu(), f(*cpu)[1], rtol=1e-4, atol=1e-4)


def test_lone_ops_that_eager_copies_for_are_kernels(level):
    """One op with a broadcast input (eager makes it dense with copy kernels first) and a reduction
    over rows of 10 -- no whole number of words: at XCL_OPT 4 the reduce driver would pad them -- of
    a value no group makes are each one fused launch, at every level."""
    def f(x, c, s):
        return x.sum(-1), x - c, x * s

    gen = torch.Generator().manual_seed(17)
    cpu = [torch.randn(8, 10, generator=gen), torch.randn(8, 1, generator=gen), torch.tensor(1.5)]
    dev = [on_device(v) for v in cpu]
    expected, eager_launches, _ = counted(f, *dev)
    got, launched = compiled_run(f, *dev)
    assert launched == {"aten_fpga::fused": 3} and eager_launches >= 5, (level, launched, eager_launches)
    torch.testing.assert_close(got[0].cpu(), expected[0].cpu(), rtol=1e-6, atol=1e-6)
    for a, e in zip(got[1:], expected[1:]):
        torch.testing.assert_close(a.cpu(), e.cpu(), rtol=0, atol=0)


def test_dense_transpose_of_a_product_is_the_transposed_product():
    """`bmm(a, b).transpose(1, 2).contiguous()` (autograd's gradient of a transposed operand) runs
    as bmm(b^T, a^T): no copy kernel, and bit-identical to eager's product and copy."""
    def f(a, b):
        return torch.bmm(a, b).transpose(1, 2).contiguous()

    gen = torch.Generator().manual_seed(13)
    dev = [on_device(torch.randn(4, 32, 48, generator=gen)), on_device(torch.randn(4, 48, 64, generator=gen))]
    expected, eager_launches, _ = counted(f, *dev)
    eager_ops = {op for op, r in aten_fpga.report().items() if r["launches"]}
    got, launched = compiled_run(f, *dev)
    assert eager_ops == {"bmm", "copy_"} and eager_launches == 2, (eager_ops, eager_launches)
    assert launched == {"bmm": 1}, launched
    assert got.is_contiguous() and got.shape == (4, 64, 32)
    torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=0, atol=0)


def test_column_and_whole_reductions_render_lint_clean_at_every_level():
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, b):
        y = x * b
        return y, y.view(-1, 32).sum(0), (x - b).pow(2).mean(), torch.mm(x.view(-1, 32), x.view(-1, 32).t()).sum(0)

    gm = make_fx(f, tracing_mode="fake")(torch.randn(2, 4, 32), torch.randn(32))
    kernels = [plan(g).kernel for g in partition(gm)]
    kinds = sorted((len(k.steps) > 0, r.columns, r.whole) for k in kernels
                   for r in (k.reductions if isinstance(k, GemmEpilogue) else [k.reduction]) if r is not None)
    # y's column sum (through a view), the loss's mean, the mm output's column sum in its write stage
    assert kinds == [(False, True, False), (True, False, True), (True, True, False)], kinds
    assert sum(isinstance(k, GemmEpilogue) for k in kernels) == 1
    for kernel in kernels:
        for lv in (1, 2, 3, 4):
            assert codegen.lint(kernel, lv) == [], (kernel, lv)


def test_float16_chain_and_gemm_epilogue_are_bit_exact(level):
    """float16: each step computes in float32 and rounds to float16 as the table kernel stores, so
    the fused chain and the fused GEMM equal eager bit for bit, at every level."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(10)
    x, b, w = torch.randn(64, 48, generator=g), torch.randn(48, generator=g), torch.randn(64, 1, generator=g)
    dev = [on_device(t.half()) for t in (x, b, w)]
    eager = chain(*dev)
    compiled = torch.compile(chain, backend="aten_fpga")
    compiled(*dev)
    aten_fpga.reset_stats()
    out = compiled(*dev)
    assert out.dtype == torch.float16 and aten_fpga.report()["aten_fpga::fused"]["launches"] == 1
    torch.testing.assert_close(out.cpu(), eager.cpu(), rtol=0, atol=0)

    torch._dynamo.reset()
    cpu = gemm_operands(rows=64, k=32, n=64, seed=11)
    dev = [on_device(t.half()) for t in cpu]
    eager = mlp_layer(*dev)
    compiled = torch.compile(mlp_layer, backend="aten_fpga")
    compiled(*dev)
    aten_fpga.reset_stats()
    out = compiled(*dev)
    kernels = aten_fpga.report()["aten_fpga::fused"]["kernels"]
    assert out.dtype == torch.float16 and all(k.startswith("v_fused_gemm_") for k in kernels), kernels
    torch.testing.assert_close(out.cpu(), eager.cpu(), rtol=0, atol=0)


def _fast_call_cases():
    x, m, w = torch.randn(2, 3, 4), torch.randn(3, 4), torch.randn(4)
    return {
        aten.view.default: ((x, [6, 4]), {}), aten.t.default: ((m,), {}), aten.transpose.int: ((x, 0, 2), {}),
        aten.expand.default: ((w, [3, 4]), {}), aten.permute.default: ((x, [2, 0, 1]), {}),
        aten.unsqueeze.default: ((x, 1), {}), aten.squeeze.dim: ((x[:, :1], 1), {}),
        aten.squeeze.dims: ((x[:1, :1], [0, 1]), {}), aten.select.int: ((x, 1, 2), {}),
        aten.detach.default: ((x,), {}), aten.clone.default: ((x,), {"memory_format": torch.contiguous_format}),
        aten.sum.dim_IntList: ((x, [0], True), {}), aten.mm.default: ((m, m.t()), {}),
        aten.bmm.default: ((x, x.transpose(1, 2)), {}), aten.cat.default: (([x, x], 1), {}),
        aten.embedding.default: ((m, torch.tensor([0, 2, 2])), {}),
        aten.native_layer_norm.default: ((x, [4], w, w, 1e-5), {}),
        aten.add.Tensor: ((x, w), {"alpha": 2}), aten.sub.Tensor: ((x, 1.5), {}), aten.mul.Tensor: ((x, w), {}),
        aten.div.Tensor: ((x, w), {}), aten.where.self: ((x > 0, x, w), {}), aten.amax.default: ((x, [-1], True), {}),
    }


aten = torch.ops.aten


def test_fast_calls_dispatch_to_the_overload_they_replace():
    """The compiled graph's code calls the ops of FAST_CALLS as Tensor methods or torch functions
    (their argument parsers are faster than an overload's schema matching): each must reach the
    backend as the very overload of the graph, with the same values."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from aten_fpga.compile.backend import FAST_CALLS

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func)
            return func(*args, **(kwargs or {}))

    cases = _fast_call_cases()
    assert set(cases) == set(FAST_CALLS), "every fast call needs a case here"
    for op, fast in FAST_CALLS.items():
        args, kwargs = cases[op]
        call = getattr(torch.Tensor, fast) if isinstance(fast, str) else fast
        with Seen() as seen:
            seen.ops = []
            got = call(*args, **kwargs)
        assert seen.ops == [op], f"{fast} dispatched {seen.ops}, not {op}"
        torch.testing.assert_close(got, op(*args, **kwargs), rtol=0, atol=0)
