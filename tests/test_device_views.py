"""View ops with only per-backend kernels run on "fpga" as views: aliases of the input's bytes
with the right dtype, sizes and strides (a view cannot fall back: its result must alias)."""
from __future__ import annotations

import warnings

import pytest
import torch

import aten_fpga


def on_device(cpu: torch.Tensor) -> torch.Tensor:
    return cpu.to("fpga") * 1  # written by a kernel: valid only in device memory


VIEWS = {
    "view_as_real": (lambda: torch.randn(4, 3, dtype=torch.complex64), torch.view_as_real),
    "view_as_complex": (lambda: torch.randn(4, 3, 2), torch.view_as_complex),
    "unfold": (lambda: torch.randn(4, 9), lambda t: t.unfold(1, 3, 2)),
    "real": (lambda: torch.randn(5, dtype=torch.complex64), lambda t: t.real),
    "imag": (lambda: torch.randn(5, dtype=torch.complex64), lambda t: t.imag),
    "view_dtype": (lambda: torch.randn(6), lambda t: t.view(torch.int32)),
    "diagonal": (lambda: torch.randn(4, 4), torch.diagonal),
    "alias": (lambda: torch.randn(4), torch.ops.aten.alias),
}


@pytest.mark.parametrize("name", VIEWS)
def test_view_aliases_its_input(name):
    make, view = VIEWS[name]
    x = make()
    X = on_device(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "has no implementation" / fallback warning
        V = view(X)
    v = view(x)
    assert V.device.type == "fpga" and V.dtype == v.dtype and V.shape == v.shape and V.stride() == v.stride()
    assert V.untyped_storage().data_ptr() == X.untyped_storage().data_ptr()
    torch.testing.assert_close(V.cpu(), v, rtol=0, atol=0)
    V.zero_()  # writing through the view writes its base
    v.zero_()
    torch.testing.assert_close(X.cpu(), x, rtol=0, atol=0)


def test_fft_round_trip():
    x = torch.randn(4, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = torch.fft.irfft(torch.fft.rfft(on_device(x)), n=16)
    torch.testing.assert_close(y.cpu(), torch.fft.irfft(torch.fft.rfft(x), n=16))


def test_complex_views_under_autograd():
    x = torch.randn(8, 2, requires_grad=True)
    X = on_device(x.detach()).requires_grad_()
    (torch.view_as_complex(X).abs() ** 2).sum().backward()
    (torch.view_as_complex(x).abs() ** 2).sum().backward()
    torch.testing.assert_close(X.grad.cpu(), x.grad)
