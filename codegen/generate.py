"""The generation pipeline: load and validate the model, run the pure generators, write files
only when their content changed (so SCons, which compares content, rebuilds nothing needlessly)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from functools import lru_cache

from . import abi, baseline, cache, check, engines, interface, storage
from . import library as kernel_library
from .gen_fpga_type import generate_fpga_type
from .gen_hls import arg_names, emu_units, generate_hls, template_env, templates_hash
from .model import LEVELS, Entry, Kernel, ResolvedEntry, Table, TableError
from .native import NativeTable, dispatch_stubs, load_native, load_ops, torch_include_dir, torch_version
from .plan import ABI_HEADER, HLS_ROOT, MANIFEST, ROOT, interface_file, member_file, plan, selected  # noqa: F401  (ROOT, HLS_ROOT: re-exported)
from .table import load_table, resolve, validate


def select(entries: tuple[ResolvedEntry, ...], kernels: tuple[str, ...]) -> tuple[ResolvedEntry, ...]:
    return tuple(r for r in entries if selected(r.entry, r.kernels, kernels))


def load(table_path: str, native_path: str | None = None):
    library = kernel_library.load_library(HLS_ROOT)
    table = load_table(table_path)
    entries = resolve(table, load_native(native_path), library, dispatch_stubs(torch_include_dir()))
    return entries, library


@dataclass(frozen=True)
class Upgrade:
    """The installed torch against the build's recorded baseline (codegen/baseline.py)."""

    report: check.Report  # the upgrade report, baseline -> installed
    skipped: tuple[tuple[Entry, tuple[TableError, ...]], ...]  # entries that only the upgrade broke, and why


def upgrade(table: Table, record: baseline.Record, out_dir: str, native: NativeTable, library: dict,
            stubs: dict[str, str]) -> Upgrade:
    """What the installed torch changes for the table since the baseline: an entry broken now and
    valid with the baseline is skipped; one broken with both is the table's mistake (not skipped)."""
    old = load_ops(record.native_functions(out_dir))
    old_stubs = baseline.stubs(out_dir, record)
    report = check.build_report(table, old, native.op_table, library, old_stubs, stubs)
    before = validate(table, old, library, old_stubs)
    now = validate(table, native.op_table, library, stubs)
    skipped = tuple((e, now[e.func]) for e in table.entries if now[e.func] and not before[e.func])
    return Upgrade(report, skipped)


def upgrade_markdown(u: Upgrade) -> str:
    """build/upgrade-report.md: what was skipped, then the whole report."""
    b, t = u.report.baseline, u.report.target
    lines = [f"# Upgrade report: {b.label} -> {t.label}", "",
             "Written by `scons` (`python -m codegen generate`) when it regenerated `build/gen` for a torch "
             "other than the one it was generated against. `python -m codegen check` prints the same "
             "report again; docs/upgrading.md says how to act on it.", "",
             f"## Skipped entries ({len(u.skipped)})", ""]
    if u.skipped:
        lines += ["Left out of this build: their ops run on the CPU through the fallback (counted) until "
                  "the table is fixed and the baseline moves to the installed torch.", ""]
        lines += [f"- `{check.located(err)}`" for _, errors in u.skipped for err in errors]
    else:
        lines.append(f"None: every entry generates with {t.label}.")
    lines += ["", "## Report", "", "```text", check.format_text(u.report).rstrip("\n"), "```", ""]
    return "\n".join(lines)


def manifest(entries: tuple[ResolvedEntry, ...], kernels: tuple[Kernel, ...]) -> str:
    """kernels.json: what each op runs, for SCons (which sources exist) and the build report."""
    doc = {
        "ops": {r.entry.func: {"kernel": r.entry.kernel, "stub": r.stub,
                               "kernels": [k.name for k in r.kernels]} for r in entries},
        "kernels": {k.name: {"category": k.op.category, "op": k.op.name, "dtype": k.dtype.name,
                             "args": arg_names(k),
                             "sources": {str(l): k.source(l) for l in LEVELS}}
                    for k in kernels},
    }
    return json_text(doc)


def json_text(doc) -> str:
    """`json.dumps(doc, indent=1, sort_keys=True)` and a newline, byte for byte, for a `doc` whose
    dicts have string keys, in half the time: the json module encodes in C only without indent (so
    here only the dicts of plain values), and the interface files are large."""
    out: list[str] = []
    _json(doc, "\n", out)
    out.append("\n")
    return "".join(out)


