"""torch.compile(backend="aten_fpga") runs 2-d convolutions direct (aten_fpga/compile/conv.py,
kernels/hls/conv/): the forward and the chain after it in one kernel, the backward in a weight and
bias gradient kernel and an input gradient kernel, with no im2col matrix in device memory. Results
equal eager "fpga": the forward bit for bit (the same products summed in the same order), the
gradients within float32 rounding (they sum in another order)."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
import aten_fpga.compile  # noqa: F401  (registers the backend)
from aten_fpga.compile import codegen, runner
from aten_fpga.compile.conv import CAPS, ConvKernel
from cnn_support import on_device
from compile_support import card_without_fused_kernels, fresh_dynamo, keep_global_rng  # noqa: F401


def conv_kernels() -> list:
    """The roles of the conv kernels launched since the stats were reset, once per launch."""
    kernels = aten_fpga.report().get("aten_fpga::fused", {}).get("kernels", {})
    return sorted(role for name, count in kernels.items() if isinstance(runner.RECORDED.get(name), ConvKernel)
                  for role in [runner.RECORDED[name].role] * count)


def launched() -> dict:
    return {op: r["launches"] for op, r in aten_fpga.report().items() if r["launches"]}


# (in channels, out channels, kernel, stride, padding, dilation, bias)
GEOMETRIES = [(3, 6, 5, 1, 0, 1, True), (4, 8, 3, 2, 1, 1, False), (2, 5, 3, 1, 2, 2, True)]


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "c{}-o{}-k{}-s{}-p{}-d{}-b{}".format(*g))
def test_convolution_and_its_relu_are_one_kernel(level, geometry):
    """conv2d + bias + ReLU of a device-resident input: one launch of the forward conv kernel, equal
    to eager's im2col + GEMM bit for bit, at every level, over strides, paddings and dilations."""
    cin, cout, k, s, p, d, bias = geometry
    g = torch.Generator().manual_seed(cin * 10 + cout)
    x, w = torch.randn(3, cin, 17, 19, generator=g), torch.randn(cout, cin, k, k, generator=g)
    b = torch.randn(cout, generator=g) if bias else None

    def f(x, w, b):
        return torch.relu(F.conv2d(x, w, b, s, p, d))

    dev = [on_device(x), on_device(w), on_device(b) if bias else None]
    expected = f(*dev)
    compiled = torch.compile(f, backend="aten_fpga")
    compiled(*dev)
    aten_fpga.reset_stats()
    got = compiled(*dev)
    assert launched() == {"aten_fpga::fused": 1}, (level, launched())
    assert conv_kernels() == ["forward"]
    torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(got.cpu(), f(x, w, b), rtol=1e-5, atol=1e-5)


