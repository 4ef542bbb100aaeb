"""Convolution on device "fpga" (kernels/hls/im2col + the GEMM, host/ps/fpga_conv.cpp) at every
XCL_OPT level against PyTorch on the CPU: conv1d and conv2d with stride, padding, dilation, groups
(depthwise included), with and without bias, forward and backward (grad_input, grad_weight,
grad_bias, and each alone), float32 and float16, odd sizes, non-contiguous inputs (channels_last,
slices) and inputs valid only in device memory. The GEMM sums in another order than the CPU's
convolution: compared with tolerances. im2col itself moves values: it launches on every call."""
import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from cnn_support import on_device, ran_on_fpga

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2)}


LAYOUTS = {
    "contiguous": lambda t: t,
    "channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
    "slice": lambda t: t[:, :, 1:, 1:] if t.dim() == 4 else t[:, :, 1:],
}


def check(conv, x, w, b, dtype=torch.float32, layout="contiguous", mask=(True, True, True), **kw):
    """conv(x, w, b, **kw) and its gradients on the fpga against the CPU (float16: the CPU computes
    in float32 from the same float16 values); im2col ran on the fpga for forward and backward."""
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
    ran_on_fpga(["convolution_overrideable", "convolution_backward_overrideable"],
                ["im2col"] + (["col2im"] if mask[0] else []))


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
