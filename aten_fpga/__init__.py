"""aten_fpga: PyTorch on AMD/Xilinx FPGAs.

    import aten_fpga
    x = torch.randn(1024, device="fpga")
    (x * 2 + 1).cpu()

Ops in native_functions_fpga.yaml run as HLS kernels from the loaded device image; every other
op runs through a counted CPU fallback. `stats()` tells which did what.
"""
from __future__ import annotations

import os

import torch

# "fpga" names PrivateUse1 before anything parses the string.
if torch._C._get_privateuse1_backend_name() != "fpga":
    torch.utils.rename_privateuse1_backend("fpga")

from ._C_loader import _C  # noqa: E402  (registers the device with the dispatcher)
from . import device as _device_module  # noqa: E402
from ._paths import emu_image_path  # noqa: E402

if not hasattr(torch, "fpga"):
    torch._register_device_module("fpga", _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)

__all__ = ["load", "image", "stats", "reset_stats", "format_stats"]


def load(image: str | int) -> str:
    """Load a device image on every fpga device: a path, or an XCL_OPT level (1-4) meaning the
    emulated image `scons opt=N` built. Returns the path loaded."""
    path = emu_image_path(image) if isinstance(image, int) else os.path.abspath(image)
    if not os.path.exists(path):
        hint = f"`scons opt={image}`" if isinstance(image, int) else "`scons` (or check the path)"
        raise FileNotFoundError(f"no fpga device image at {path}: build it with {hint}")
    _C.load_image(path)
    return path


def image() -> str:
    """The path of the image loaded on the current device ('' if none)."""
    return _C.image_path(_C.current_device())


def stats() -> dict[str, dict[str, int]]:
    """Per ATen op: how many times it ran as an FPGA kernel and how many times on the CPU."""
    return {op: {"fpga": f, "cpu_fallback": c} for op, (f, c) in sorted(_C.stats().items())}


def reset_stats() -> None:
    _C.reset_stats()


def format_stats() -> str:
    rows = stats()
    width = max([len("op")] + [len(op) for op in rows])
    lines = [f"{'op':<{width}}  {'fpga':>8}  {'cpu_fallback':>12}"]
    lines += [f"{op:<{width}}  {r['fpga']:>8}  {r['cpu_fallback']:>12}" for op, r in rows.items()]
    return "\n".join(lines)


def _load_default_image() -> None:
    """ATEN_FPGA_IMAGE (a path or a level 1-4) or the opt=4 emulated image, when it is built."""
    choice = os.environ.get("ATEN_FPGA_IMAGE", "")
    if choice:
        load(int(choice) if choice.isdigit() else choice)
    elif os.path.exists(emu_image_path(4)):
        load(4)
    # else: no image yet; the first kernel launch says how to build one


_load_default_image()
