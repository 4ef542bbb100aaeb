"""torch.fpga: the device module of device "fpga", as torch.cuda is for "cuda"."""
from __future__ import annotations

import torch

from ._C_loader import _C

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "synchronize",
           "get_device_name", "manual_seed", "manual_seed_all", "initial_seed", "seed", "seed_all",
           "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "default_generator", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
           "memory_stats", "empty_cache", "OutOfMemoryError", "get_amp_supported_dtype", "is_bf16_supported",
           "Stream", "Event", "current_stream", "default_stream", "set_stream", "stream"]

OutOfMemoryError = torch.OutOfMemoryError


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


# --- streams and events (host/ps/guard.cpp): PyTorch's device-generic torch.Stream / torch.Event --
# Every launch completes before its op returns, so work on every stream is ordered by the host's
# own order; an event records the time at which all work issued before it had completed.

class Stream(torch.Stream):
    """A stream of fpga device `device` (default: the current device), as torch.cuda.Stream."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if kwargs:  # (stream_id, device_index, device_type): an existing stream
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("fpga", _index(device)), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
    """An event of the fpga devices, as torch.cuda.Event (`enable_timing=True` for elapsed_time): a
    torch.Event itself, not a subclass, since torch.Event.elapsed_time accepts no subclass."""
    return torch.Event(device="fpga", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(dev=None) -> Stream:
    """The current stream of device `dev` on this thread (the default stream unless set)."""
    s = torch._C._accelerator_getStream(_index(dev))
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def default_stream(dev=None) -> Stream:
    """The default stream of device `dev`."""
    s = torch._C._accelerator_getStream(_index(dev))
    return Stream(stream_id=0, device_index=s.device_index, device_type=s.device_type)


def set_stream(s: torch.Stream) -> None:
    """Make `s` the current stream of its device on this thread."""
    if s.device.type != "fpga":
        raise ValueError(f"expected a stream of an fpga device, got one of {s.device}")
    torch._C._accelerator_setStream(s)


class stream:
    """Context manager that makes `s` the current stream of its device (None: no change)."""

    def __init__(self, s: torch.Stream | None):
        self.s = s
        self.prev: list[torch.Stream] = []

    def __enter__(self):
        if self.s is not None:
            self.prev.append(current_stream(self.s.device_index))
            set_stream(self.s)
        return self.s

    def __exit__(self, *exc):
        if self.s is not None:
            set_stream(self.prev.pop())
        return False


def get_device_name(dev=None) -> str:
    return _C.device_name(_index(dev))


# --- random numbers: one Philox generator per device (host/ps/generator.h, docs/rng.md) ----------

def default_generator(dev=None) -> torch.Generator:
    """The default generator of device `dev` (random ops on fpga tensors without generator=)."""
    return _C.default_generator(_index(dev))


def manual_seed(seed: int) -> None:
    """Seed the current device's generator (torch.manual_seed seeds every device's)."""
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        default_generator(i).manual_seed(int(seed))


def seed() -> int:
    """Seed the current device's generator with a nondeterministic number, and return it."""
    return default_generator().seed()


def seed_all() -> None:
    s = seed()
    for i in range(device_count()):
        default_generator(i).manual_seed(s)


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(dev=None) -> torch.Tensor:
    """The generator's state: a 16-byte uint8 CPU tensor (seed, then offset)."""
    return default_generator(dev).get_state()


def set_rng_state(new_state: torch.Tensor, dev=None) -> None:
    default_generator(dev).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def _is_in_bad_fork() -> bool:
    return False


# --- memory: the caching allocator's counters, per device (as torch.cuda's) -----------------------

def memory_stats(dev=None) -> dict[str, int]:
    """The caching allocator's counters for `dev`: bytes held by tensors ("allocated_bytes"),
    asked for by them ("requested_bytes"), and held from the device, cached blocks included
    ("reserved_bytes"), each .current and .peak; allocation and device-buffer ("segment")
    counts; cache hits, retries after freeing the cache, and out-of-memory errors."""
    return dict(sorted(_C.memory_stats(_index(dev)).items()))


def memory_allocated(dev=None) -> int:
    """Bytes of device memory held by tensors (whole blocks) on `dev`."""
    return _C.memory_stats(_index(dev))["allocated_bytes.all.current"]


def max_memory_allocated(dev=None) -> int:
    """The peak of memory_allocated since the start or reset_peak_memory_stats()."""
    return _C.memory_stats(_index(dev))["allocated_bytes.all.peak"]


def memory_reserved(dev=None) -> int:
    """Bytes of device memory held by the allocator: tensors' blocks and cached free blocks."""
    return _C.memory_stats(_index(dev))["reserved_bytes.all.current"]


def max_memory_reserved(dev=None) -> int:
    return _C.memory_stats(_index(dev))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(dev=None) -> None:
    _C.reset_peak_memory_stats(_index(dev))


def empty_cache() -> None:
    """Return the cached free blocks of every device to the device (tensors keep theirs), and the
    cached blocks of pinned host memory to the host."""
    _C.empty_cache()


# --- mixed precision: torch.autocast("fpga") (host/ps/autocast.cpp holds its op lists) -----------

def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes torch.autocast("fpga", dtype=...) accepts."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 tensors work on every fpga device (ops without a bfloat16 kernel fall back to the
    CPU, counted in aten_fpga.stats())."""
    return is_available()
