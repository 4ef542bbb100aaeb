"""Helpers shared by the tests of the CNN layers (norm, softmax, losses, activation gradients)."""
from __future__ import annotations

import torch

import aten_fpga





def on_device(t: torch.Tensor, requires_grad: bool = False) -> torch.Tensor:
    """`t` on "fpga" as another kernel leaves it: valid only in device memory (the host shadow is
    stale), as in a chain of ops."""
    d = t.to("fpga")
    d = (d * 1 if d.is_floating_point() else d + 0).detach()
    return d.requires_grad_(requires_grad)


def assert_ran(*funcs: str) -> None:
    """Each op ran as an FPGA kernel, and nothing at all fell back to the CPU."""
    stats = aten_fpga.stats()
    for f in funcs:
        assert stats.get(f, {}).get("fpga", 0) >= 1, (f, stats.get(f))
    fallbacks = {k: v for k, v in stats.items() if v["cpu_fallback"]}
    assert fallbacks == {}, fallbacks


def close(actual: torch.Tensor, expected: torch.Tensor, **tol) -> None:
    assert actual.device.type == "fpga", actual.device
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape,
                                                                               expected.dtype, expected.shape)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)
