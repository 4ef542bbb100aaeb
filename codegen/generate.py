"""The generation pipeline: load and validate the model, run the pure generators, write files
only when their content changed (so SCons, which compares content, rebuilds nothing needlessly)."""
from __future__ import annotations

import json
import os

from . import abi, interface
from . import library as kernel_library
from .gen_fpga_type import generate_fpga_type
from .gen_hls import arg_names, generate_hls, template_env
from .model import LEVELS, Kernel, ResolvedEntry, kernels_of
from .native import dispatch_stubs, load_native, torch_include_dir
from .plan import ABI_HEADER, HLS_ROOT, MANIFEST, ROOT, interface_file, plan, selected  # noqa: F401  (ROOT, HLS_ROOT: re-exported)
from .table import load_table, resolve


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
                    for k in kernels_of(r.kernels for r in entries)},
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


def interfaces(kernels: tuple[Kernel, ...], files: dict[str, str], level: int) -> str:
    """interface_opt<N>.json: each kernel's AXI interface at one level, read from the source just
    rendered; its arguments must be the ABI's (ports, scalars, sizes, in that order)."""
    doc = {}
    for k in kernels:
        where = f"kernels/hls/{k.op.category}/opt{level}.cpp.j2 ({k.name})"
        top = interface.check(interface.parse(files[k.source(level)], where), where)
        names = [a.name for a in top.args]
        if top.name != k.name or names != arg_names(k):
            raise interface.InterfaceError(
                f"{where}: the top function is {top.name}({', '.join(names)}); ops.yaml says "
                f"{k.name}({', '.join(arg_names(k))}) (its inputs, outputs, scalars, sizes)")
        doc[k.name] = top.to_json()
    return json.dumps({"level": level, "kernels": doc}, indent=1, sort_keys=True) + "\n"


def run(table_path: str, out_dir: str, levels=LEVELS, kernels: tuple[str, ...] = ()):
    entries, _ = load(table_path)
    chosen = select(entries, kernels)
    files = {ABI_HEADER: abi.header()}
    files.update(generate_fpga_type(entries))  # the host registers every entry; missing kernels fall back
    files.update(generate_hls(chosen, template_env(HLS_ROOT), levels))
    files[MANIFEST] = manifest(chosen)
    ks = kernels_of(r.kernels for r in chosen)
    for level in levels:
        files[interface_file(level)] = interfaces(ks, files, level)
    assert sorted(files) == sorted(plan(table_path, kernels).files(levels)), "codegen.plan disagrees with run"
    changed = [rel for rel, text in sorted(files.items()) if write_if_changed(os.path.join(out_dir, rel), text)]
    return sorted(files), changed