def test_convolution_training_step(level):
    """Two convolutions with ReLUs, trained one step: every convolution_backward runs as its conv
    kernels (grad_weight with grad_bias in one launch, grad_input in another), no im2col or GEMM
    launch is left, and the loss and gradients equal eager's within float32 rounding."""
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 5), torch.nn.ReLU(), torch.nn.Conv2d(6, 4, 3, padding=1))
    x = torch.randn(4, 3, 20, 20)
    eager = model.to("fpga")
    fused = copy.deepcopy(eager)
    dx_eager, dx_fused = on_device(x, True), on_device(x, True)
    loss = (eager(dx_eager) ** 2).mean()
    loss.backward()
    step = torch.compile(lambda m, v: (m(v) ** 2).mean(), backend="aten_fpga")
    step(fused, on_device(x, True)).backward()  # traced and built
    fused.zero_grad(set_to_none=True)
    aten_fpga.reset_stats()
    got = step(fused, dx_fused)
    got.backward()
    assert not any(op.startswith(("im2col", "col2im", "bmm", "baddbmm", "convolution")) for op in launched()), launched()
    assert conv_kernels() == ["forward", "forward", "input_grad", "input_grad", "weight_grad", "weight_grad"], conv_kernels()
    torch.testing.assert_close(got.cpu(), loss.cpu(), rtol=1e-6, atol=0)
    for (name, a), (_, e) in zip(fused.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(a.grad.cpu(), e.grad.cpu(), rtol=1e-4, atol=1e-5, msg=name)
    torch.testing.assert_close(dx_fused.grad.cpu(), dx_eager.grad.cpu(), rtol=1e-4, atol=1e-6)


def test_convolutions_the_kernels_do_not_take_run_unfused():
    """A grouped convolution stays an aten node; the input gradient of a convolution with a row
    stride of 2, and planes larger than the kernels' buffers, run through eager dispatch -- correct
    either way."""
    g = torch.Generator().manual_seed(9)

    def grouped(x, w):
        return F.conv2d(x, w, groups=2).relu()

    x, w = torch.randn(2, 4, 12, 12, generator=g), torch.randn(6, 2, 3, 3, generator=g)
    aten_fpga.reset_stats()
    got = torch.compile(grouped, backend="aten_fpga")(on_device(x), on_device(w))
    torch.testing.assert_close(got.cpu(), grouped(x, w), rtol=1e-5, atol=1e-5)
    assert conv_kernels() == []

    torch._dynamo.reset()
    xs, ws = torch.randn(2, 3, 20, 20, generator=g), torch.randn(5, 3, 3, 3, generator=g)  # 9x18 out

    def strided(x, w):
        return F.conv2d(x, w, stride=(2, 1)).sum()

    dx, dw = on_device(xs, True), on_device(ws, True)
    torch.compile(strided, backend="aten_fpga")(dx, dw).backward()
    xr, wr = xs.clone().requires_grad_(), ws.clone().requires_grad_()
    strided(xr, wr).backward()
    torch.testing.assert_close(dx.grad.cpu(), xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.grad.cpu(), wr.grad, rtol=1e-4, atol=1e-4)
    assert "input_grad" not in conv_kernels() and "weight_grad" in conv_kernels(), conv_kernels()
    assert aten_fpga.report()["convolution_backward_overrideable"]["launches"] >= 1  # grad_input, eager's

    torch._dynamo.reset()
    side = int((CAPS["image"] // 2) ** 0.5) + 8  # two planes larger than the on-chip image buffer
    xb, wb = torch.randn(1, 2, side, side, generator=g), torch.randn(2, 2, 3, 3, generator=g)
    aten_fpga.reset_stats()
    got = torch.compile(lambda x, w: F.conv2d(x, w), backend="aten_fpga")(on_device(xb), on_device(wb))
    torch.testing.assert_close(got.cpu(), F.conv2d(xb, wb), rtol=1e-5, atol=1e-5)
    assert aten_fpga.report()["convolution_overrideable"]["launches"] == 1


def test_missing_conv_kernel_on_a_card_runs_unfused(monkeypatch):
    """On XRT, a conv kernel the loaded xclbin lacks runs its original node, with the warning that
    says how to build it in."""
    card_without_fused_kernels(monkeypatch)
    g = torch.Generator().manual_seed(4)
    x, w, b = torch.randn(2, 3, 10, 10, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, generator=g)
    f = lambda x, w, b: F.conv2d(x, w, b).relu()  # noqa: E731
    aten_fpga.reset_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="aten_fpga")(on_device(x), on_device(w), on_device(b))
    assert any("scons target=hw fused=" in str(c.message) for c in caught)
    torch.testing.assert_close(got.cpu(), f(x, w, b), rtol=1e-5, atol=1e-5)
    assert "aten_fpga::fused" not in aten_fpga.report()


@pytest.mark.parametrize("role", ["forward", "input_grad", "weight_grad"])
def test_conv_kernels_pass_the_lint(role):
    f32 = aten_fpga.compile.fuse.DTYPES["float32"]
    for bias in (False, True):
        kernel = ConvKernel(f32, role, bias=bias and role != "input_grad", kw=5 if role == "weight_grad" else 0)
        for level in (1, 2, 3, 4):
            assert codegen.lint(kernel, level) == [], (role, bias, level)


def test_dynamic_shapes_reuse_the_conv_kernels():
    """Compiled with dynamic shapes, one graph serves batches and planes of other sizes: each step
    runs the three conv kernels (forward, input and weight gradients), equal to eager."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).to("fpga")
    step = torch.compile(model, backend="aten_fpga", dynamic=True)
    for n, side in ((2, 12), (3, 14), (5, 12)):
        x = on_device(torch.randn(n, 3, side, side), True)
        model.zero_grad(set_to_none=True)
        aten_fpga.reset_stats()
        out = step(x)
        out.sum().backward()
        assert conv_kernels() == ["forward", "input_grad", "weight_grad"], (n, side, conv_kernels())
        grads = [x.grad.cpu()] + [p.grad.cpu() for p in model.parameters()]
        xr = x.detach().clone().requires_grad_()
        model.zero_grad(set_to_none=True)
        expected = model(xr)
        expected.sum().backward()
        torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=0, atol=0)
        for got, want in zip(grads, [xr.grad.cpu()] + [p.grad.cpu() for p in model.parameters()]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
