"""`python -m codegen check`: is the FPGA table ready for another PyTorch version?

It reads two versions of PyTorch's native_functions.yaml — the baseline (by default the one the
build recorded in build/gen: the last torch every entry generated against, see baseline.py; before
any build, the installed torch's) and the target (by default the installed one, or another
version's file) — and reports, for every table entry, what changed between them: op removed or
renamed, schema changed, dispatch (structured / ufunc / CPU kernel) changed, and whether the entry
is still valid with the target. It also lists new members of the op families the table covers, as
candidates to add. The baseline's schema is the reference. `scons` prints the same report when it
regenerates for another torch (generate.py).

Exit status: 0 the table is valid for the target, 1 some entry is broken, 2 bad input.

Layout as in the rest of the codegen: loading at the edge (`check`), then pure functions from the
loaded facts to a frozen `Report`, and two renderings (`format_text`, `to_json`).
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, replace

from . import baseline
from . import library as kernel_library
from .model import Category, Location, Table, TableError
from .native import (INSTALLED_NATIVE, OpInfo, OpTable, Schema, dispatch_stubs, is_installed, load_ops,
                     torch_include_dir, torch_version)
from .table import load_table, validate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HLS_ROOT = os.path.join(ROOT, "kernels", "hls")
GEN = os.path.join(ROOT, "build", "gen")  # where `scons` generates, recording the torch it used

EXIT_OK, EXIT_BROKEN, EXIT_BAD_INPUT = 0, 1, 2


# --- The report's model ------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """One difference between the baseline's and the target's facts about an overload."""

    kind: str  # argument added|removed|renamed, type|default|keyword-only|order|returns changed, dispatch
    subject: str  # the argument, "returns", or the dispatch field
    old: str | None
    new: str | None

    def __str__(self) -> str:
        k, s, old, new = self.kind, self.subject, self.old, self.new
        if k == "argument added":
            return f"argument added: {new}"
        if k == "argument removed":
            return f"argument removed: {old}"
        if k == "argument renamed":
            return f"argument '{old}' renamed to '{new}'"
        if k == "keyword-only changed":
            return f"argument '{s}' became {'keyword-only' if new == 'True' else 'positional'}"
        if k == "order changed":
            return f"argument order changed: ({old}) -> ({new})"
        if k == "returns changed":
            return f"returns changed: {old} -> {new}"
        if k == "dispatch":
            return f"{s}: {old} -> {new}"
        return f"argument '{s}': {k.split()[0]} {old} -> {new}"  # type / default changed

    def to_json(self) -> dict:
        return {"kind": self.kind, "subject": self.subject, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class EntryReport:
    func: str
    line: int
    status: str  # "ok" | "changed" | "broken" | "removed" | "renamed"
    errors: tuple[str, ...]  # why it does not work with the target ("file:line: message")
    baseline_errors: tuple[str, ...]  # ... and with the baseline, to tell old mistakes from new ones
    in_baseline: bool
    in_target: bool
    baseline_schema: str | None
    target_schema: str | None
    schema_changes: tuple[Change, ...]
    dispatch_changes: tuple[Change, ...]
    successors: tuple[str, ...]  # for a vanished op: the rename, or the closest target overloads

    @property
    def broken(self) -> bool:
        return bool(self.errors)

    def to_json(self) -> dict:
        return {
            "func": self.func, "line": self.line, "status": self.status, "broken": self.broken,
            "errors": list(self.errors), "baseline_errors": list(self.baseline_errors),
            "in_baseline": self.in_baseline, "in_target": self.in_target,
            "schema": {"baseline": self.baseline_schema, "target": self.target_schema},
            "schema_changes": [c.to_json() for c in self.schema_changes],
            "dispatch_changes": [c.to_json() for c in self.dispatch_changes],
            "successors": list(self.successors),
        }


@dataclass(frozen=True)
class Candidate:
    """A target overload the generator could register, in a family the table covers, that the table
    lacks and that was not such a family member in the baseline."""

    func: str
    families: tuple[str, ...]
    reason: str
    schema: str
    line: int

    def to_json(self) -> dict:
        return {"func": self.func, "families": list(self.families), "reason": self.reason,
                "schema": self.schema, "line": self.line}


@dataclass(frozen=True)
class Side:
    path: str
    version: str
    installed: bool

    @property
    def label(self) -> str:
        name = self.version if self.version == self.path else f"PyTorch {self.version}"
        return name + (" (installed)" if self.installed else "")

    def to_json(self) -> dict:
        return {"path": self.path, "version": self.version, "installed": self.installed}


@dataclass(frozen=True)
class Report:
    table: str
    baseline: Side
    target: Side
    entries: tuple[EntryReport, ...]
    families: tuple[str, ...]  # the families the table covers
    candidates: tuple[Candidate, ...]
    notes: tuple[str, ...]

    @property
    def broken(self) -> tuple[EntryReport, ...]:
        return tuple(e for e in self.entries if e.broken)

    @property
    def exit_status(self) -> int:
        return EXIT_BROKEN if self.broken else EXIT_OK

    def to_json(self) -> dict:
        return {
            "table": self.table, "baseline": self.baseline.to_json(), "target": self.target.to_json(),
            "valid": not self.broken, "exit_status": self.exit_status,
            "summary": {s: sum(e.status == s for e in self.entries)
                        for s in ("ok", "changed", "broken", "removed", "renamed")},
            "entries": [e.to_json() for e in self.entries],
            "families": list(self.families),
            "candidates": [c.to_json() for c in self.candidates],
            "notes": list(self.notes),
        }


# --- Comparing two versions' facts (pure) -------------------------------------------------------

def diff_schema(old: Schema, new: Schema) -> tuple[Change, ...]:
    """Arguments added, removed, renamed (same place and type, new name), retyped, new defaults,
    moved between positional and keyword-only or reordered; and the returns."""
    changes: list[Change] = []
    new_names = {a.name for a in new.args}
    old_names = {a.name for a in old.args}
    gone = [(i, a) for i, a in enumerate(old.args) if a.name not in new_names]
    came = [(i, a) for i, a in enumerate(new.args) if a.name not in old_names]
    renamed = {}
    for i, a in gone:
        for j, b in came:
            if i == j and a.type == b.type and a.kwarg_only == b.kwarg_only and j not in renamed.values():
                renamed[i] = j
    new_by_name = {a.name: a for a in new.args}
    for i, a in enumerate(old.args):
        if i in renamed:
            b = new.args[renamed[i]]
            changes.append(Change("argument renamed", a.name, a.name, b.name))
        elif a.name in new_by_name:
            b = new_by_name[a.name]
        else:
            continue
        if a.type != b.type:
            changes.append(Change("type changed", b.name, a.type, b.type))
        if a.default != b.default:
            changes.append(Change("default changed", b.name, a.default or "(none)", b.default or "(none)"))
        if a.kwarg_only != b.kwarg_only:
            changes.append(Change("keyword-only changed", b.name, str(a.kwarg_only), str(b.kwarg_only)))
    changes += [Change("argument removed", a.name, str(a), None) for i, a in gone if i not in renamed]
    changes += [Change("argument added", b.name, None, str(b)) for j, b in came if j not in renamed.values()]
    rename = {old.args[i].name: new.args[j].name for i, j in renamed.items()}
    kept_old = [rename.get(a.name, a.name) for a in old.args if a.name in new_names or a.name in rename]
    kept_new = [b.name for b in new.args if b.name in set(kept_old)]
    if kept_old != kept_new:
        changes.append(Change("order changed", "arguments", ", ".join(kept_old), ", ".join(kept_new)))
    if old.returns != new.returns:
        changes.append(Change("returns changed", "returns", old.returns, new.returns))
    return tuple(changes)


_DISPATCH_FIELDS = (
    ("structured", lambda i: str(i.structured)),
    ("structured_delegate", lambda i: i.structured_delegate or "(none)"),
    ("ufunc_inner_loop", lambda i: "yes" if i.ufunc else "no"),
    ("CPU kernel", lambda i: i.cpu_kernel or "(none)"),
    ("precomputed", lambda i: str(i.precomputed)),
)


def diff_dispatch(old: OpInfo, new: OpInfo) -> tuple[Change, ...]:
    """How the op is dispatched: what decides whether the generator can register it, and how."""
    return tuple(Change("dispatch", name, get(old), get(new))
                 for name, get in _DISPATCH_FIELDS if get(old) != get(new))


def _shape(s: Schema) -> tuple:
    """A schema without names: argument types and kinds, and the return types."""
    returns = tuple(r.strip().rsplit(" ", 1)[0] if " " in r.strip() else r.strip()
                    for r in s.returns.strip("()").split(",") if r.strip())
    return tuple((a.type, a.kwarg_only) for a in s.args), returns


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _likeness(old: OpInfo, new: OpInfo) -> float:
    """How likely `new` is what `old` became: its name, the usual renames (a prefix added, as in
    cholesky -> linalg_cholesky), the overload, argument types and names."""
    o, n = old.schema, new.schema
    score = difflib.SequenceMatcher(None, o.name, n.name).ratio()
    if n.base != o.base and n.base.endswith(o.base):
        score += 0.3
    elif o.base in n.base:
        score += 0.15
    score += 0.1 * (o.name.partition(".")[2] == n.name.partition(".")[2]) + 0.1 * (o.is_out == n.is_out)
    score += 0.3 * _jaccard({a.type for a in o.args}, {a.type for a in n.args})
    score += 0.3 * _jaccard({a.name for a in o.args}, {a.name for a in n.args})
    score += 0.3 * _jaccard({a.name for a in o.out}, {a.name for a in n.out})
    return score


def successors(old: OpInfo, baseline: OpTable, target: OpTable, n: int = 3) -> tuple[tuple[str, ...], bool]:
    """What a vanished overload may have become: (names, best first; whether the first is a rename,
    i.e. an overload new in the target with the very same argument and return types)."""
    ranked = sorted(target.ops.values(), key=lambda i: (-_likeness(old, i), i.name))
    for info in ranked[:10]:
        if info.name not in baseline and _shape(info.schema) == _shape(old.schema):
            return (info.name, *[i.name for i in ranked[:n] if i.name != info.name][:n - 1]), True
    return tuple(i.name for i in ranked[:n]), False


def covered_families(table: Table, baseline: OpTable, target: OpTable) -> tuple[str, ...]:
    fams: set[str] = set()
    for e in table.entries:
        for side in (baseline, target):
            info = side.get(e.func)
            if info is not None:
                fams |= info.families
    return tuple(sorted(fams))


def candidates(table: Table, families: tuple[str, ...], baseline: OpTable, target: OpTable,
               renamed_to: frozenset[str] = frozenset()) -> tuple[Candidate, ...]:
    """Target overloads the generator could register, in the table's families, not in the table (nor
    the new name of a renamed entry), and not already such family members in the baseline (new
    ops, newly structured, newly tagged)."""
    listed = {e.func for e in table.entries} | renamed_to
    out = []
    for info in target.ops.values():
        fams = info.families & set(families)
        if not fams or not info.eligible or info.name in listed:
            continue
        old = baseline.get(info.name)
        if old is None:
            reason = f"new in {target.version}"
        elif not old.eligible:
            reason = "now a structured out= overload with a CPU kernel"
        elif not (old.families & fams):
            reason = f"newly tagged {', '.join(sorted(fams - old.families))}"
        else:
            continue
        out.append(Candidate(info.name, tuple(sorted(fams)), reason, str(info.schema), info.line))
    return tuple(sorted(out, key=lambda c: c.func))


def build_report(table: Table, baseline: OpTable, target: OpTable, library: dict[str, Category],
                 baseline_stubs: dict[str, str] | None, target_stubs: dict[str, str] | None) -> Report:
    """The whole comparison; stubs are given for a side only when it is the installed torch."""
    target_errors = validate(table, target, library, target_stubs)
    baseline_errors = validate(table, baseline, library, baseline_stubs)
    same = os.path.realpath(baseline.path) == os.path.realpath(target.path)
    entries = []
    for e in table.entries:
        old, new = baseline.get(e.func), target.get(e.func)
        schema_changes = diff_schema(old.schema, new.schema) if old and new else ()
        dispatch_changes = diff_dispatch(old, new) if old and new else ()
        names: tuple[str, ...] = ()
        renamed = False
        if new is None and old is not None:
            names, renamed = successors(old, baseline, target)
        errors = tuple(str(err) for err in target_errors[e.func])
        if new is None and old is not None:
            status = "renamed" if renamed else "removed"
        elif errors:
            status = "broken"
        elif schema_changes or dispatch_changes:
            status = "changed"
        else:
            status = "ok"
        entries.append(EntryReport(
            e.func, e.loc.line, status, errors, tuple(str(err) for err in baseline_errors[e.func]),
            old is not None, new is not None, str(old.schema) if old else None, str(new.schema) if new else None,
            schema_changes, dispatch_changes, names))
    families = covered_families(table, baseline, target)
    notes = []
    if same:
        notes.append("baseline and target are the same file: this only validates the table; pass "
                     "--native-functions (another version's file) or --baseline to compare versions")
    if target_stubs is None:
        notes.append(f"DispatchStubs are not checked for {target.version}: only the installed torch's headers "
                     "declare them; run `python -m codegen check` again after upgrading")
    renamed_to = frozenset(e.successors[0] for e in entries if e.status == "renamed")
    return Report(table.path, _side(baseline), _side(target), tuple(entries), families,
                  candidates(table, families, baseline, target, renamed_to) if not same else (), tuple(notes))


def _side(ops: OpTable) -> Side:
    return Side(ops.path, ops.version, is_installed(ops.path))


# --- The edge: load everything, then compare ----------------------------------------------------

def native_path(path: str | None) -> str:
    """A native_functions.yaml, or a folder holding one (…/2.15.0/); default: the installed torch's."""
    if path is None:
        return INSTALLED_NATIVE
    if os.path.isdir(path):
        return os.path.join(path, "native_functions.yaml")
    return path


