"""batch_norm, layer_norm and group_norm, forward and backward, on "fpga" against torch on the CPU.

Inputs are device-resident (made by another kernel), some non-contiguous; every XCL_OPT level;
nothing may fall back to the CPU. The statistics are reductions (the CPU's and ours sum in other
orders), so results are compared within tolerances: float32 at 1e-5 relative / 1e-5 absolute
(2e-4 for gradients, which subtract nearly equal sums). float16 computes in float and rounds once;
its reference is the CPU's float32 result rounded to float16 (ATen's float16 kernels sum some of
the gradients' terms less accurately: several percent off where they cancel), at 1e-2.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from cnn_support import assert_ran, close, launched, on_device

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=1e-3, atol=1e-3)}
GRAD_TOL = {torch.float32: dict(rtol=2e-4, atol=2e-4), torch.float16: dict(rtol=1e-2, atol=1e-2)}
TOL[torch.float16] = GRAD_TOL[torch.float16]


def reference(t: torch.Tensor) -> torch.Tensor:
    """The CPU computes float16 cases in float32 (a leaf, like `t`)."""
    return (t.float() if t.dtype == torch.float16 else t).clone()


def rounded(t: torch.Tensor, dtype) -> torch.Tensor:
    return t.detach().to(dtype)


def assert_kernels(*kernels: str) -> None:
    """Each kernels/hls/norm kernel launched (v_norm_<name>_<dtype>)."""
    for k in kernels:
        assert launched(f"norm_{k}") >= 1, (k, aten_fpga.report())


# (shape, transpose the last two dims first): 2-d, one channel, odd sizes, a long reduction, strided,
# one sample, 1x1 maps, planes of whole 512-bit words.
BN_SHAPES = [((6, 5), False), ((3, 1, 17), False), ((4, 3, 5, 7), False), ((2, 4, 64, 65), False),
             ((4, 3, 6, 5), True), ((1, 3, 4, 5), False), ((5, 3, 1, 1), False), ((4, 1, 6, 6), False),
             ((3, 2, 8, 16), False)]


def inputs(shape, dtype, transpose, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3 + 1.5).to(dtype)
    return x.transpose(-1, -2) if transpose else x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("shape,transpose", BN_SHAPES, ids=[f"{s}{'T' if t else ''}" for s, t in BN_SHAPES])
def test_batch_norm_train(level, shape, transpose, dtype):
    aten_fpga.reset_stats()
    x = inputs(shape, dtype, transpose)
    c = x.shape[1]
    g = torch.Generator().manual_seed(10)
    w, b = (torch.rand(c, generator=g) + 0.5).to(dtype), torch.randn(c, generator=g).to(dtype)
    rm, rv = torch.randn(c, generator=g).to(dtype), (torch.rand(c, generator=g) + 1).to(dtype)
    grad = torch.randn(x.shape, generator=g).to(dtype)

    xc, wc, bc = (reference(t).requires_grad_() for t in (x, w, b))
    rmc, rvc = reference(rm), reference(rv)
    yc = F.batch_norm(xc, rmc, rvc, wc, bc, training=True, momentum=0.2, eps=1e-5)
    yc.backward(reference(grad))

    xf, wf, bf = on_device(x, True), on_device(w, True), on_device(b, True)
    rmf, rvf = on_device(rm), on_device(rv)
    yf = F.batch_norm(xf, rmf, rvf, wf, bf, training=True, momentum=0.2, eps=1e-5)
    yf.backward(on_device(grad))

    close(yf.detach(), rounded(yc, dtype), **TOL[dtype])
    close(rmf, rounded(rmc, dtype), **TOL[dtype])
    close(rvf, rounded(rvc, dtype), **TOL[dtype])
    close(xf.grad, rounded(xc.grad, dtype), **GRAD_TOL[dtype])
    close(wf.grad, rounded(wc.grad, dtype), **GRAD_TOL[dtype])
    close(bf.grad, rounded(bc.grad, dtype), **GRAD_TOL[dtype])
    assert_ran("native_batch_norm", "native_batch_norm_backward")
    assert_kernels("stats", "affine", "grad_stats", "backward")


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_batch_norm_eval(level, affine):
    aten_fpga.reset_stats()
    x = inputs((4, 3, 5, 7), torch.float32, False, seed=1)
    g = torch.Generator().manual_seed(11)
    w, b = (torch.rand(3, generator=g) + 0.5, torch.randn(3, generator=g)) if affine else (None, None)
    rm, rv = torch.randn(3, generator=g), torch.rand(3, generator=g) + 1
    grad = torch.randn(x.shape, generator=g)
    xc = x.clone().requires_grad_()
    yc = F.batch_norm(xc, rm, rv, w, b, training=False, eps=1e-3)
    yc.backward(grad)
    xf = on_device(x, True)
    dev = (lambda t: None if t is None else on_device(t))
    yf = F.batch_norm(xf, dev(rm), dev(rv), dev(w), dev(b), training=False, eps=1e-3)
    yf.backward(on_device(grad))
    close(yf.detach(), yc.detach(), **TOL[torch.float32])
    close(xf.grad, xc.grad, **GRAD_TOL[torch.float32])
    assert_ran("native_batch_norm", "native_batch_norm_backward")


def test_batch_norm_module(level):
    """nn.BatchNorm2d, in training then in eval mode, runs without a fallback."""
    aten_fpga.reset_stats()
    x = inputs((4, 6, 5, 5), torch.float32, False, seed=2)
    bn_c = torch.nn.BatchNorm2d(6)
    bn_f = torch.nn.BatchNorm2d(6).to("fpga")
    for _ in range(2):
        close(bn_f(on_device(x)), bn_c(x).detach(), **TOL[torch.float32])
    close(bn_f.running_mean, bn_c.running_mean, **TOL[torch.float32])
    close(bn_f.running_var, bn_c.running_var, **TOL[torch.float32])
    bn_c.eval(), bn_f.eval()
    close(bn_f(on_device(x)), bn_c(x).detach(), **TOL[torch.float32])
    assert_ran("native_batch_norm")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("shape,normalized", [((7, 33), 1), ((2, 3, 1), 1), ((4, 5, 6), 2), ((3, 4097), 1),
                                              ((1, 16), 1), ((3, 8, 48), 1)],
                         ids=["rows", "size1", "two_dims", "long", "one_row", "words"])
def test_layer_norm(level, shape, normalized, dtype):
    aten_fpga.reset_stats()
    x = inputs(shape, dtype, False, seed=3)
    nshape = shape[-normalized:]
    g = torch.Generator().manual_seed(13)
    w, b = (torch.rand(nshape, generator=g) + 0.5).to(dtype), torch.randn(nshape, generator=g).to(dtype)
    grad = torch.randn(shape, generator=g).to(dtype)
    xc, wc, bc = (reference(t).requires_grad_() for t in (x, w, b))
    yc = F.layer_norm(xc, nshape, wc, bc, eps=1e-5)
    yc.backward(reference(grad))
    xf, wf, bf = on_device(x, True), on_device(w, True), on_device(b, True)
    yf = F.layer_norm(xf, nshape, wf, bf, eps=1e-5)
    yf.backward(on_device(grad))
    close(yf.detach(), rounded(yc, dtype), **TOL[dtype])
    close(xf.grad, rounded(xc.grad, dtype), **GRAD_TOL[dtype])
    close(wf.grad, rounded(wc.grad, dtype), **GRAD_TOL[dtype])
    close(bf.grad, rounded(bc.grad, dtype), **GRAD_TOL[dtype])
    assert_ran("native_layer_norm", "native_layer_norm_backward")
    assert_kernels("stats", "affine", "grad_stats_cols", "backward")


def test_layer_norm_non_contiguous(level):
    aten_fpga.reset_stats()
    x = inputs((6, 9), torch.float32, True, seed=4)  # [9, 6], strided
    close(F.layer_norm(on_device(x.contiguous()).t().contiguous().t(), (6,)), F.layer_norm(x, (6,)),
          **TOL[torch.float32])
    assert_ran("native_layer_norm")


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm(level, groups):
    """native_group_norm and its backward. (F.group_norm on a device other than CPU/CUDA takes
    ATen's composite, whose var_mean still falls back: docs/kernels.md.)"""
    aten_fpga.reset_stats()
    n, c, hw = 3, 6, 20
    x = inputs((n, c, 4, 5), torch.float32, False, seed=5)
    g = torch.Generator().manual_seed(14)
    w, b = torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g)
    grad = torch.randn(x.shape, generator=g)
    expected = torch.ops.aten.native_group_norm(x, w, b, n, c, hw, groups, 1e-5)
    actual = torch.ops.aten.native_group_norm(on_device(x), on_device(w), on_device(b), n, c, hw, groups, 1e-5)
    for a, e in zip(actual, expected):
        close(a, e, **TOL[torch.float32])
    mask = [True, True, True]
    expected = torch.ops.aten.native_group_norm_backward(grad, x, expected[1], expected[2], w, n, c, hw, groups, mask)
    actual = torch.ops.aten.native_group_norm_backward(on_device(grad), on_device(x), actual[1], actual[2],
                                                       on_device(w), n, c, hw, groups, mask)
    for a, e in zip(actual, expected):
        close(a, e, **GRAD_TOL[torch.float32])
    assert_ran("native_group_norm", "native_group_norm_backward")


