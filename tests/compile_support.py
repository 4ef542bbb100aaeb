"""What the torch.compile tests share: a fresh dynamo and an untouched global RNG around each test
(import the fixtures into a test module to use them), and a card whose xclbin lacks the fused
kernels."""
from __future__ import annotations

import pytest
import torch

import aten_fpga
from aten_fpga.compile import runner


@pytest.fixture(autouse=True)
def keep_global_rng():
    """Later tests' unseeded draws see the stream they would without these tests."""
    with torch.random.fork_rng(devices=[]):
        yield


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class _CardWithoutFusedKernels:
    """aten_fpga._C as on XRT with an xclbin that holds none of the fused kernels."""

    def __getattr__(self, name):
        return getattr(aten_fpga._C, name)

    @staticmethod
    def device_kind():
        return "xrt"

    @staticmethod
    def fused_available(name, device=0):
        return False


def card_without_fused_kernels(monkeypatch) -> None:
    """The compile runner sees a card that lacks every fused kernel (and warns afresh)."""
    monkeypatch.setattr(runner, "_C", _CardWithoutFusedKernels())
    monkeypatch.setattr(runner, "_warned", set())