def check(table_path: str, target_path: str | None = None, baseline_path: str | None = None,
          gen_dir: str | None = None) -> Report:
    """Load the table, the kernel library and both versions' tables (TableError on bad input).
    The default baseline is the one the build recorded in gen_dir (codegen/baseline.py): the last
    torch every entry generated against; else the installed torch's. gen_dir defaults to GEN."""
    gen_dir = gen_dir or GEN
    table = load_table(table_path)
    library = kernel_library.load_library(HLS_ROOT)
    record = baseline.read(gen_dir) if baseline_path is None else None
    recorded = record is not None and record.baseline != torch_version()
    baseline_ops = load_ops(record.native_functions(gen_dir) if recorded else native_path(baseline_path))
    target = load_ops(native_path(target_path))
    stubs = None
    if is_installed(baseline_ops.path) or is_installed(target.path):
        stubs = dispatch_stubs(torch_include_dir())
    baseline_stubs = baseline.stubs(gen_dir, record) if recorded else stubs if is_installed(baseline_ops.path) else None
    report = build_report(table, baseline_ops, target, library, baseline_stubs,
                          stubs if is_installed(target.path) else None)
    if baseline_path is None and not recorded and is_installed(target.path):
        why = (f"the build's record ({os.path.join(_display(gen_dir), baseline.RECORD)}) says build/gen was "
               "generated against it" if record else f"no build has recorded one in {_display(gen_dir)} yet")
        report = replace(report, notes=(f"the baseline is the installed torch: {why}", *report.notes))
    return report


