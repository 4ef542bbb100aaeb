"""Helpers shared by the tests of the CNN layers (convolution, pooling, norm, softmax, losses,
activation gradients)."""
from __future__ import annotations

import torch

import aten_fpga
from runtime_support import assert_ran  # noqa: F401  re-exported for the CNN tests


def on_device(t: torch.Tensor, requires_grad: bool = False) -> torch.Tensor:
    """`t` on "fpga" as another kernel leaves it: valid only in device memory (the host shadow is
    stale), as in a chain of ops."""
    d = t.to("fpga")
    d = (d * 1 if d.is_floating_point() else d + 0).detach()
    return d.requires_grad_(requires_grad)


def close(actual: torch.Tensor, expected: torch.Tensor, **tol) -> None:
    assert actual.device.type == "fpga", actual.device
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape,
                                                                               expected.dtype, expected.shape)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)


def launched(kernel: str) -> int:
    """Launches of v_<kernel>_* in report(), whichever op they are booked to."""
    return sum(n for r in aten_fpga.report().values() for k, n in r["kernels"].items()
               if k.startswith(f"v_{kernel}_"))


def ran_on_fpga(ops, kernels) -> None:
    """No op of `ops` fell back, and every kernel of `kernels` launched."""
    s = aten_fpga.stats()
    for op in ops:
        assert s.get(op, {}).get("cpu_fallback", 0) == 0, (op, s)
    for k in kernels:
        assert launched(k) >= 1, (k, aten_fpga.report())
