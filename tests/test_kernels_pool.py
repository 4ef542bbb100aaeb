"""Pooling on device "fpga" (kernels/hls/pool, host/ps/fpga_pool.cpp) at every XCL_OPT level against
PyTorch on the CPU, bit for bit (values and indices): max_pool2d with stride, padding, dilation and
ceil_mode; avg_pool2d with count_include_pad, ceil_mode and divisor_override; adaptive_avg_pool2d;
each forward and backward, float32 and float16, odd sizes, 3-d (unbatched) inputs, non-contiguous
inputs (channels_last, slices) and inputs valid only in device memory (produced by a kernel)."""
import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from cnn_support import on_device, ran_on_fpga

DTYPES = (torch.float32, torch.float16)


LAYOUTS = {
    "contiguous": lambda t: t,
    "channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
    "slice": lambda t: t[:, :, 1:, :-1],
}


def check(fn, x, ops, kernels, layout="contiguous", grad=True):
    """fn(x) and its gradient on the fpga equal the CPU's bit for bit; every op in `ops` ran on the
    fpga (a kernel launched) and none fell back."""
    view = LAYOUTS[layout]
    xc = view(x).detach().requires_grad_(grad)
    expected = fn(xc)
    xf = view(on_device(x)).detach().requires_grad_(grad)
    aten_fpga.reset_stats()
    actual = fn(xf)
    outs_e = expected if isinstance(expected, tuple) else (expected,)
    outs_a = actual if isinstance(actual, tuple) else (actual,)
    for a, e in zip(outs_a, outs_e):
        assert a.device.type == "fpga"
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0, equal_nan=True)
    if grad:
        g = torch.randn(outs_e[0].shape, generator=torch.Generator().manual_seed(7)).to(x.dtype)
        outs_e[0].backward(g)
        outs_a[0].backward(on_device(g))
        torch.testing.assert_close(xf.grad.cpu(), xc.grad, rtol=0, atol=0, equal_nan=True)
    ran_on_fpga(ops, kernels)


def data(shape, dtype, seed=0, ties=False):
    g = torch.Generator().manual_seed(seed)
    if ties:  # few distinct values: the first maximum must win, as on the CPU
        return torch.randint(-4, 4, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


MAX_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 8, 8), 2, 2, 0, 1, False),
    ((2, 3, 9, 7), 3, 2, 1, 1, False),
    ((1, 2, 11, 13), 3, 2, 1, 2, True),
    ((3, 4, 10, 10), (2, 3), (1, 2), (1, 0), 1, True),
    ((2, 5, 7, 7), 3, 1, 1, (2, 1), False),
    ((4, 6, 12), 2, 2, 0, 1, False),  # 3-d: an unbatched image
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(MAX_CASES)))
def test_max_pool2d(level, case, dtype):
    shape, k, s, p, d, ceil = MAX_CASES[case]
    x = data(shape, dtype, case, ties=case % 2 == 1)
    check(lambda t: F.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True), x,
          ["max_pool2d_with_indices", "max_pool2d_with_indices_backward"],
          ["max_pool2d", "max_pool2d_backward"])


@pytest.mark.parametrize("layout", ["channels_last", "slice"])
def test_max_pool2d_non_contiguous(level, layout):
    x = data((2, 3, 9, 10), torch.float32, 3)
    check(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), x,
          ["max_pool2d_with_indices", "max_pool2d_with_indices_backward"],
          ["max_pool2d", "max_pool2d_backward"], layout)


def test_max_pool2d_nan_and_inf(level):
    x = data((1, 2, 6, 6), torch.float32, 5)
    x[0, 0, 1, 1] = float("nan")
    x[0, 0, 4, 4] = float("nan")
    x[0, 0, 4, 5] = float("nan")  # two NaNs in one window: the last one's index, as ATen
    x[0, 1] = float("-inf")  # all -inf: the first element's index
    check(lambda t: F.max_pool2d(t, 2, 2, return_indices=True), x, ["max_pool2d_with_indices"], ["max_pool2d"], grad=False)