# --- Rendering ---------------------------------------------------------------------------------

def to_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=1) + "\n"


def _display(path: str) -> str:
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path


def where(loc: Location) -> str:
    """`file:line`, the file relative to the working folder when inside it."""
    return f"{_display(loc.file)}:{loc.line}"


def located(error: TableError) -> str:
    """A TableError as `file:line: message` (see `where`)."""
    return f"{where(error.loc)}: {error.message}" if error.loc else str(error)


def format_text(report: Report) -> str:
    """A grouped report: what breaks first (with the fix), then what to review, then ideas."""
    t, b = report.target, report.baseline
    table = _display(report.table)
    out = [f"codegen check: {table} ({len(report.entries)} entries) against {t.label}",
           f"  baseline: {b.label:<28} {b.path}",
           f"  target:   {t.label:<28} {t.path}", ""]

    def group(title: str, fix: str, items: list[EntryReport], body) -> None:
        if not items:
            return
        out.append(f"{title} ({len(items)}) -- {fix}")
        for e in items:
            body(e)
        out.append("")

    def gone(e: EntryReport) -> None:
        if e.status == "renamed":
            what = f"renamed to {e.successors[0]} (same argument and return types)"
            if len(e.successors) > 1:
                what += f"; also close: {', '.join(e.successors[1:])}"
        else:
            what = "removed" + (f"; closest: {', '.join(e.successors)}" if e.successors else "")
        out.append(f"  {table}:{e.line}: {e.func}: {what}")
        out.append(f"      was: {e.baseline_schema}")
        if e.baseline_errors:
            out.append(f"      (already broken with {b.label}: {_message(e.baseline_errors[0])})")

    def broken(e: EntryReport) -> None:
        for err in e.errors:
            out.append(f"  {err}")
        if e.baseline_errors and [_message(x) for x in e.baseline_errors] != [_message(x) for x in e.errors]:
            out.append(f"      (already broken with {b.label}: {_message(e.baseline_errors[0])})")
        elif e.baseline_errors:
            out.append(f"      (already broken with {b.label})")

    def changed(changes_of):
        def body(e: EntryReport) -> None:
            out.append(f"  {table}:{e.line}: {e.func}")
            out.extend(f"      {c}" for c in changes_of(e))
            if changes_of is _schema:
                out.append(f"      {b.version}: {e.baseline_schema}")
                out.append(f"      {t.version}: {e.target_schema}")
        return body

    entries = list(report.entries)
    group(f"Removed or renamed in {t.version}", "point the entry at the new overload or delete it",
          [e for e in entries if e.status in ("removed", "renamed")], gone)
    group(f"Broken with {t.version}", "fix or delete these entries",
          [e for e in entries if e.status == "broken"], broken)
    group("Schema changed", "regenerate; review the host stub and the kernel's scalars against the new arguments",
          [e for e in entries if e.schema_changes], changed(_schema))
    group("Dispatch changed", "regenerate; check the op still runs through the same structured class and stub",
          [e for e in entries if e.dispatch_changes], changed(_dispatch))
    new_ops = [e for e in entries if e.in_target and not e.in_baseline]
    if new_ops:
        out.append(f"Not in the baseline ({len(new_ops)}): {', '.join(e.func for e in new_ops)}")
        out.append("")
    fine = [e.func for e in entries if e.status == "ok"]
    if fine:
        out.append(f"Unchanged and valid ({len(fine)}): {', '.join(fine)}")
        out.append("")
    if report.candidates:
        out.append(f"Candidates to add ({len(report.candidates)}) -- structured out= overloads in the "
                   f"families the table covers ({', '.join(report.families)}), new to these families in {t.version}:")
        for c in report.candidates:
            out.append(f"  {c.func}  [{', '.join(c.families)}] {c.reason}")
            out.append(f"      {c.schema}")
        out.append("")
    if report.notes:
        out.append("Notes:")
        out.extend(f"  - {n}" for n in report.notes)
        out.append("")
    n = len(report.broken)
    if n:
        out.append(f"Result: {n} of {len(entries)} entries do not work with {t.label}: exit {report.exit_status}")
    else:
        out.append(f"Result: the table is valid for {t.label}: exit {report.exit_status}")
    return "\n".join(out) + "\n"


def _message(error: str) -> str:
    """A TableError's text without its `file:line: ` prefix."""
    parts = error.split(": ", 1)
    return parts[1] if len(parts) == 2 and parts[0].rsplit(":", 1)[-1].isdigit() else error


def _schema(e: EntryReport) -> tuple[Change, ...]:
    return e.schema_changes


def _dispatch(e: EntryReport) -> tuple[Change, ...]:
    return e.dispatch_changes