def test_layer_norm_plain(level):
    """No weight and bias (elementwise_affine=False): the kernels read no columns."""
    aten_fpga.reset_stats()
    x = inputs((5, 40), torch.float32, False, seed=6)
    grad = torch.randn(5, 40, generator=torch.Generator().manual_seed(16))
    xc = x.clone().requires_grad_()
    F.layer_norm(xc, (40,)).backward(grad)
    xf = on_device(x, True)
    yf = F.layer_norm(xf, (40,))
    yf.backward(on_device(grad))
    close(yf.detach(), F.layer_norm(x, (40,)), **TOL[torch.float32])
    close(xf.grad, xc.grad, **GRAD_TOL[torch.float32])
    assert_ran("native_layer_norm", "native_layer_norm_backward")
    assert_kernels("stats", "affine", "grad_stats", "backward")


def test_norm_without_shift_fills_nothing(level):
    """layer_norm and group_norm with no bias: the normalization's shift is absent (a flag), not a
    row of zeros a fill kernel makes first. layer_norm's forward is its two norm kernels and nothing
    else (group_norm's also copies its per-plane statistics)."""
    x = inputs((6, 48), torch.float32, False, seed=7)
    for f, ref, only in ((lambda t: F.layer_norm(t, (48,)), F.layer_norm(x, (48,)), True),
                         (lambda t: F.group_norm(t.view(6, 4, 12), 2), F.group_norm(x.view(6, 4, 12), 2), False)):
        xf = on_device(x)
        aten_fpga.reset_stats()
        y = f(xf)
        torch.fpga.synchronize()
        launched = {op: r["launches"] for op, r in aten_fpga.report().items() if r["launches"]}
        assert not {"fill_.Scalar", "zero_"} & set(launched), launched
        assert not only or launched == {"native_layer_norm": 2}, launched
        close(y.reshape(ref.shape), ref, **TOL[torch.float32])


