"""torch.fft on the FPGA (kernels/hls/fft, host/ps/fpga_fft.cpp) against pocketfft on the CPU, at
every XCL_OPT level, with inputs valid only in device memory (made by a kernel)."""
import math

import pytest
import torch

import aten_fpga





def on_device(t):
    """An fpga copy of `t` valid only in device memory: the output of a kernel (x * 1 is exact)."""
    return t.to("fpga") * 1


def close(actual, expected, n):
    """The issue's bound: max |error| / max |x| below 1e-5 * log2(n) (pocketfft is the reference)."""
    actual = actual.cpu()
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    scale = max(expected.abs().max().item(), 1e-30)
    err = (actual - expected).abs().max().item() / scale if expected.numel() else 0.0
    assert err <= 1e-5 * max(1.0, math.log2(n)), err


def ran_on_fpga(*ops):
    s = aten_fpga.stats()
    for op in ops:
        assert s.get(op, {}).get("fpga", 0) >= 1, (op, s)
    assert not any(r["cpu_fallback"] for r in s.values()), s


def cplx(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(*shape, generator=g), torch.randn(*shape, generator=g))


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64, 512, 1024, 4096])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_ifft_sizes_and_norms(level, n, norm):
    x = cplx(3, n, seed=n)
    aten_fpga.reset_stats()
    close(torch.fft.fft(on_device(x), norm=norm), torch.fft.fft(x, norm=norm), n)
    close(torch.fft.ifft(on_device(x), norm=norm), torch.fft.ifft(x, norm=norm), n)
    ran_on_fpga("_fft_c2c")


def test_largest_transform(level):
    n = 1 << 16
    x = cplx(1, n)
    close(torch.fft.fft(on_device(x)), torch.fft.fft(x), n)


def test_roundtrip_gives_x_back(level):
    x = cplx(5, 256, seed=3)
    back = torch.fft.ifft(torch.fft.fft(on_device(x)))  # the spectrum never leaves the device
    torch.testing.assert_close(back.cpu(), x, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_any_dim_batched_over_the_others(level, dim):
    x = cplx(4, 8, 16, seed=dim + 7)
    close(torch.fft.fft(on_device(x), dim=dim), torch.fft.fft(x, dim=dim), x.shape[dim])


def test_non_contiguous_inputs(level):
    x = cplx(32, 16, seed=11)
    close(torch.fft.fft(on_device(x).t(), dim=-1), torch.fft.fft(x.t(), dim=-1), 32)  # transposed
    close(torch.fft.fft(on_device(x)[::2, 1:9], dim=-1), torch.fft.fft(x[::2, 1:9], dim=-1), 8)  # sliced


@pytest.mark.parametrize("n", [1, 2, 8, 64, 1024])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_rfft_irfft(level, n, norm):
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(n))
    aten_fpga.reset_stats()
    spectrum = torch.fft.rfft(on_device(x), norm=norm)
    close(spectrum, torch.fft.rfft(x, norm=norm), n)
    ran_on_fpga("_fft_r2c")
    aten_fpga.reset_stats()
    y = cplx(3, n // 2 + 1, seed=n)
    close(torch.fft.irfft(on_device(y), n=n, norm=norm), torch.fft.irfft(y, n=n, norm=norm), n)
    ran_on_fpga("_fft_c2r")


def test_multi_dim_transforms(level):
    x = cplx(2, 8, 16, seed=5)
    r = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(6))
    close(torch.fft.fft2(on_device(x)), torch.fft.fft2(x), 128)
    close(torch.fft.ifftn(on_device(x), dim=(0, 2)), torch.fft.ifftn(x, dim=(0, 2)), 32)
    close(torch.fft.fftn(on_device(x)), torch.fft.fftn(x), 256)
    close(torch.fft.rfft2(on_device(r)), torch.fft.rfft2(r), 128)
    s = torch.fft.rfft2(r)
    close(torch.fft.irfft2(on_device(s), s=(8, 16)), torch.fft.irfft2(s, s=(8, 16)), 128)
    close(torch.fft.hfft(on_device(x[0]), n=16), torch.fft.hfft(x[0], n=16), 16)


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12, 100, 1000, 4095])
def test_other_lengths_run_as_chirp_z_transforms(level, n):
    # Bluestein: an m-point convolution (m >= 2n - 1, a power of two) between chirp products.
    x = cplx(3, n, seed=n)
    aten_fpga.reset_stats()
    close(torch.fft.fft(on_device(x)), torch.fft.fft(x), n)
    close(torch.fft.ifft(on_device(x), norm="ortho"), torch.fft.ifft(x, norm="ortho"), n)
    r = x.real.contiguous()
    close(torch.fft.rfft(on_device(r)), torch.fft.rfft(r), n)
    close(torch.fft.irfft(on_device(x), n=n), torch.fft.irfft(x, n=n), n)  # odd n: the full spectrum has n points
    ran_on_fpga("_fft_c2c", "_fft_r2c", "_fft_c2r")


def test_mixed_lengths_over_several_dims(level):
    x = cplx(6, 10, 16, seed=4)
    aten_fpga.reset_stats()
    close(torch.fft.fftn(on_device(x)), torch.fft.fftn(x), 960)
    close(torch.fft.rfft2(on_device(x.real.contiguous())), torch.fft.rfft2(x.real.contiguous()), 160)
    ran_on_fpga("_fft_c2c", "_fft_r2c")


def test_longest_chirp_z_transform(level):
    n = (1 << 15) - 1
    x = cplx(1, n)
    aten_fpga.reset_stats()
    close(torch.fft.fft(on_device(x)), torch.fft.fft(x), n)
    ran_on_fpga("_fft_c2c")


def test_lengths_beyond_the_rows_fall_back_counted(level):
    x = cplx(1, (1 << 15) + 2)  # 2n - 1 points do not fit a 2^16-point row
    aten_fpga.reset_stats()
    close(torch.fft.fft(on_device(x)), torch.fft.fft(x), x.size(1))
    assert aten_fpga.stats()["_fft_c2c"]["cpu_fallback"] == 1


def test_out_variants(level):
    x = cplx(4, 32, seed=9)
    out = torch.empty(0, dtype=torch.complex64, device="fpga")
    torch.fft.fft(on_device(x), out=out)
    close(out, torch.fft.fft(x), 32)
    r = torch.randn(4, 32)
    out = torch.empty(0, dtype=torch.complex64, device="fpga")
    torch.fft.rfft(on_device(r), out=out)
    close(out, torch.fft.rfft(r), 32)


def test_stft_istft_run_on_the_device(level):
    signal = torch.randn(2, 2048, generator=torch.Generator().manual_seed(1))
    window = torch.hann_window(256)
    aten_fpga.reset_stats()
    spec = torch.stft(on_device(signal), 256, hop_length=64, window=on_device(window), return_complex=True)
    expected = torch.stft(signal, 256, hop_length=64, window=window, return_complex=True)
    close(spec, expected, 256)
    back = torch.istft(spec, 256, hop_length=64, window=on_device(window), length=2048)
    torch.testing.assert_close(back.cpu(), signal, atol=1e-4, rtol=1e-4)
    s = aten_fpga.stats()
    assert s["_fft_r2c"]["fpga"] >= 1 and s["_fft_c2r"]["fpga"] >= 1, s
    assert not {op for op, r in s.items() if r["cpu_fallback"]}, s  # padding, overlap-add, checks: all on the device
