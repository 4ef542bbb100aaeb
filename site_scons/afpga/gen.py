"""The codegen step: native_functions_fpga.yaml + PyTorch's table + templates -> build/gen, and
the kernels the image is built from."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from SCons.Errors import UserError

GEN = "build/gen"
TABLE = "native_functions_fpga.yaml"


@dataclass(frozen=True)
class KernelSource:
    name: str  # the HLS top function, e.g. v_add_float32
    category: str
    dtype: str
    source: str  # the generated HLS source, e.g. build/gen/hls/binary/v_add_float32_opt4.cpp


@dataclass(frozen=True)
class Generated:
    nodes: list  # every file codegen writes
    fpga_type: list[str]  # FPGAType.h and its translation units (the host extension's)
    kernels: tuple[KernelSource, ...]  # what the image holds, after kernels= and dtypes=
    hls_sources: list[str]  # every generated kernel source of the level (before dtypes=)
    emu_units: list[str]  # the emulated image's batch translation units


def _kernel(path: str, level: int, dtypes) -> KernelSource:
    """hls/<category>/v_<op>_<dtype>_opt<N>.cpp (codegen.model.Kernel.source)."""
    category, base = path.split("/")[1:3]
    name = base[: -len(f"_opt{level}.cpp")]
    dtype = next(d for d in dtypes if name.endswith("_" + d))
    return KernelSource(name, category, dtype, f"{GEN}/{path}")


def generate(env, cfg, steps) -> Generated:
    from codegen.generate import plan
    from codegen.model import DTYPES, TableError

    try:
        files = plan(TABLE, (cfg.opt,), cfg.kernels)
    except TableError as e:
        raise UserError(str(e)) from None
    kernels = tuple(k for k in (_kernel(p, cfg.opt, DTYPES) for p in files["hls"][cfg.opt])
                    if not cfg.dtypes or k.dtype in cfg.dtypes)
    if not kernels:
        raise UserError(f"kernels={','.join(cfg.kernels)} dtypes={','.join(cfg.dtypes)} selects no kernel of "
                        f"{TABLE}; its kernels are: {', '.join(_kernel(p, cfg.opt, DTYPES).name for p in plan(TABLE, (cfg.opt,))['hls'][cfg.opt])}")
    import torchgen  # its packaged native_functions.yaml is an input

    native_yaml = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native",
                               "native_functions.yaml")
    targets = [f"{GEN}/{f}" for f in files["fpga_type"] + files["manifest"] + files["hls"][cfg.opt]
               + files["emu"][cfg.opt]]
    sources = ([TABLE, native_yaml] + sorted(env.Glob("#codegen/*.py"), key=str)
               + sorted(env.Glob("#kernels/hls/*/*.j2"), key=str) + sorted(env.Glob("#kernels/hls/*/ops.yaml"), key=str))
    selection = f" --kernels {','.join(cfg.kernels)}" if cfg.kernels else ""
    command = f"{sys.executable} -m codegen generate --out {GEN} --levels {cfg.opt}{selection}"
    nodes = env.Command(targets, sources, command)
    env.Precious(nodes)  # codegen rewrites only changed files; SCons must not delete them first
    steps.track(env, nodes, "codegen", f"codegen opt{cfg.opt}", "codegen", map(str, sources), command)
    return Generated(nodes, [f"{GEN}/{f}" for f in files["fpga_type"]], kernels,
                     [f"{GEN}/{f}" for f in files["hls"][cfg.opt]], [f"{GEN}/{f}" for f in files["emu"][cfg.opt]])
