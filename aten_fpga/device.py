"""torch.fpga: the device module of device "fpga", as torch.cuda is for "cuda"."""
from __future__ import annotations

import torch

from ._C_loader import _C

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "synchronize",
           "get_device_name", "manual_seed", "manual_seed_all", "initial_seed"]


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def _index(dev) -> int:
    if dev is None:
        return current_device()
    if isinstance(dev, int):
        return dev
    dev = torch.device(dev)
    if dev.type != "fpga":
        raise ValueError(f"expected an fpga device, got {dev}")
    return current_device() if dev.index is None else dev.index


def set_device(dev) -> None:
    _C.set_device(_index(dev))


class device:
    """Context manager that makes `dev` the current fpga device."""

    def __init__(self, dev):
        self.idx = _index(dev)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        _C.set_device(self.idx)

    def __exit__(self, *exc):
        _C.set_device(self.prev)
        return False


def synchronize(dev=None) -> None:
    """Wait for the device's queued work. Kernel runs complete before their op returns, so this
    only validates the device."""
    _index(dev)


def get_device_name(dev=None) -> str:
    return _C.device_name(_index(dev))


_seed = 0


def manual_seed(seed: int) -> None:
    """Random ops on fpga run through the CPU fallback, drawing from the CPU generator: seeding
    fpga seeds that generator too, so results match a CPU run seeded the same way."""
    global _seed
    _seed = int(seed)
    torch.default_generator.manual_seed(_seed)


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def initial_seed() -> int:
    return _seed


def _is_in_bad_fork() -> bool:
    return False