def _json(value, newline: str, out: list[str]) -> None:
    """Append `value` at the depth whose line break (and indent) is `newline`."""
    scalar = _SCALARS.get(type(value))
    if scalar is not None:
        out.append(scalar(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + " "
        if all(type(v) in _SCALARS for v in value.values()):
            # a dict of plain values: json's C encoder, with the line break and indent as its separator
            text = _leaf_encoder(inner).encode(value)
            out.append("{" + inner + text[1:-1] + newline + "}")
            return
        sep = "{" + inner
        for k in sorted(value):
            out.append(sep + _string(k) + ": ")
            _json(value[k], inner, out)
            sep = "," + inner
        out.append(newline + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = newline + " "
        sep = "[" + inner
        for item in value:
            out.append(sep)
            _json(item, inner, out)
            sep = "," + inner
        out.append(newline + "]")
    else:
        out.append(json.dumps(value))  # another scalar type: as json writes it


@lru_cache(maxsize=None)
def _leaf_encoder(inner: str) -> json.JSONEncoder:
    return json.JSONEncoder(sort_keys=True, separators=("," + inner, ": "))


_string = json.encoder.encode_basestring_ascii
_SCALARS = {str: _string, int: int.__repr__, bool: lambda b: "true" if b else "false", type(None): lambda _: "null",
            float: lambda f: float.__repr__(f) if f - f == 0 else json.dumps(f)}  # json's NaN, Infinity


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


def read_back(sources: list[tuple[str, str]], name: str) -> list[tuple[interface.TopFunction, dict]]:
    """Each (where, code)'s top function (checked: codegen/interface.py) and local arrays
    (codegen/storage.py), read from the text. Kept in the codegen's cache (`name`: one file per
    level and kind) by the text's hash: a warm run reads back only the sources whose text changed."""
    name, version = f"interfaces/{name}", cache.key()
    stored = cache.load(name, version) or {}
    keys = [hashlib.sha256(code.encode()).digest() for _, code in sources]
    found: dict[bytes, tuple[interface.TopFunction, dict]] = {}
    for (where, code), k in zip(sources, keys):
        if k not in found:
            found[k] = stored.get(k) or _read(code, where)
    if found.keys() != stored.keys():
        cache.store(name, version, found)  # this run's: the entries of texts no longer rendered go
    return [found[k] for k in keys]


def _read(code: str, where: str) -> tuple[interface.TopFunction, dict]:
    resolve = interface.resolver(code)
    return interface.check(interface.parse(code, where, resolve), where), storage.memories(code, resolve)


def kernel_interfaces(kernels: tuple[Kernel, ...], files: dict[str, str], level: int) -> tuple[dict, dict]:
    """Each kernel's AXI interface at one level, read from the source just rendered (its arguments
    must be the ABI's: ports, scalars, sizes, in that order), and its local arrays (codegen/storage.py)."""
    doc, memories = {}, {}
    sources = [(f"kernels/hls/{k.op.category}/opt{level}.cpp.j2 ({k.name})", files[k.source(level)]) for k in kernels]
    for k, (where, _), (top, arrays) in zip(kernels, sources, read_back(sources, f"kernels_opt{level}")):
        names = [a.name for a in top.args]
        if top.name != k.name or names != arg_names(k):
            raise interface.InterfaceError(
                f"{where}: the top function is {top.name}({', '.join(names)}); ops.yaml says "
                f"{k.name}({', '.join(arg_names(k))}) (its inputs, outputs, scalars, sizes)")
        doc[k.name] = top
        memories[k.name] = arrays
    return doc, memories


def add_engines(kernels: tuple[Kernel, ...], files: dict[str, str], level: int, env=None) -> None:
    """Render the level's engines into `files`, with the interface file (the engines' interfaces,
    which the link and the xclbin describe, beside their members') and the member table. All of it
    follows from the kernels, the level and the templates (the members' texts are theirs), so it is
    kept in the codegen's cache under them: a warm run of an unchanged selection reads it back."""
    env = env or template_env(HLS_ROOT)
    name, version = f"renders/engines_opt{level}", cache.key(templates_hash(env), *(repr(k) for k in kernels))
    stored = cache.load(name, version)
    if stored is None:
        stored = _engines(kernels, files, level, env)
        cache.store(name, version, stored)
    files.update(stored)


def _engines(kernels: tuple[Kernel, ...], files: dict[str, str], level: int, env) -> dict[str, str]:
    files = dict(files)
    before = set(files)
    tops, memories = kernel_interfaces(kernels, files, level)
    built = engines.engines(kernels, tops, level)
    doc = {name: top.to_json() for name, top in tops.items()}
    for e in built:
        files[e.source] = engines.HEADER + engines.render(e, env)
    sources = [(f"{e.source} (codegen/engines.py)", files[e.source]) for e in built]
    for e, (where, _), (top, arrays) in zip(built, sources, read_back(sources, f"engines_opt{level}")):
        if top != e.top:
            raise interface.InterfaceError(f"{where}: the rendered top function reads back as {top}, not {e.top}")
        doc[e.name] = top.to_json()
        if e.datapaths:  # their arrays are the engine's own (XCL_OPT 1 tiles), not its members'
            memories[e.name] = arrays
    members = {e.name: [m.kernel for m in e.members] for e in built}
    # `memories`: each kernel's local arrays; `datapaths`: the members that share a region (by
    # opcode) -- both priced by the build's resource model.
    shared = {e.name: [[m.opcode for m in d.members] for d in e.datapaths] for e in built if e.datapaths}
    files[interface_file(level)] = json_text({"level": level, "kernels": doc, "engines": members, "memories": memories,
                                              "datapaths": shared})
    files[member_file(level)] = engines.member_table(built)
    files.update(emu_units(built))
    return {path: text for path, text in files.items() if path not in before}


def run(table_path: str, out_dir: str, levels=LEVELS, kernels: tuple[str, ...] = (), say=print,
        dtypes: tuple[str, ...] = ()):
    """Generate into out_dir; against a torch other than the one recorded there, first `say` the
    upgrade report and write it to upgrade-report.md beside out_dir (build/upgrade-report.md)."""
    with cache.no_gc():
        return _run(table_path, out_dir, levels, kernels, say, dtypes)


def _run(table_path: str, out_dir: str, levels, kernels: tuple[str, ...], say, dtypes: tuple[str, ...]):
    library = kernel_library.load_library(HLS_ROOT)
    table = load_table(table_path)
    native = load_native()
    stubs = dispatch_stubs(torch_include_dir())
    version = torch_version()
    record = baseline.read(out_dir)
    skipped: tuple = ()
    if record is not None and record.baseline != version:
        u = upgrade(table, record, out_dir, native, library, stubs)
        skipped = u.skipped
        if record.generated_with != version:
            say(f"codegen: {out_dir} was generated against PyTorch {record.generated_with}; the installed "
                f"torch is {version}. The upgrade report:\n")
            say(check.format_text(u.report))
            path = os.path.join(os.path.dirname(os.path.abspath(out_dir)), "upgrade-report.md")
            write_if_changed(path, upgrade_markdown(u))
            say(f"codegen: upgrade report written to {path}")
        for e, errors in skipped:
            say(f"{check.where(e.loc)}: warning: skipped '{e.func}', which worked with "
                f"PyTorch {record.baseline} ({errors[0].message}); its op falls back to the CPU until the table "
                "is fixed")
    left_out = {e.func for e, _ in skipped}
    entries = resolve(Table(table.path, tuple(e for e in table.entries if e.func not in left_out)),
                      native, library, stubs)
    chosen = select(entries, kernels)
    p = plan(table_path, kernels, dtypes)  # the kernels of every entry, skipped ones too: the plan needs no torch
    files = {ABI_HEADER: abi.header()}
    files.update(generate_fpga_type(entries, units=len(p.fpga_type) - 1))  # every entry; missing kernels fall back
    env = template_env(HLS_ROOT)
    files.update(generate_hls(p.kernels, env, levels))
    files[MANIFEST] = manifest(chosen, p.kernels)
    for level in levels:
        add_engines(p.kernels, files, level, env)
    assert sorted(files) == sorted(p.files(levels)), "codegen.plan disagrees with run"
    new_record, record_files = baseline.files(out_dir, version, os.path.dirname(native.path), stubs,
                                              complete=not skipped)
    changed = [rel for rel, text in sorted(files.items()) if write_if_changed(os.path.join(out_dir, rel), text)]
    for rel, text in record_files.items():
        write_if_changed(os.path.join(out_dir, rel), text)
    for folder in baseline.stale(out_dir, new_record):
        shutil.rmtree(folder)
    return sorted(files), changed
