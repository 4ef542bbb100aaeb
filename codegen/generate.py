"""The generation pipeline: load and validate the model, run the pure generators, write files
only when their content changed (so SCons, which compares content, rebuilds nothing needlessly)."""
from __future__ import annotations

import json
import os

from . import library as kernel_library
from .gen_fpga_type import generate_fpga_type
from .gen_hls import arg_names, generate_hls, kernels_of, template_env
from .model import LEVELS, Kernel, ResolvedEntry
from .native import dispatch_stubs, load_native, torch_include_dir
from .table import entry_kernels, load_table, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HLS_ROOT = os.path.join(ROOT, "kernels", "hls")


def selected(entry_kernels: tuple[Kernel, ...], kernels: tuple[str, ...]) -> bool:
    """Whether `kernels=` (categories or ops; empty: all) selects an entry running these kernels."""
    return not kernels or any(k.op.category in kernels or k.op.name in kernels for k in entry_kernels)


def select(entries: tuple[ResolvedEntry, ...], kernels: tuple[str, ...]) -> tuple[ResolvedEntry, ...]:
    return tuple(r for r in entries if selected(r.kernels, kernels))


def load(table_path: str, native_path: str | None = None):
    library = kernel_library.load_library(HLS_ROOT)
    table = load_table(table_path)
    entries = resolve(table, load_native(native_path), library, dispatch_stubs(torch_include_dir()))
    return entries, library


def manifest(entries: tuple[ResolvedEntry, ...]) -> str:
    """kernels.json: what each op runs, for SCons (which sources exist) and the build report."""
    doc = {
        "ops": {r.entry.func: {"kernel": r.entry.kernel, "stub": r.stub,
                               "kernels": [k.name for k in r.kernels]} for r in entries},
        "kernels": {k.name: {"category": k.op.category, "op": k.op.name, "dtype": k.dtype.name,
                             "args": arg_names(k),
                             "sources": {str(l): k.source(l) for l in LEVELS}}
                    for k in kernels_of(entries)},
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def write_if_changed(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def plan(table_path: str, levels=LEVELS, kernels: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The files `run` writes, without loading PyTorch's table: SCons declares them as targets.
    {"fpga_type": [...], "hls": [...], "emu": {level: [...]}}, paths relative to the output dir."""
    from .gen_fpga_type import unit_count

    library = kernel_library.load_library(HLS_ROOT)
    table = load_table(table_path)
    seen: dict[str, Kernel] = {}
    for e in table.entries:
        ks = entry_kernels(e, library)
        if selected(ks, kernels):
            for k in ks:
                seen.setdefault(k.name, k)
    ks = list(seen.values())
    return {
        "fpga_type": ["FPGAType.h", *(f"FPGAType_{i}.cpp" for i in range(unit_count(len(table.entries))))],
        "manifest": ["kernels.json"],
        "hls": {l: [k.source(l) for k in ks] for l in levels},
        "emu": {l: sorted({f"emu/opt{l}/{k.op.category}.cpp" for k in ks}) for l in levels},
    }


def run(table_path: str, out_dir: str, levels=LEVELS, kernels: tuple[str, ...] = ()):
    entries, _ = load(table_path)
    chosen = select(entries, kernels)
    files = generate_fpga_type(entries)  # the host registers every entry; missing kernels fall back
    files.update(generate_hls(chosen, template_env(HLS_ROOT), levels))
    files["kernels.json"] = manifest(chosen)
    changed = [rel for rel, text in sorted(files.items()) if write_if_changed(os.path.join(out_dir, rel), text)]
    return sorted(files), changed
