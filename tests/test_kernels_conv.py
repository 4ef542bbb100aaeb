"""Convolution on device "fpga" (host/ps/fpga_conv.cpp) at every XCL_OPT level against PyTorch on
the CPU: conv1d and conv2d with stride, padding, dilation, groups, with and without bias, forward
and backward (grad_input, grad_weight, grad_bias, and each alone), float32 and float16, odd sizes,
non-contiguous inputs (channels_last, slices) and inputs valid only in device memory. Each shape's
own kernels must launch and the others not: depthwise the dw members of the im2col engine (no im2col, no GEMM), 1x1
the GEMM alone (no im2col), any other im2col + one GEMM launch for every group. The kernels sum in
another order than the CPU's convolution: compared with tolerances, and the depthwise gradients
against float64 (as close to it as the CPU's are)."""
import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from cnn_support import launched, on_device, ran_on_fpga

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2)}


LAYOUTS = {
    "contiguous": lambda t: t,
    "channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
    "slice": lambda t: t[:, :, 1:, 1:] if t.dim() == 4 else t[:, :, 1:],
}


def kernels_of(c, cout, k, s, p, groups, mask=(True, True, True), dtype=torch.float32):
    """(kernels that must launch, kernels that must not) for a convolution of this shape, forward
    and backward: see host/ps/fpga_conv.cpp (the depthwise members are float32's: float16 runs in
    them widened)."""
    k2 = (k, k) if isinstance(k, int) else k
    if groups == c == cout and groups > 1:
        return ["dw_window"] + (["dw_weight"] if mask[1] else []), ["im2col", "col2im", "gemm"]
    if groups == 1 and k2 in ((1, 1), (1,)) and s in (1, (1, 1)) and p in (0, (0, 0)):
        return ["gemm"], ["im2col", "col2im", "dw_window"]
    return ["im2col", "gemm"] + (["col2im"] if mask[0] else []), ["dw_window", "dw_weight"]


def check(conv, x, w, b, dtype=torch.float32, layout="contiguous", mask=(True, True, True), kernels=None, **kw):
    """conv(x, w, b, **kw) and its gradients on the fpga against the CPU (float16: the CPU computes
    in float32 from the same float16 values); `kernels` (kernels_of's pair) launched and not."""
    g = torch.Generator().manual_seed(3)
    view = LAYOUTS[layout]
    ref = [t.float() if t is not None else None for t in (x, w, b)]
    xc, wc, bc = (t.detach().requires_grad_(m) if t is not None else None for t, m in zip(ref, mask))
    expected = conv(view(xc), wc, bc, **kw)
    grad = torch.randn(expected.shape, generator=g)
    expected.backward(grad)
    dev = [on_device(t.to(dtype)) if t is not None else None for t in (x, w, b)]
    xf, wf, bf = (t.detach().requires_grad_(m) if t is not None else None for t, m in zip(dev, mask))
    aten_fpga.reset_stats()
    actual = conv(view(xf), wf, bf, **kw)
    assert actual.device.type == "fpga" and actual.dtype == dtype
    torch.testing.assert_close(actual.cpu().float(), expected.detach(), **TOL[dtype])
    actual.backward(on_device(grad.to(dtype)))
    for f, c, m in zip((xf, wf, bf), (xc, wc, bc), mask):
        if f is not None and m:
            torch.testing.assert_close(f.grad.cpu().float(), c.grad, **TOL[dtype])
    if kernels is None:
        kernels = kernels_of(x.size(1), w.size(0), tuple(w.shape[2:]), kw.get("stride", 1), kw.get("padding", 0),
                             kw.get("groups", 1), mask, dtype)
    ran_on_fpga(["convolution_overrideable", "convolution_backward_overrideable"], kernels[0])
    assert not any(launched(k) for k in kernels[1]), (kernels, aten_fpga.report())


