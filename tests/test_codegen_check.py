"""`python -m codegen check`: the upgrade report between PyTorch versions.

Real data: PyTorch 2.7.0 and 2.15.0's native_functions.yaml in ../shared/data/native_functions/
(relative to the repo root) against the installed 2.13.0. Between 2.13 and 2.15 `cholesky.out` and
`qr.Q` were removed, `_cdist_backward` renamed `grad` to `grad_output` and `_scaled_mm_v2.out`
became structured; between 2.7 and 2.13 the Dimname overloads were removed, `tril.out` and
`kthvalue.values` took SymInt, `_scaled_mm.out` got a CPU kernel and argmax/argmin/all/any/... were
tagged `reduction`.
"""
from __future__ import annotations

import json
import os
import textwrap

import pytest

from codegen import check
from codegen.__main__ import main
from codegen.native import INSTALLED_NATIVE, parse_schema, torch_version
from codegen.table import load_table

DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                                     "native_functions"))
V27 = os.path.join(DATA, "2.7.0", "native_functions.yaml")
V215 = os.path.join(DATA, "2.15.0", "native_functions.yaml")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

needs_data = pytest.mark.skipif(not (os.path.exists(V27) and os.path.exists(V215)),
                                reason=f"shared PyTorch 2.7.0/2.15.0 tables absent from {DATA}")
# The 2.15 comparisons take the installed torch as their baseline and name what changed since 2.13.0
# (ci/test-upgrade.sh runs the suite on 2.14.1, which already has most of these changes).
on_213 = pytest.mark.skipif(not torch_version().startswith("2.13."),
                            reason=f"compares the installed torch as 2.13.0 with 2.15.0; installed: {torch_version()}")


@pytest.fixture(autouse=True)
def no_build_record(tmp_path, monkeypatch):
    """`check`'s default baseline is what the checkout's build recorded; these tests must not depend
    on the developer's build/gen, so they look for the record in an empty folder."""
    monkeypatch.setattr(check, "GEN", str(tmp_path / "no-build" / "gen"))