AVG_CASES = [  # (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 8, 8), 2, 2, 0, False, True, None),
    ((2, 3, 9, 7), 3, 2, 1, False, True, None),
    ((2, 3, 9, 7), 3, 2, 1, False, False, None),
    ((1, 2, 11, 13), 3, 2, 1, True, True, None),
    ((1, 2, 11, 13), 3, 2, 1, True, False, None),
    ((3, 4, 10, 10), (2, 3), (1, 2), (1, 0), False, True, 5),
    ((4, 6, 12), 3, 3, 1, True, False, None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(AVG_CASES)))
def test_avg_pool2d(level, case, dtype):
    shape, k, s, p, ceil, pad, div = AVG_CASES[case]
    x = data(shape, dtype, 10 + case)
    check(lambda t: F.avg_pool2d(t, k, s, p, ceil, pad, div), x, ["avg_pool2d", "avg_pool2d_backward"], ["avg_pool2d", "avg_pool2d_backward"])


@pytest.mark.parametrize("layout", ["channels_last", "slice"])
def test_avg_pool2d_non_contiguous(level, layout):
    x = data((2, 3, 9, 10), torch.float32, 3)
    check(lambda t: F.avg_pool2d(t, 3, 2, 1), x, ["avg_pool2d", "avg_pool2d_backward"], ["avg_pool2d", "avg_pool2d_backward"], layout)


ADAPTIVE = [((2, 3, 7, 7), (3, 3)), ((1, 4, 10, 9), (4, 2)), ((2, 2, 5, 6), (5, 6)), ((3, 8, 8), (3, 5))]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(ADAPTIVE)))
def test_adaptive_avg_pool2d(level, case, dtype):
    shape, out = ADAPTIVE[case]
    x = data(shape, dtype, 20 + case)
    check(lambda t: F.adaptive_avg_pool2d(t, out), x, ["_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward"],
          ["avg_pool2d", "avg_pool2d_backward"])


def test_adaptive_avg_pool2d_channels_last(level):
    x = data((2, 3, 7, 9), torch.float32, 30)
    check(lambda t: F.adaptive_avg_pool2d(t, (2, 4)), x, ["_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward"],
          ["avg_pool2d", "avg_pool2d_backward"], "channels_last")


def test_adaptive_avg_pool2d_to_one_is_a_mean(level):
    """nn.AdaptiveAvgPool2d(1) (ResNet's head) reaches mean, not _adaptive_avg_pool2d."""
    x = data((2, 3, 7, 7), torch.float32, 31)
    aten_fpga.reset_stats()
    y = F.adaptive_avg_pool2d(on_device(x), 1)
    torch.testing.assert_close(y.cpu(), F.adaptive_avg_pool2d(x, 1))
    assert "_adaptive_avg_pool2d" not in aten_fpga.stats()


def test_unsupported_dtype_falls_back_counted(level):
    x = data((1, 2, 6, 6), torch.float64, 1)
    aten_fpga.reset_stats()
    y = F.max_pool2d(x.to("fpga"), 2)
    torch.testing.assert_close(y.cpu(), F.max_pool2d(x, 2), rtol=0, atol=0)
    assert aten_fpga.stats()["max_pool2d_with_indices"]["cpu_fallback"] == 1


def test_large_plane_falls_back_counted(level):
    x = data((1, 1, 300, 300), torch.float32, 2)  # 90000 elements: more than a plane on chip
    aten_fpga.reset_stats()
    y = F.avg_pool2d(x.to("fpga"), 2)
    torch.testing.assert_close(y.cpu(), F.avg_pool2d(x, 2), rtol=0, atol=0)
    assert aten_fpga.stats()["avg_pool2d"]["cpu_fallback"] == 1


def test_bad_arguments_name_the_cause(level):
    x = torch.randn(1, 2, 4, 4).to("fpga")
    with pytest.raises(RuntimeError, match="pad should be"):
        F.max_pool2d(x, 2, 2, 2)
