"""Fused kernels compiled on demand for the emulated device: g++ builds each kernel's HLS source,
with the image's flags and shims, into its own shared object in a content-addressed cache,
`ATEN_FPGA_CACHE` (default ~/.cache/aten_fpga). The object's name is the hash of everything that
decides its code (source, flags, the shims and headers it includes, the compiler), so a cached
object is reused across processes and never stale; concurrent compiles of the same kernel each
build in a private folder and publish with an atomic rename."""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from codegen.emu_flags import EMU_CXXFLAGS

from .._paths import build_dir
from . import codegen
from .fuse import FusedKernel, GemmEpilogue

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HLS = os.path.join(ROOT, "kernels", "hls")
# The emulated image's flags (codegen/emu_flags.py says why each), and one instance per kernel.
FLAGS = [*EMU_CXXFLAGS, "-shared", "-DAFPGA_CUS=1"]
PROGRESS_AFTER_S = 1.0


@functools.lru_cache(maxsize=1)
def _gemm_pe_flags() -> list[str]:
    """The XCL_OPT 4 GEMM's PE array (a fused GEMM is that kernel): the emulated build's default,
    from the build's platform table. A fused GEMM's values do not depend on it: each element of c
    sums its products in k order on any array."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "afpga_platforms", os.path.join(ROOT, "site_scons", "afpga", "platforms.py"))
    platforms = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = platforms  # its dataclasses look their module up
    spec.loader.exec_module(platforms)
    pm, pn = platforms.gemm_pe_default(platforms.PLATFORMS[platforms.DEFAULT]).split("x")
    return [f"-DAFPGA_GEMM_PE_M={pm}", f"-DAFPGA_GEMM_PE_N={pn}"]

# Counters of this process: report() of the compile package.
STATS = {"compiled": 0, "cached": 0, "compile_seconds": 0.0}  # seconds: summed over kernels built side by side
_stats_lock = threading.Lock()


def _count(**add) -> None:
    with _stats_lock:
        for k, v in add.items():
            STATS[k] += v


def cache_dir() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get("ATEN_FPGA_CACHE") or "~/.cache/aten_fpga"))


def _includes() -> list[str]:
    gen = os.path.join(build_dir(), "gen")
    return [os.path.join(HLS, "emu", "include"), os.path.join(HLS, "include"), os.path.join(HLS, "emu"), gen]


@functools.lru_cache(maxsize=1)
def _toolchain_key() -> str:
    """The hash of what every object depends on besides its source: shims, headers (by their path in
    the checkout, so checkouts of the same code share objects), compiler."""
    files = [os.path.join(HLS, "emu", "image.h"), os.path.join(HLS, "emu", "image.cpp"),
             os.path.join(build_dir(), "gen", "afpga_abi.h")]
    for folder in (os.path.join(HLS, "emu", "include"), os.path.join(HLS, "include")):
        files += [os.path.join(base, f) for base, _, names in os.walk(folder) for f in names]
    h = hashlib.sha256()
    for path in sorted(files):
        with open(path, "rb") as f:
            h.update(os.path.relpath(path, ROOT).encode() + b"\0" + f.read())
    h.update(subprocess.run(["g++", "--version"], capture_output=True, text=True, check=True).stdout.encode())
    return h.hexdigest()


def object_path(kernel: FusedKernel | GemmEpilogue, level: int) -> tuple[str, str]:
    """(the cached object's path, the kernel's source at `level`)."""
    source = codegen.render(kernel, level)
    key = hashlib.sha256("\0".join([source, " ".join(FLAGS + _gemm_pe_flags()), str(level), _toolchain_key()]).encode()).hexdigest()
    return os.path.join(cache_dir(), f"{kernel.name}_opt{level}_{key[:16]}.so"), source


def build(kernel: FusedKernel | GemmEpilogue, level: int) -> str:
    """The path of the kernel's emulated object, compiled now unless cached."""
    path, source = object_path(kernel, level)
    if os.path.exists(path):
        _count(cached=1)
        return path
    os.makedirs(cache_dir(), exist_ok=True)
    start = time.monotonic()
    done = threading.Event()

    def progress():
        if not done.wait(PROGRESS_AFTER_S):
            print(f"aten_fpga.compile: compiling fused kernel {kernel.name} (XCL_OPT {level}, "
                  f"{len(kernel.steps)} ops) with g++ ...", file=sys.stderr, flush=True)

    threading.Thread(target=progress, daemon=True).start()
    work = tempfile.mkdtemp(prefix=f"{kernel.name}.", dir=cache_dir())
    try:
        src = os.path.join(work, f"{kernel.name}_opt{level}.cpp")
        unit = os.path.join(work, "unit.cpp")
        with open(src, "w") as f:
            f.write(source)
        with open(unit, "w") as f:
            f.write(codegen.emu_unit(kernel, os.path.basename(src)))
        out = os.path.join(work, "kernel.so")
        cmd = ["g++", *FLAGS, *_gemm_pe_flags(), f"-DAFPGA_OPT_LEVEL={level}", *(f"-I{d}" for d in _includes()), "-o", out,
               unit, os.path.join(HLS, "emu", "image.cpp")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"g++ failed to compile fused kernel {kernel.name} (XCL_OPT {level}); its source "
                               f"is kept in {work}:\n{r.stderr[-4000:]}")
        os.replace(out, path)  # atomic: a concurrent compile of the same kernel publishes the same bytes
    except BaseException:
        done.set()
        raise
    done.set()
    shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - start
    _count(compiled=1, compile_seconds=seconds)
    if seconds > PROGRESS_AFTER_S:
        print(f"aten_fpga.compile: {kernel.name} compiled in {seconds:.1f} s", file=sys.stderr, flush=True)
    return path