def write(tmp_path, text: str, name: str = "table.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return str(path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["check", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    rc, out, _ = run(capsys, *argv, "--json")
    return rc, json.loads(out)


def entries(doc: dict) -> dict[str, dict]:
    return {e["func"]: e for e in doc["entries"]}


# Ops that PyTorch 2.15 changed relative to the installed 2.13.
TABLE_215 = """
    add.out: {kernel: binary/add, dtypes: [float32]}
    mul.out: {kernel: binary/mul, dtypes: [float32]}
    cholesky.out: {kernel: binary/mul, dtypes: [float32]}
    qr.Q: {kernel: binary/mul, dtypes: [float32]}
    _cdist_backward: {kernel: binary/mul, dtypes: [float32]}
    _scaled_mm_v2.out: {kernel: binary/mul, dtypes: [float32]}
"""

# Ops that the installed 2.13 changed relative to PyTorch 2.7.
TABLE_27 = """
    add.out: {kernel: binary/add, dtypes: [float32]}
    sum.IntList_out: {kernel: binary/add, dtypes: [float32]}
    tril.out: {kernel: binary/mul, dtypes: [float32]}
    kthvalue.values: {kernel: binary/mul, dtypes: [float32]}
    sum.DimnameList_out: {kernel: binary/add, dtypes: [float32]}
    cumsum.dimname_out: {kernel: binary/add, dtypes: [float32]}
    _scaled_mm.out: {kernel: binary/mul, dtypes: [float32]}
"""


# --- 2.13.0 (installed) -> 2.15.0 ------------------------------------------------------------------

@needs_data
@on_213
def test_215_report_names_removed_renamed_and_changed_ops(tmp_path, capsys):
    table = write(tmp_path, TABLE_215)
    rc, out, err = run(capsys, "--table", table, "--native-functions", V215)
    assert rc == 1, err
    assert "against PyTorch 2.15.0" in out
    assert f"baseline: PyTorch {torch_version()} (installed)" in out
    removed = out.split("Removed or renamed in 2.15.0 (2)")[1].split("\n\n")[0]
    assert f"{table}:3: cholesky.out: removed; closest: linalg_cholesky.out" in removed
    assert f"{table}:4: qr.Q: removed; closest: linalg_qr.out" in removed
    schema = out.split("Schema changed (1)")[1].split("\n\n")[0]
    assert f"{table}:5: _cdist_backward" in schema
    assert "argument 'grad' renamed to 'grad_output'" in schema
    assert "2.15.0: _cdist_backward(Tensor grad_output, Tensor x1" in schema
    dispatch = out.split("Dispatch changed (1)")[1].split("\n\n")[0]
    assert f"{table}:6: _scaled_mm_v2.out" in dispatch and "structured: False -> True" in dispatch
    broken = out.split("Broken with 2.15.0 (1)")[1].split("\n\n")[0]
    assert f"{table}:5: '_cdist_backward' is not an out= overload" in broken
    assert "Unchanged and valid (2): add.out, mul.out" in out
    assert "DispatchStubs are not checked for 2.15.0" in out
    assert "Result: 3 of 6 entries do not work with PyTorch 2.15.0: exit 1" in out


@needs_data
@on_213
def test_215_json(tmp_path, capsys):
    table = write(tmp_path, TABLE_215)
    rc, doc = run_json(capsys, "--table", table, "--native-functions", V215)
    assert rc == 1 and doc["exit_status"] == 1 and doc["valid"] is False
    assert doc["target"] == {"path": V215, "version": "2.15.0", "installed": False}
    assert doc["baseline"]["installed"] is True and doc["baseline"]["path"] == os.path.abspath(INSTALLED_NATIVE)
    e = entries(doc)
    assert {f: x["status"] for f, x in e.items()} == {
        "add.out": "ok", "mul.out": "ok", "cholesky.out": "removed", "qr.Q": "removed",
        "_cdist_backward": "broken", "_scaled_mm_v2.out": "changed"}
    assert doc["summary"] == {"ok": 2, "changed": 1, "broken": 1, "removed": 2, "renamed": 0}
    chol = e["cholesky.out"]
    assert chol["line"] == 3 and chol["in_baseline"] and not chol["in_target"] and chol["broken"]
    assert chol["successors"][0] == "linalg_cholesky.out"
    assert chol["schema"] == {"baseline": "cholesky.out(Tensor self, bool upper=False, *, Tensor(a!) out) -> Tensor(a!)",
                              "target": None}
    assert chol["errors"] == [f"{table}:3: unknown ATen op 'cholesky.out' in PyTorch 2.15.0; closest: "
                              "cholesky_solve.out, linalg_cholesky.out, cholesky_inverse.out"]
    assert e["qr.Q"]["successors"][0] == "linalg_qr.out"
    cdist = e["_cdist_backward"]
    assert cdist["schema_changes"] == [
        {"kind": "argument renamed", "subject": "grad", "old": "grad", "new": "grad_output"}]
    assert cdist["baseline_errors"] and cdist["errors"]
    assert e["_scaled_mm_v2.out"]["dispatch_changes"] == [
        {"kind": "dispatch", "subject": "structured", "old": "False", "new": "True"}]
    assert e["_scaled_mm_v2.out"]["errors"] == [] and e["_scaled_mm_v2.out"]["baseline_errors"]
    assert e["add.out"]["schema_changes"] == [] and e["add.out"]["dispatch_changes"] == []
    assert doc["families"] == ["pointwise"] and doc["candidates"] == []


@needs_data
def test_215_project_table_is_valid(capsys):
    rc, out, _ = run(capsys, "--native-functions", os.path.dirname(V215))  # a version's folder works too
    assert rc == 0
    entries = load_table(os.path.join(ROOT, "native_functions_fpga.yaml")).entries
    assert f"Unchanged and valid ({len(entries)}): {', '.join(e.func for e in entries)}" in out
    assert "Result: the table is valid for PyTorch 2.15.0: exit 0" in out


# --- 2.7.0 -> 2.13.0 (installed) -------------------------------------------------------------------

@needs_data
def test_27_report(tmp_path, capsys):
    table = write(tmp_path, TABLE_27)
    rc, out, err = run(capsys, "--table", table, "--baseline", V27)
    assert rc == 1, err
    assert f"against PyTorch {torch_version()} (installed)" in out
    assert f"{table}:5: sum.DimnameList_out: removed; closest: sum.IntList_out" in out
    assert f"{table}:6: cumsum.dimname_out: removed; closest: cumsum.out" in out
    assert "argument 'diagonal': type int -> SymInt" in out
    assert "argument 'k': type int -> SymInt" in out
    assert "CPU kernel: (none) -> _scaled_mm_out_cpu" in out
    # The target is the installed torch: its DispatchStubs are checked.
    assert f"{table}:3: 'tril.out' has no DispatchStub 'tril_stub'" in out
    assert "DispatchStubs are not checked" not in out
    assert "argmax.out  [reduction] newly tagged reduction" in out


@needs_data
def test_27_json(tmp_path, capsys):
    table = write(tmp_path, TABLE_27)
    rc, doc = run_json(capsys, "--table", table, "--baseline", V27)
    assert rc == 1 and doc["baseline"]["version"] == "2.7.0" and doc["target"]["installed"]
    e = entries(doc)
    assert {f: x["status"] for f, x in e.items()} == {
        "add.out": "ok", "sum.IntList_out": "ok", "tril.out": "broken", "kthvalue.values": "broken",
        "sum.DimnameList_out": "removed", "cumsum.dimname_out": "removed", "_scaled_mm.out": "broken"}
    assert e["tril.out"]["schema_changes"] == [
        {"kind": "type changed", "subject": "diagonal", "old": "int", "new": "SymInt"}]
    assert e["sum.DimnameList_out"]["successors"][0] == "sum.IntList_out"
    assert e["_scaled_mm.out"]["dispatch_changes"] == [
        {"kind": "dispatch", "subject": "CPU kernel", "old": "(none)", "new": "_scaled_mm_out_cpu"}]
    assert doc["families"] == ["pointwise", "reduction"]
    cands = {c["func"]: c for c in doc["candidates"]}
    assert {"argmax.out", "argmin.out", "all.out", "any.out", "amax.out"} <= cands.keys()
    assert cands["argmax.out"]["reason"] == "newly tagged reduction"
    assert cands["argmax.out"]["families"] == ["reduction"]
    assert "sum.IntList_out" not in cands  # already in the table
    assert all(not c["func"].endswith((".Tensor", ".Scalar")) for c in doc["candidates"])


@needs_data
def test_27_valid_table_exits_0_with_candidates(tmp_path, capsys):
    table = write(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        sum.IntList_out: {kernel: binary/add, dtypes: [float32]}
    """)
    rc, out, _ = run(capsys, "--table", table, "--baseline", V27)
    assert rc == 0
    assert "Candidates to add" in out and "argmax.out" in out
    assert "Result: the table is valid" in out


def test_default_only_validates(capsys):
    rc, out, _ = run(capsys)
    assert rc == 0
    assert "baseline and target are the same file" in out
    assert "the baseline is the installed torch: no build has recorded one" in out
    assert "Unchanged and valid" in out and "add.out" in out


def test_default_baseline_is_the_build_record(tmp_path, capsys):
    """After `pip install` of another torch, `check` alone compares with the torch the build
    recorded (codegen/baseline.py), here a made-up 2.12.9 whose table has one more overload."""
    gen = tmp_path / "gen"
    folder = gen / "pytorch" / "2.12.9"
    folder.mkdir(parents=True)
    extra = ("- func: mul_legacy.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)\n"
             "  structured: True\n  dispatch:\n    CPU: mul_out\n")
    native = os.path.dirname(INSTALLED_NATIVE)
    with open(INSTALLED_NATIVE, encoding="utf-8") as f:
        (folder / "native_functions.yaml").write_text(f.read() + extra, encoding="utf-8")
    with open(os.path.join(native, "tags.yaml"), encoding="utf-8") as f:
        (folder / "tags.yaml").write_text(f.read(), encoding="utf-8")
    (folder / "dispatch_stubs.json").write_text(json.dumps({"mul_stub": "ATen/native/BinaryOps.h"}))
    (gen / "pytorch" / "record.json").write_text(json.dumps({"generated_with": "2.12.9", "baseline": "2.12.9"}))
    table = write(tmp_path, """
        mul.out: {kernel: binary/mul, dtypes: [float32]}
        mul_legacy.out: {kernel: binary/mul, dtypes: [float32], stub: mul_stub}
    """)
    rc, doc = run_json(capsys, "--table", table, "--gen", str(gen))
    assert rc == 1
    assert doc["baseline"] == {"path": str(folder / "native_functions.yaml"), "version": "2.12.9", "installed": False}
    assert doc["target"]["installed"]
    e = entries(doc)
    assert e["mul_legacy.out"]["status"] == "removed" and e["mul_legacy.out"]["baseline_errors"] == []
    assert e["mul.out"]["status"] == "ok"
    # The recorded stubs stand for the baseline's headers, so its stubs are checked too.
    assert "DispatchStubs are not checked" not in " ".join(doc["notes"])
    # --baseline still wins over the record.
    rc, doc = run_json(capsys, "--table", table, "--gen", str(gen), "--baseline", INSTALLED_NATIVE)
    assert doc["baseline"]["installed"] and entries(doc)["mul_legacy.out"]["status"] == "broken"


def test_default_reports_broken_entry(tmp_path, capsys):
    table = write(tmp_path, """
        add.out: {kernel: binary/add, dtypes: [float32]}
        add.Tensor: {kernel: binary/add, dtypes: [float32]}
    """)
    rc, out, _ = run(capsys, "--table", table)
    assert rc == 1
    assert f"{table}:2: 'add.Tensor' is a functional/in-place variant that delegates to 'add.out'" in out


# --- Bad input: exit 2 ---------------------------------------------------------------------------

def test_missing_table(tmp_path, capsys):
    rc, out, err = run(capsys, "--table", str(tmp_path / "nope.yaml"))
    assert rc == 2 and "cannot read" in err and out == ""


def test_malformed_table(tmp_path, capsys):
    table = write(tmp_path, "add.out: {kernel: binary/add, dtypes: [float32]\n")
    rc, _, err = run(capsys, "--table", table)
    assert rc == 2 and f"{table}:" in err and "malformed YAML" in err


def test_invalid_table_syntax(tmp_path, capsys):
    table = write(tmp_path, "add.out: {kernel: binary/add, dtypes: [float32], stub: 3}\n")
    rc, doc = run_json(capsys, "--table", table)
    assert rc == 2 and doc["exit_status"] == 2 and f"{table}:1: stub of 'add.out'" in doc["error"]


def test_missing_native_functions(tmp_path, capsys):
    rc, doc = run_json(capsys, "--native-functions", str(tmp_path / "nf.yaml"))
    assert rc == 2 and "cannot read" in doc["error"] and "nf.yaml" in doc["error"]


def test_malformed_native_functions(tmp_path, capsys):
    nf = write(tmp_path, "- func: add.out(Tensor self\n  structured: [\n", "native_functions.yaml")
    rc, _, err = run(capsys, "--native-functions", nf)
    assert rc == 2 and "malformed YAML" in err and f"{nf}:" in err


def test_unreadable_schema_in_native_functions(tmp_path, capsys):
    nf = write(tmp_path, """
        - func: add.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
          structured: True
        - func: mul.out(Tensor self, Tensor other -> Tensor(a!)
    """, "native_functions.yaml")
    rc, _, err = run(capsys, "--native-functions", nf)
    assert rc == 2 and f"{nf}:3: cannot read the schema 'mul.out(" in err


def test_not_a_native_functions_file(tmp_path, capsys):
    nf = write(tmp_path, "add.out: {kernel: binary/add}\n", "native_functions.yaml")
    rc, _, err = run(capsys, "--baseline", nf)
    assert rc == 2 and "not a native_functions.yaml" in err


# --- The comparison itself, on small hand-made versions -------------------------------------------

OLD = """
- func: frob.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  structured: True
  tags: pointwise
  dispatch:
    CPU: frob_out
- func: zap.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU: zap_out
  tags: [pointwise]
- func: old_tag.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU, CUDA: old_tag_out
- func: same.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  tags: pointwise
  dispatch:
    CPU: same_out
"""

NEW = """
- func: frobnicate.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  structured: True
  tags: [pointwise, brand_new_tag]
  dispatch:
    CPU: frob_out
- func: zap.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU: zap_out
  tags: [pointwise]
- func: old_tag.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  tags: pointwise
  dispatch:
    CPU, CUDA: old_tag_out
- func: same.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  tags: pointwise
  dispatch:
    CPU: same_out
- func: shiny.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  tags: pointwise
  ufunc_inner_loop:
    Generic: shiny (AllAndComplex)
"""


def test_rename_dispatch_and_candidates_on_small_versions(tmp_path, capsys):
    old = write(tmp_path, OLD, "old.yaml")
    new = write(tmp_path, NEW, "new.yaml")
    table = write(tmp_path, """
        frob.out: {kernel: binary/add, dtypes: [float32]}
        same.out: {kernel: binary/mul, dtypes: [float32]}
    """)
    rc, doc = run_json(capsys, "--table", table, "--baseline", old, "--native-functions", new)
    assert rc == 1
    e = entries(doc)
    assert e["frob.out"]["status"] == "renamed" and e["frob.out"]["successors"][0] == "frobnicate.out"
    assert e["same.out"]["status"] == "ok"
    cands = {c["func"]: c["reason"] for c in doc["candidates"]}
    assert cands == {"zap.out": "now a structured out= overload with a CPU kernel",
                     "old_tag.out": "newly tagged pointwise",
                     "shiny.out": f"new in {new}"}  # no version in the folder name: the path is the label
    rc, out, _ = run(capsys, "--table", table, "--baseline", old, "--native-functions", new)
    assert f"{table}:1: frob.out: renamed to frobnicate.out (same argument and return types)" in out


def test_diff_schema_kinds():
    old = parse_schema("f.out(Tensor self, int a, int b=1, float c=0.5, bool d=False, *, Tensor(a!) out) -> Tensor(a!)")
    new = parse_schema("f.out(Tensor input, SymInt a, int b=2, *, bool d=False, float c=0.5, int e=0, "
                       "Tensor(a!) out) -> (Tensor(a!), Tensor)")
    got = {(c.kind, c.subject, c.old, c.new) for c in check.diff_schema(old, new)}
    assert got == {
        ("argument renamed", "self", "self", "input"),
        ("type changed", "a", "int", "SymInt"),
        ("default changed", "b", "1", "2"),
        ("keyword-only changed", "d", "False", "True"),
        ("keyword-only changed", "c", "False", "True"),
        ("argument added", "e", None, "int e=0"),
        ("order changed", "arguments", "input, a, b, c, d, out", "input, a, b, d, c, out"),
        ("returns changed", "returns", "Tensor(a!)", "(Tensor(a!), Tensor)"),
    }
    assert check.diff_schema(old, old) == ()
    removed = check.diff_schema(new, parse_schema("f.out(Tensor input, *, Tensor(a!) out) -> (Tensor(a!), Tensor)"))
    assert {c.subject for c in removed if c.kind == "argument removed"} == {"a", "b", "c", "d", "e"}
    assert str(check.Change("argument renamed", "grad", "grad", "grad_output")) == \
        "argument 'grad' renamed to 'grad_output'"