# (N, C, H, W, groups, affine): one sample, 1x1 maps, a group per channel, no weight and bias.
GN_CASES = [(3, 6, 4, 5, 2, True), (1, 4, 3, 3, 4, True), (5, 6, 1, 1, 1, True), (2, 4, 8, 8, 1, False)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("n,c,h,w,groups,affine", GN_CASES, ids=[str(g) for g in GN_CASES])
def test_group_norm_shapes(level, n, c, h, w, groups, affine, dtype):
    """native_group_norm and its backward on inputs made by another kernel, against the CPU in
    float32 (float16 rounded from it)."""
    aten_fpga.reset_stats()
    x = inputs((n, c, h, w), dtype, False, seed=7)
    g = torch.Generator().manual_seed(17)
    wt, b = ((torch.rand(c, generator=g) + 0.5).to(dtype), torch.randn(c, generator=g).to(dtype)) if affine else (None, None)
    grad = torch.randn(x.shape, generator=g).to(dtype)
    ref = (lambda t: None if t is None else reference(t))
    dev = (lambda t: None if t is None else on_device(t))
    hw = h * w
    expected = torch.ops.aten.native_group_norm(ref(x), ref(wt), ref(b), n, c, hw, groups, 1e-5)
    actual = torch.ops.aten.native_group_norm(dev(x), dev(wt), dev(b), n, c, hw, groups, 1e-5)
    for a, e in zip(actual, expected):
        close(a, rounded(e, dtype), **TOL[dtype])
    mask = [True, affine, affine]
    expected = torch.ops.aten.native_group_norm_backward(ref(grad), ref(x), expected[1], expected[2], ref(wt), n, c,
                                                         hw, groups, mask)
    actual = torch.ops.aten.native_group_norm_backward(dev(grad), dev(x), actual[1], actual[2], dev(wt), n, c, hw,
                                                       groups, mask)
    for a, e in zip(actual, expected):
        if e is not None:
            close(a, rounded(e, dtype), **GRAD_TOL[dtype])
    assert_ran("native_group_norm", "native_group_norm_backward")
    assert_kernels("stats", "affine", "grad_stats", "backward")


@pytest.mark.parametrize("op", ["batch_norm", "layer_norm"])
def test_statistics_without_cancellation(level, op):
    """A large mean and a small spread (1000 + N(0, 0.01)): the one-pass variance keeps its digits
    (float sums of x^2 and x would have none left: E[x^2] ~ 1e6, its ulp 0.06, the variance 1e-4).
    Checked against float64 statistics of the same float32 input."""
    aten_fpga.reset_stats()
    g = torch.Generator().manual_seed(8)
    x = (1000 + 0.01 * torch.randn(4, 3, 33, 31, generator=g)).float()
    x64 = x.double()
    if op == "batch_norm":
        dims = (0, 2, 3)
        rm, rv = on_device(torch.zeros(3)), on_device(torch.ones(3))
        y, mean, invstd = torch.ops.aten.native_batch_norm(on_device(x), None, None, rm, rv, True, 1.0, 0.0)
        n = x.numel() / 3
        close(rv, (x64.var(dims, unbiased=False) * n / (n - 1)).float(), rtol=1e-5, atol=0)
        close(rm, x64.mean(dims).float(), rtol=1e-7, atol=0)
    else:
        dims = (-2, -1)
        y, mean, invstd = torch.ops.aten.native_layer_norm(on_device(x), x.shape[-2:], None, None, 0.0)
    keep = x64.mean(dims, keepdim=op == "layer_norm")
    var = x64.var(dims, unbiased=False, keepdim=op == "layer_norm")
    close(mean, keep.float(), rtol=1e-7, atol=0)
    close(invstd, var.rsqrt().float(), rtol=1e-5, atol=0)
    # The output is centred before scaling; what is left is the mean's float32 rounding (half an
    # ulp of 1000 over the spread 0.01: 3e-3). ATen's x * alpha + beta form loses ~1e-2 here.
    shape = [1, 3, 1, 1] if op == "batch_norm" else list(var.shape)
    expected = (x64 - x64.mean(dims).view(shape)) / var.sqrt().view(shape)
    close(y, expected.float(), rtol=0, atol=4e-3)
    assert_kernels("stats", "affine")


@pytest.mark.parametrize("op", ["batch_norm", "group_norm"])
def test_variance_beyond_float(level, op):
    """Rows whose variance is past float32's range (values near 1e21): ATen's CPU kernels take the
    inverse standard deviation of the variance rounded to float (inf -> 0), so those rows' outputs
    are 0, and so are the device's (norm_stats). (layer_norm's CPU result there depends on ATen's
    path: 0 in some row lengths, NaN in others, so it is not compared here; the fuzz programs
    cover a 0 case.)"""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 4, 5, 6, generator=g)
    x[1] *= 1e21  # sample 1: variance ~1e42
    fn = {"batch_norm": lambda t: F.batch_norm(t, None, None, training=True),
          "group_norm": lambda t: F.group_norm(t, 2)}[op]
    expected = fn(x)
    assert (expected[1].abs() == 0).all()  # the case this test is about
    aten_fpga.reset_stats()
    close(fn(on_device(x)), expected, rtol=1e-5, atol=1e-5)
    assert_kernels("stats", "affine")


