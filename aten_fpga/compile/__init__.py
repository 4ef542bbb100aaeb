"""torch.compile for the "fpga" device: `torch.compile(model, backend="aten_fpga")`.

Chains of pointwise ops (optionally ending in one reduction over the last dim) in the forward and
backward graphs become fused HLS dataflow kernels, generated from the table kernels' own element
functions; everything else runs as in eager mode. See docs/compile.md."""
from __future__ import annotations

import importlib.metadata
import os

from . import cache
from .backend import aten_fpga_backend, fuse_graph  # noqa: F401
from .runner import RECORDED

BACKEND = "aten_fpga"


def _register() -> None:
    """Registers the backend by name unless the installed package's `torch_dynamo_backends` entry
    point does (dynamo loads it on first use; registering twice is an error)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    listed = any(ep.name == BACKEND for ep in importlib.metadata.entry_points(group="torch_dynamo_backends"))
    if not listed and BACKEND not in _COMPILER_FNS:
        register_backend(aten_fpga_backend, name=BACKEND)


_register()


def report() -> dict:
    """This process's fused kernels: compiled now, found in the cache, seconds spent compiling."""
    return {**cache.STATS, "kernels": len(RECORDED)}


def export(folder: str, level: int = 4) -> list[str]:
    """Writes the HLS source of every fused kernel this process ran, at XCL_OPT `level`, into
    `folder` (one file per kernel, plus kernels.txt listing them), for `scons fused=<folder>`."""
    from . import codegen

    os.makedirs(folder, exist_ok=True)
    written = []
    for name, kernel in sorted(RECORDED.items()):
        path = os.path.join(folder, f"{name}.cpp")
        with open(path, "w") as f:
            f.write(codegen.render(kernel, level))
        written.append(path)
    with open(os.path.join(folder, "kernels.txt"), "w") as f:
        f.write(f"# fused kernels at XCL_OPT {level}, written by aten_fpga.compile.export\n")
        f.writelines(f"{name}\n" for name in sorted(RECORDED))
    return written
