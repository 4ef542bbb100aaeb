"""The codegen step: native_functions_fpga.yaml + PyTorch's table + templates -> build/gen.

SCons asks the codegen's plan (codegen/plan.py: our table and the kernel library, no PyTorch) which
files it writes and which kernels the image holds, as objects; the codegen itself runs as a
subprocess only when one of its inputs changed (content signatures), so a no-op build never
imports torch or torchgen."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass

from SCons.Errors import UserError

GEN = "build/gen"
TABLE = "native_functions_fpga.yaml"


@dataclass(frozen=True)
class KernelSource:
    name: str  # the HLS top function: an engine (e_binary), a member (v_add_float32), a fused kernel
    category: str
    dtype: str
    source: str  # the generated HLS source, e.g. build/gen/hls/engines/e_binary_opt4.cpp
    op: str = ""  # a member's library op (add); the resource model prices its element function
    members: tuple[KernelSource, ...] = ()  # an engine's kernels (codegen/engines.py), opcode order
    compute_lanes: int = 1  # a member's elements computed per cycle (codegen/model.py Kernel.compute_lanes)


@dataclass(frozen=True)
class Generated:
    nodes: list  # every file codegen writes
    fpga_type: list[str]  # FPGAType.h and its translation units (the host extension's)
    kernels: tuple[KernelSource, ...]  # what the image holds: the engines of kernels= and dtypes=
    interface: str  # the level's kernel interfaces (codegen/interface.py), read by the link and the xclbin
    emu_units: dict[str, tuple[str, list[str]]]  # engine key -> (its emulated-image unit, the sources it includes)
    members: str = ""  # the level's member table (codegen/engines.py), carried by the xclbin


def native_functions_yaml() -> str:
    """PyTorch's table as torchgen packages it (an input of the codegen), found without importing
    torchgen (which would cost a no-op build its time)."""
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("torchgen is not installed (it comes with torch); run `pip install torch==2.13.0` first")
    return os.path.join(spec.submodule_search_locations[0], "packaged", "ATen", "native", "native_functions.yaml")


def generate(env, cfg, steps) -> Generated:
    from codegen.engines import engine_name, engine_source, groups
    from codegen.model import TableError
    from codegen.plan import interface_file, member_file, plan

    try:
        p = plan(TABLE, cfg.kernels, cfg.dtypes)
    except TableError as e:
        raise UserError(str(e)) from None
    level = cfg.opt
    if not p.kernels:
        raise UserError(f"kernels={','.join(cfg.kernels)} dtypes={','.join(cfg.dtypes)} selects no kernel of "
                        f"{TABLE}; its kernels are: {', '.join(k.name for k in plan(TABLE).kernels)}")
    kernels = tuple(KernelSource(engine_name(key), ks[0].op.category, "", f"{GEN}/{engine_source(key, level)}", "",
                                 tuple(KernelSource(k.name, k.op.category, k.dtype.name, f"{GEN}/{k.source(level)}",
                                                    k.op.name, (), k.compute_lanes if level == 4 else 1) for k in ks))
                    for key, ks in groups(p.kernels, level).items())
    targets = [f"{GEN}/{f}" for f in p.files((level,))]
    sources = ([TABLE, native_functions_yaml()] + sorted(env.Glob("#codegen/*.py"), key=str)
               + sorted(env.Glob("#kernels/hls/*/*.j2"), key=str) + sorted(env.Glob("#kernels/hls/*/ops.yaml"), key=str))
    selection = (f" --kernels {','.join(cfg.kernels)}" if cfg.kernels else "") + \
        (f" --dtypes {','.join(cfg.dtypes)}" if cfg.dtypes else "")
    command = f"{sys.executable} -m codegen generate --out {GEN} --levels {level}{selection}"
    # The torch version too: its headers' DispatchStubs are an input, and the codegen records the
    # version it ran against (and reports an upgrade) even if native_functions.yaml did not change.
    nodes = env.Command(targets, sources + [env.Value(importlib.metadata.version("torch"))], command)
    env.Precious(nodes)  # codegen rewrites only changed files; SCons must not delete them first
    steps.track(env, nodes, "codegen", f"codegen opt{level}", "codegen", map(str, sources), command)
    units = {k.name.removeprefix("e_"): (f"{GEN}/{u}", [k.source, *(m.source for m in k.members)])
             for k, u in zip(kernels, p.emu_units(level))}
    return Generated(nodes, [f"{GEN}/{f}" for f in p.fpga_type], kernels, f"{GEN}/{interface_file(level)}", units,
                     f"{GEN}/{member_file(level)}")


def with_fused(env, cfg, gen: Generated) -> Generated:
    """`gen` plus the fused kernels in cfg.fused (torch.compile's, written by
    `python -m aten_fpga.compile export`): their sources compile like the table's, and their
    interfaces join the level's interface file, from which the link config is written."""
    import dataclasses
    import glob

    if not cfg.fused:
        return gen
    if not cfg.hardware:
        raise UserError("fused= builds fused kernels into a card's xclbin (target=sw_emu, hw_emu or hw); the "
                        "emulated device compiles them on demand")
    sources = sorted(glob.glob(os.path.join(cfg.fused, "v_fused_*.cpp")))
    if not sources:
        raise UserError(f"fused={cfg.fused}: no v_fused_*.cpp in it; write them with "
                        f"`python -m aten_fpga.compile export {cfg.fused}`")
    fused = tuple(KernelSource(os.path.basename(s)[:-4], "fused", "float32", s, "fused") for s in sources)
    merged = f"{cfg.out_dir}/interface_fused.json"
    node = env.Command(merged, [gen.interface] + list(sources), _merge_interfaces)
    env.Depends(node, env.Glob("#codegen/interface.py"))
    return dataclasses.replace(gen, kernels=gen.kernels + fused, interface=merged)


def _merge_interfaces(target, source, env):
    import json

    from codegen.interface import parse

    with open(str(source[0]), encoding="utf-8") as f:
        doc = json.load(f)
    for s in source[1:]:
        with open(str(s), encoding="utf-8") as f:
            top = parse(f.read(), str(s))
        doc["kernels"][top.name] = top.to_json()
    with open(str(target[0]), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    return 0
