"""The coherence sanitizer (ATEN_FPGA_SANITIZE=1): a stale side of an allocation holds poison."""
from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys

import pytest
import torch

import aten_fpga

POISON = struct.pack("<Q", 0x7FF47FA07FA07FA0)  # host/ps/allocator.h kPoison
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sanitizing = pytest.mark.skipif(os.environ.get("ATEN_FPGA_SANITIZE", "") in ("", "0"),
                                reason="needs ATEN_FPGA_SANITIZE=1 (ci/test.sh sets it)")


def host_bytes(t: torch.Tensor, n: int = 16) -> bytes:
    """The first n bytes of t's host shadow (data_ptr() is its address), read without a sync."""
    return ctypes.string_at(t.data_ptr(), n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_poison_is_nan_for_every_float_dtype(dtype):
    assert torch.frombuffer(bytearray(POISON * 8), dtype=dtype).isnan().all()


@sanitizing
def test_a_stale_host_shadow_holds_poison_until_a_sync():
    x = torch.randn(64)
    y = x.to("fpga") * 2  # written by a kernel: the device copy is the newer
    assert host_bytes(y, 64) == POISON * 8
    # .cpu() copies from the device copy into its own tensor: the shadow stays stale, and poisoned
    torch.testing.assert_close(y.cpu(), x * 2, rtol=0, atol=0)
    assert host_bytes(y, 64) == POISON * 8
    assert y[0].item() == x[0].item() * 2  # a sync of y's first port word (16 floats)
    assert host_bytes(y, 64) == (x * 2).numpy().tobytes()[:64]


@sanitizing
def test_partial_writes_keep_the_other_side():
    """A CPU write into part of a device-valid tensor syncs it first; a kernel then sees both."""
    x = torch.arange(8.0)
    y = x.to("fpga") + 0
    y[2:5] = torch.tensor([-1.0, -2.0, -3.0])  # a copy from the CPU into part of y: host side
    expected = x.clone()
    expected[2:5] = torch.tensor([-1.0, -2.0, -3.0])
    torch.testing.assert_close((y * 1).cpu(), expected, rtol=0, atol=0)
    z = y[1:7:2]  # a strided view written by a kernel
    z.mul_(10)
    expected[1:7:2] *= 10
    torch.testing.assert_close(y.cpu(), expected, rtol=0, atol=0)


def test_off_by_default_the_host_shadow_is_not_touched():
    code = ("import ctypes, torch, aten_fpga; x = torch.ones(16).to('fpga'); y = x * 2; "
            "print(ctypes.string_at(y.data_ptr(), 8).hex())")
    env = {k: v for k, v in os.environ.items() if k != "ATEN_FPGA_SANITIZE"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() != POISON.hex()