def data(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


CONV2D = [  # (N, C, H, W, Cout, kernel, stride, padding, dilation, groups, bias)
    (2, 3, 8, 8, 4, 3, 1, 0, 1, 1, True),
    (2, 3, 9, 7, 5, 3, 2, 1, 1, 1, False),
    (1, 4, 11, 10, 6, (3, 2), (2, 1), (1, 2), (2, 1), 2, True),
    (2, 6, 7, 7, 6, 3, 1, 1, 1, 6, True),  # depthwise
    (2, 4, 6, 6, 8, 3, 1, 1, 1, 4, False),  # depthwise with a channel multiplier
    (3, 2, 5, 5, 3, 1, 1, 0, 1, 1, True),  # 1x1
    (1, 1, 28, 28, 6, 5, 1, 0, 1, 1, True),  # LeNet's first layer
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("case", range(len(CONV2D)))
def test_conv2d(level, case, dtype):
    n, c, h, w, cout, k, s, p, d, groups, bias = CONV2D[case]
    kh, kw = (k, k) if isinstance(k, int) else k
    x, wt = data(n, c, h, w, seed=case), data(cout, c // groups, kh, kw, seed=10 + case) * 0.3
    b = data(cout, seed=20 + case) if bias else None
    check(F.conv2d, x, wt, b, dtype, stride=s, padding=p, dilation=d, groups=groups)


CONV1D = [(2, 3, 17, 4, 3, 1, 0, 1, 1), (2, 4, 20, 6, 5, 2, 2, 2, 2), (1, 4, 9, 4, 3, 1, 1, 1, 4)]


@pytest.mark.parametrize("case", range(len(CONV1D)))
def test_conv1d(level, case):
    n, c, l, cout, k, s, p, d, groups = CONV1D[case]
    x, wt, b = data(n, c, l, seed=case), data(cout, c // groups, k, seed=5 + case), data(cout, seed=9)
    check(F.conv1d, x, wt, b, stride=s, padding=p, dilation=d, groups=groups)


@pytest.mark.parametrize("layout", ["channels_last", "slice"])
def test_conv2d_non_contiguous(level, layout):
    x, wt, b = data(2, 3, 9, 9, seed=1), data(4, 3, 3, 3, seed=2), data(4, seed=3)
    check(F.conv2d, x, wt, b, layout=layout, padding=1)


@pytest.mark.parametrize("mask", [(True, False, False), (False, True, False), (False, True, True)])
def test_conv2d_output_mask(level, mask):
    x, wt, b = data(2, 3, 8, 8, seed=4), data(4, 3, 3, 3, seed=5), data(4, seed=6)
    check(F.conv2d, x, wt, b, mask=mask, padding=1)


def test_padding_same_and_string(level):
    x, wt = data(1, 2, 7, 8, seed=7), data(3, 2, 3, 3, seed=8)
    check(F.conv2d, x, wt, None, padding="same")


def test_transposed_falls_back_counted(level):
    x, wt = data(1, 2, 5, 5, seed=1), data(2, 3, 3, 3, seed=2)
    aten_fpga.reset_stats()
    y = F.conv_transpose2d(x.to("fpga"), wt.to("fpga"))
    torch.testing.assert_close(y.cpu(), F.conv_transpose2d(x, wt), rtol=1e-4, atol=1e-4)
    assert aten_fpga.stats()["convolution_overrideable"]["cpu_fallback"] == 1


def test_conv3d_falls_back_counted(level):
    x, wt = data(1, 2, 4, 4, 4, seed=1), data(2, 2, 3, 3, 3, seed=2)
    aten_fpga.reset_stats()
    y = F.conv3d(x.to("fpga"), wt.to("fpga"))
    torch.testing.assert_close(y.cpu(), F.conv3d(x, wt), rtol=1e-4, atol=1e-4)
    assert aten_fpga.stats()["convolution_overrideable"]["cpu_fallback"] == 1


# Depthwise (groups == C == Cout): the dw_window and dw_weight kernels, forward, grad_input through the transposed
# window and grad_weight, over strides, paddings, dilations, rectangular windows and odd planes.
DEPTHWISE = [  # (N, C, H, W, kernel, stride, padding, dilation, bias)
    (2, 5, 9, 11, 3, 1, 1, 1, True),  # MobileNet's 3x3
    (3, 4, 12, 10, 3, 2, 1, 1, False),  # its stride-2 layers
    (2, 3, 13, 13, 5, 2, 2, 1, True),  # EfficientNet's 5x5
    (2, 6, 10, 9, 7, 1, 3, 1, True),  # ConvNeXt's 7x7
    (1, 4, 11, 12, (3, 5), (1, 2), (0, 2), (2, 1), True),
    (2, 3, 6, 7, 3, 3, 0, 1, False),  # stride 3: output rows the transposed window skips
    (1, 2, 1, 1, 3, 1, 1, 1, True),  # a 1x1 plane, all but one tap padding
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("case", range(len(DEPTHWISE)))
def test_depthwise(level, case, dtype):
    n, c, h, w, k, s, p, d, bias = DEPTHWISE[case]
    kh, kw = (k, k) if isinstance(k, int) else k
    x, wt = data(n, c, h, w, seed=30 + case), data(c, 1, kh, kw, seed=40 + case) * 0.3
    b = data(c, seed=50 + case) if bias else None
    check(F.conv2d, x, wt, b, dtype, stride=s, padding=p, dilation=d, groups=c)


@pytest.mark.parametrize("mask", [(True, False, False), (False, True, False), (False, False, True)])
def test_depthwise_output_mask(level, mask):
    x, wt, b = data(2, 4, 9, 9, seed=4), data(4, 1, 3, 3, seed=5), data(4, seed=6)
    absent = ["im2col", "col2im", "gemm"] + ([] if mask[1] else ["dw_weight"])
    check(F.conv2d, x, wt, b, mask=mask, padding=1, groups=4,
          kernels=(["dw_window"] + (["dw_weight"] if mask[1] else []), absent))  # dw_window: the forward's


@pytest.mark.parametrize("layout", ["channels_last", "slice"])
def test_depthwise_non_contiguous(level, layout):
    x, wt, b = data(2, 6, 10, 10, seed=1), data(6, 1, 3, 3, seed=2), data(6, seed=3)
    check(F.conv2d, x, wt, b, layout=layout, padding=1, stride=2, groups=6)


def test_depthwise_gradients_against_float64(level):
    """A MobileNet-sized depthwise layer's gradients (grad_weight sums 8 x 28 x 28 products per
    tap) as close to float64 as the CPU's, up to float32 rounding (tests/test_zoo.py's bound); the
    weight gradient folds in a fixed order: a second run gives the same bits."""
    x, wt, go = data(8, 16, 28, 28, seed=1), data(16, 1, 3, 3, seed=2) * 0.3, data(8, 16, 14, 14, seed=3)

    def grads(x, wt, go):
        xr, wr = x.detach().requires_grad_(), wt.detach().requires_grad_()
        F.conv2d(xr, wr, stride=2, padding=1, groups=16).backward(go)
        return xr.grad, wr.grad

    ref = grads(x.double(), wt.double(), go.double())
    cpu = grads(x, wt, go)
    fpga = grads(on_device(x), on_device(wt), on_device(go))
    again = grads(on_device(x), on_device(wt), on_device(go))
    for r, c, f, a in zip(ref, cpu, fpga, again):
        err_fpga, err_cpu = (f.cpu().double() - r).abs().max(), (c.double() - r).abs().max()
        assert err_fpga <= 4 * err_cpu + 2.0**-18 * r.abs().max(), (err_fpga, err_cpu)
        assert torch.equal(f.cpu(), a.cpu())


def test_depthwise_beyond_the_line_buffer_takes_im2col(level):
    """A window of more rows than the dw kernels' line buffer holds (3 taps 4 rows apart: 9 rows) runs
    im2col + the GEMM, correct all the same."""
    x, wt = data(1, 3, 12, 12, seed=1), data(3, 1, 3, 3, seed=2)
    check(F.conv2d, x, wt, None, padding=4, dilation=4, groups=3,
          kernels=(["im2col", "gemm", "col2im"], ["dw_window", "dw_weight"]))


def test_depthwise_chained_in_a_block(level):
    """MobileNet's block as a user chains it: 1x1 expand, depthwise 3x3 stride 2, 1x1 project, each
    consuming the one before on the device, forward and backward; only the shapes' own kernels run."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 4, 10, 10, generator=g)
    ws = [torch.randn(12, 4, 1, 1, generator=g) * 0.3, torch.randn(12, 1, 3, 3, generator=g) * 0.3,
          torch.randn(6, 12, 1, 1, generator=g) * 0.3]

    def block(x, w1, w2, w3):
        y = F.relu(F.conv2d(x, w1))
        y = F.relu(F.conv2d(y, w2, stride=2, padding=1, groups=12))
        return F.conv2d(y, w3)

    cpu = [t.clone().requires_grad_() for t in (x, *ws)]
    block(*cpu).square().sum().backward()
    dev = [on_device(t, True) for t in (x, *ws)]
    aten_fpga.reset_stats()
    out = block(*dev)
    out.square().sum().backward()
    torch.testing.assert_close(out.cpu(), block(*cpu).detach(), **TOL[torch.float32])
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.grad.cpu(), c.grad, **TOL[torch.float32])
    ran_on_fpga(["convolution_overrideable", "convolution_backward_overrideable"], ["dw_window", "dw_weight", "gemm"])
    assert launched("im2col") == 0 and launched("col2im") == 0, aten_fpga.report()


@pytest.mark.parametrize("hw", [(7, 9), (9, 9)], ids=["planes side by side", "a product per image"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "slice"])
def test_pointwise_conv(level, layout, hw):
    """1x1, stride 1, no padding: the GEMM on the NCHW planes, no im2col, in any input layout; planes
    of fewer than 64 pixels (after the slice) as one product side by side, larger ones a product
    per image."""
    x, wt, b = data(3, 6, *hw, seed=1), data(5, 6, 1, 1, seed=2), data(5, seed=3)
    check(F.conv2d, x, wt, b, layout=layout)


def test_grouped_conv_is_one_gemm_launch(level):
    """1 < groups < C: one GEMM launch for all the groups (the group is the batch), forward and
    each backward product."""
    x, wt, b = data(2, 8, 9, 9, seed=1), data(12, 2, 3, 3, seed=2), data(12, seed=3)
    xf, wf = on_device(x, True), on_device(wt, True)
    aten_fpga.reset_stats()
    y = F.conv2d(xf, wf, on_device(b), padding=1, groups=4)
    assert launched("gemm") == 1, aten_fpga.report()
    torch.testing.assert_close(y.cpu(), F.conv2d(x, wt, b, padding=1, groups=4), **TOL[torch.float32])
    aten_fpga.reset_stats()
    y.backward(on_device(torch.ones(y.shape)))
    assert launched("gemm") == 2, aten_fpga.report()  # grad_input's and grad_weight's


def test_compiled_depthwise_runs_the_dw_kernels():
    """torch.compile(backend="aten_fpga") leaves a grouped convolution an aten node
    (aten_fpga/compile/conv.py), so a compiled depthwise layer runs eager's dw kernels,
    forward and backward."""
    import aten_fpga.compile  # noqa: F401  (registers the backend)

    torch._dynamo.reset()
    x, wt = data(2, 8, 12, 12, seed=1), data(8, 1, 3, 3, seed=2)

    def layer(x, w):
        return F.conv2d(x, w, padding=1, groups=8).relu().sum()

    xf, wf = on_device(x, True), on_device(wt, True)
    aten_fpga.reset_stats()
    torch.compile(layer, backend="aten_fpga")(xf, wf).backward()
    xc, wc = x.clone().requires_grad_(), wt.clone().requires_grad_()
    layer(xc, wc).backward()
    torch.testing.assert_close(xf.grad.cpu(), xc.grad, **TOL[torch.float32])
    torch.testing.assert_close(wf.grad.cpu(), wc.grad, **TOL[torch.float32])
    assert launched("dw_window") >= 2 and launched("dw_weight") == 1, aten_fpga.report()
    assert launched("im2col") == 0, aten_fpga.report()
    torch._dynamo.reset()
