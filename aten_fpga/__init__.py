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

__all__ = ["load", "image", "stats", "reset_stats", "format_stats", "report", "format_report", "record"]

# Which size arguments make a launch's work (report()'s by_kernel "work"), for the arrays the
# projection prices by it (aten_fpga/projection.py compute_seconds): a GEMM's multiply-adds, an
# FFT's samples. The host counts it per op and kernel (host/ps/stats.h set_work_specs).
WORK_SPECS = (("m", "n", "k", "batch"), ("batch", "2^log2n"))
_C.set_work_specs([list(s) for s in WORK_SPECS])


_LOADABLE = ("an XCL_OPT level 1-4 (the emulated image `scons opt=N` builds), an image folder (e.g. "
             "build/emu/opt4), or the path of a .xclbin (torch.xclbin) or of an emulated torch_emu.so")


def load(image: str | int | os.PathLike) -> str:
    """Load a device image on every fpga device and return the path loaded. `image` is an XCL_OPT
    level (1-4: the emulated image `scons opt=N` built), an image folder (its torch.xclbin, which
    on the emulated device names the g++ library beside it), or the path of an xclbin or of the
    emulated image's .so."""
    if isinstance(image, bool) or not isinstance(image, (int, str, os.PathLike)):
        raise TypeError(f"aten_fpga.load({image!r}): expected {_LOADABLE}")
    if isinstance(image, int):
        path = emu_image_path(image)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no fpga device image at {path}: build it with `scons opt={image}`")
    else:
        path = os.path.abspath(os.fspath(image))
        if os.path.isdir(path):
            path = os.path.join(path, "torch.xclbin")
            if not os.path.exists(path):
                raise FileNotFoundError(f"{os.path.dirname(path)} is a folder without an image (no torch.xclbin in "
                                        f"it): build one with `scons`; aten_fpga.load accepts {_LOADABLE}")
        elif not path.endswith((".xclbin", ".so")):
            raise ValueError(f"aten_fpga.load({image!r}): {path} is not an image; expected {_LOADABLE}")
        elif not os.path.exists(path):
            raise FileNotFoundError(f"no fpga device image at {path}: build it with `scons` (or check the path)")
    _C.load_image(path)
    _C.set_projection("", {})  # the profiler's projected times were the previous image's
    return path


def image() -> str:
    """The path of the image loaded on the current device ('' if none)."""
    return _C.image_path(_C.current_device())


def stats() -> dict[str, dict[str, int]]:
    """Per ATen op: how many times it ran on the FPGA (a run counts only when the op launched at
    least one kernel) and how many times it fell back to the CPU."""
    return {op: {"fpga": r["fpga"], "cpu_fallback": r["cpu_fallback"]}
            for op, r in _rows().items() if r["fpga"] or r["cpu_fallback"]}


def _rows() -> dict[str, dict]:
    """report()'s rows as the host counted them (no projection)."""
    rows = {}
    for op, (fpga, cpu, to_dev, to_host, fpga_ns, cpu_ns, launches, kernels, kernel_bytes) in sorted(_C.stats().items()):
        rows[op] = {"fpga": fpga, "launches": launches,
                    "kernels": {k: v[0] for k, v in sorted(kernels.items())},
                    "by_kernel": {k: {"launches": n, "bytes": b, "work": w,
                                      "sizes": [dict(sizes, launches=c) for sizes, c in recorded]}
                                  for k, (n, b, w, recorded) in sorted(kernels.items())},
                    "cpu_fallback": cpu, "bytes_to_device": to_dev, "bytes_to_host": to_host,
                    "fpga_seconds": fpga_ns / 1e9, "cpu_seconds": cpu_ns / 1e9, "kernel_bytes": kernel_bytes}
    return rows


def report(platform: str | None = None) -> dict[str, dict[str, float]]:
    """Per ATen op: FPGA runs, the kernel launches they made (in all, and per kernel), CPU
    fallbacks, bytes synced host->device and device->host (the traffic a card would see over
    PCIe), and seconds spent in FPGA kernels (syncs, device-side copies and runs) and on the host
    (CPU fallback and copies, their syncs included), and `kernel_bytes`: the device memory the
    kernels' buffer arguments span -- what they read and write in device memory (per launch and
    buffer, from the first byte passed to the end of the tensor's allocation). Syncs outside any op
    are under "(outside ops)"; copies are under "_copy_from".

    `by_kernel`: per kernel, its launches, bytes, work (a GEMM's multiply-adds, an FFT's samples)
    and, inside aten_fpga.record(), its launches' size arguments. `projected_seconds`: what the op
    would take on a card (`platform`, default the one the loaded image was built for: the U250 for
    the emulated image), from the perf model (aten_fpga.projection); `projected_joules`: the card's
    board power times that; `projected_missing`: kernels that card's image lacks."""
    from . import projection

    rows = _rows()
    if not rows:
        return rows
    return projection.project_rows(rows, projection.loaded_image(platform))
def reset_stats() -> None:
    """Zero every counter of stats() and report()."""
    _C.reset_stats()


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join(fmt(r) for r in [header] + rows)


def format_stats() -> str:
    return _table(["op", "fpga", "cpu_fallback"],
                  [[op, str(r["fpga"]), str(r["cpu_fallback"])] for op, r in stats().items()])


def format_report(platform: str | None = None) -> str:
    """report() as a table, the ops that moved the most bytes first, with each op's projected time
    and energy on `platform` (default: the loaded image's) and the totals."""
    from . import projection

    img = projection.loaded_image(platform)
    rows = sorted(report(platform).items(), key=lambda kv: -(kv[1]["bytes_to_device"] + kv[1]["bytes_to_host"]))
    table = _table(["op", "fpga", "launches", "cpu_fallback", "to_device", "to_host", "fpga_ms", "cpu_ms",
                    f"{img.platform.alias}_ms", f"{img.platform.alias}_mJ"],
                   [[op, str(r["fpga"]), str(r["launches"]), str(r["cpu_fallback"]), _bytes(r["bytes_to_device"]),
                     _bytes(r["bytes_to_host"]), f"{r['fpga_seconds'] * 1e3:.3f}", f"{r['cpu_seconds'] * 1e3:.3f}",
                     f"{r['projected_seconds'] * 1e3:.3f}",
                     "-" if r["projected_joules"] is None else f"{r['projected_joules'] * 1e3:.3f}"] for op, r in rows])
    seconds = sum(r["projected_seconds"] for _, r in rows)
    watts = projection.board_watts(img)
    energy = f", {watts * seconds * 1e3:.3f} mJ at {watts} W board power" if watts else ""
    return (f"{table}\nprojected on {img.platform.alias} (opt={img.level}): {seconds * 1e3:.3f} ms{energy}")


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _load_default_image() -> None:
    """ATEN_FPGA_IMAGE (a path, or a level 1-4 for the emulated device), else on the emulated
    device the opt=4 image when it is built. An XRT device loads only what ATEN_FPGA_IMAGE names."""
    choice = os.environ.get("ATEN_FPGA_IMAGE", "")
    if choice:
        load(int(choice) if choice.isdigit() else choice)
    elif _C.device_kind() == "emu" and os.path.exists(emu_image_path(4)):
        load(4)
    # else: no image yet; the first kernel launch says how to build or load one


_load_default_image()


def _register_distributed() -> None:
    """Register the "aten_fpga" c10d backend where torch has torch.distributed (already imported
    by torch itself, so this costs a class definition)."""
    import torch.distributed as dist
    if dist.is_available():
        from . import distributed
        distributed.register()


_register_distributed()

from .record import record  # noqa: E402  (the function: `with aten_fpga.record(path):`)