@pytest.mark.parametrize("op", ["batch_norm", "layer_norm", "group_norm"])
def test_sum_backward(level, op):
    """y.sum().backward() hands the backward an expanded gradient (stride 0 everywhere): the kernels
    read its one plane for every row (flags bit 2) instead of a dense copy."""
    aten_fpga.reset_stats()
    x = inputs((3, 4, 6, 7), torch.float32, False, seed=9)
    g = torch.Generator().manual_seed(19)
    w, b = torch.rand(4, generator=g) + 0.5, torch.randn(4, generator=g)
    lw, lb = torch.rand(6, 7, generator=g) + 0.5, torch.randn(6, 7, generator=g)

    def run(x, w, b, lw, lb):
        if op == "batch_norm":
            return F.batch_norm(x, None, None, w, b, training=True)
        if op == "layer_norm":
            return F.layer_norm(x, (6, 7), lw, lb)
        return F.group_norm(x, 2, w, b)

    cpu = [t.clone().requires_grad_() for t in (x, w, b, lw, lb)]
    (run(*cpu) * 1).sum().backward()  # a non-uniform scale would hide the expansion: none here
    dev = [on_device(t, True) for t in (x, w, b, lw, lb)]
    run(*dev).sum().backward()
    for d, c in zip(dev, cpu):
        if c.grad is not None:
            close(d.grad, c.grad, **GRAD_TOL[torch.float32])
    assert_ran()
    assert_kernels("grad_stats", "backward")
