"""`scons` after a torch upgrade: the build remembers the torch it generated against (build/gen/
pytorch/), prints and writes the upgrade report when the installed torch differs, and skips --
naming it -- an entry that the new torch no longer supports instead of failing.

One torch is installed here, so the "old" torch is a recorded baseline made for the test: the
installed native_functions.yaml plus one operator, `mul_legacy.out`, that the installed torch does
not have (as PyTorch removes ops between releases). Builds run in a copy of the sources."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fake_vitis"))
from scons_repo import TABLE, make_repo, ok, scons  # noqa: E402

from codegen import baseline, generate  # noqa: E402
from codegen.native import INSTALLED_NATIVE, dispatch_stubs, torch_include_dir, torch_version  # noqa: E402

OLD = "2.12.9"  # the made-up baseline's version (its folder name)
LEGACY = """
- func: mul_legacy.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  structured_inherits: TensorIteratorBase
  dispatch:
    CPU: mul_out
  tags: pointwise
"""
# Line 3: the entry only the old torch supports (its CPU impl calls mul_stub, as mul.out's does).
UPGRADE_TABLE = TABLE + "mul_legacy.out: {kernel: binary/mul, dtypes: [float32], stub: mul_stub}\n"
GEN_TARGET = "build/gen/FPGAType.h"  # the codegen step alone: no compiler involved


def record_old_baseline(gen: Path) -> None:
    """build/gen as a build on PyTorch OLD would have left it."""
    folder = gen / baseline.FOLDER / OLD
    folder.mkdir(parents=True)
    native = Path(INSTALLED_NATIVE)
    (folder / "native_functions.yaml").write_text(native.read_text(encoding="utf-8") + LEGACY, encoding="utf-8")
    shutil.copy(native.parent / "tags.yaml", folder / "tags.yaml")
    (folder / baseline.STUBS).write_text(json.dumps(dispatch_stubs(torch_include_dir())))
    (gen / baseline.RECORD).write_text(json.dumps({"generated_with": OLD, "baseline": OLD}))


def record(gen: Path) -> dict:
    return json.loads((gen / baseline.RECORD).read_text())


def registered(gen: Path) -> set[str]:
    text = "".join(p.read_text() for p in gen.glob("FPGAType_*.cpp"))
    return {line.split('"')[1] for line in text.splitlines() if line.strip().startswith("m.impl(")}


def check(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codegen", "check", *args], cwd=repo, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    """A repo whose build/gen was generated against OLD, then `scons` with the installed torch (the
    tests below go on from it in order: the upgrade, then what follows it)."""
    repo = make_repo(tmp_path_factory.mktemp("upgrade"))
    (repo / "native_functions_fpga.yaml").write_text(UPGRADE_TABLE)
    record_old_baseline(repo / "build/gen")
    return repo, scons(repo, "opt=4", GEN_TARGET)


def test_first_build_records_the_installed_torch(tmp_path):
    repo = make_repo(tmp_path)
    out = ok(scons(repo, "opt=4", GEN_TARGET))
    gen = repo / "build/gen"
    assert record(gen) == {"generated_with": torch_version(), "baseline": torch_version()}
    kept = gen / baseline.FOLDER / torch_version()
    assert (kept / "native_functions.yaml").read_bytes() == Path(INSTALLED_NATIVE).read_bytes()
    assert (kept / "tags.yaml").exists() and "add_stub" in json.loads((kept / baseline.STUBS).read_text())
    assert "upgrade report" not in out and not (repo / "build/upgrade-report.md").exists()
    # `check` with no arguments: the recorded baseline is the installed torch, so it only validates.
    c = check(repo)
    assert c.returncode == 0, c.stdout + c.stderr
    assert "the baseline is the installed torch: the build's record" in c.stdout


def test_upgrade_prints_the_report_and_skips_what_the_new_torch_lacks(upgraded):
    repo, p = upgraded
    out = ok(p)
    gen = repo / "build/gen"
    # The report, before regenerating, between the recorded and the installed version.
    assert f"build/gen was generated against PyTorch {OLD}; the installed torch is {torch_version()}" in out
    assert f"baseline: PyTorch {OLD}" in out and f"target:   PyTorch {torch_version()} (installed)" in out
    assert f"Removed or renamed in {torch_version()} (1)" in out
    assert "native_functions_fpga.yaml:3: mul_legacy.out: removed; closest: multiply.out, mul.out" in out
    # The entry is skipped with its file:line, the build goes on without it.
    assert (f"native_functions_fpga.yaml:3: warning: skipped 'mul_legacy.out', which worked with PyTorch {OLD} "
            f"(unknown ATen op 'mul_legacy.out' in PyTorch {torch_version()}") in out
    assert out.index("Result: 1 of 3 entries") < out.index("warning: skipped") < out.index(" files in build/gen")
    assert registered(gen) == {"add.out", "add.Tensor", "add_.Tensor", "mul.out", "mul.Tensor", "mul_.Tensor"}
    assert set(json.loads((gen / "kernels.json").read_text())["ops"]) == {"add.out", "mul.out"}
    # The same in build/upgrade-report.md.
    md = (repo / "build/upgrade-report.md").read_text()
    assert md.startswith(f"# Upgrade report: PyTorch {OLD} -> PyTorch {torch_version()} (installed)\n")
    skipped = md.split("## Skipped entries (1)\n")[1].split("## Report")[0]
    assert (f"- `native_functions_fpga.yaml:3: unknown ATen op 'mul_legacy.out' in PyTorch {torch_version()}; "
            "closest: ") in skipped
    assert "mul_legacy.out: removed; closest: multiply.out, mul.out" in md.split("## Report")[1]
    # Generated with the installed torch; the baseline stays the old one until nothing is skipped.
    assert record(gen) == {"generated_with": torch_version(), "baseline": OLD}


def test_after_the_upgrade(upgraded):
    repo, _ = upgraded
    report = (repo / "build/upgrade-report.md").read_text()
    # Another level: no second report, the entry is still skipped and named.
    out = ok(scons(repo, "opt=2", GEN_TARGET))
    assert "upgrade report" not in out and (repo / "build/upgrade-report.md").read_text() == report
    assert "native_functions_fpga.yaml:3: warning: skipped 'mul_legacy.out'" in out
    # `python -m codegen check` with no arguments compares against the recorded baseline.
    c = check(repo)
    assert c.returncode == 1, c.stdout + c.stderr
    assert f"baseline: PyTorch {OLD}" in c.stdout
    assert "native_functions_fpga.yaml:3: mul_legacy.out: removed; closest: multiply.out, mul.out" in c.stdout
    # A table mistake is not the upgrade's doing: it stops the build as before.
    (repo / "native_functions_fpga.yaml").write_text(UPGRADE_TABLE + "mul_typo.out: {kernel: binary/mul, dtypes: [float32]}\n")
    bad = scons(repo, "opt=4", GEN_TARGET)
    assert bad.returncode != 0
    assert "native_functions_fpga.yaml:4: unknown ATen op 'mul_typo.out'" in bad.stdout + bad.stderr
    # Fixed table: nothing skipped, so the installed torch becomes the baseline and the old copy goes.
    (repo / "native_functions_fpga.yaml").write_text(TABLE)
    out = ok(scons(repo, "opt=4", GEN_TARGET))
    assert "warning: skipped" not in out
    gen = repo / "build/gen"
    assert record(gen) == {"generated_with": torch_version(), "baseline": torch_version()}
    assert sorted(os.listdir(gen / baseline.FOLDER)) == sorted([torch_version(), "record.json"])
    assert check(repo).returncode == 0


def test_generate_skips_in_process(tmp_path, capsys):
    """generate.run itself, as scons runs it: the same skip without a build."""
    table = tmp_path / "table.yaml"
    table.write_text(UPGRADE_TABLE)
    gen = tmp_path / "gen"
    record_old_baseline(gen)
    lines: list[str] = []
    files, _ = generate.run(str(table), str(gen), levels=(4,), say=lines.append)
    text = "\n".join(lines)
    assert f"{table}:3: warning: skipped 'mul_legacy.out'" in text
    assert (tmp_path / "upgrade-report.md").exists()
    assert registered(gen) == {"add.out", "add.Tensor", "add_.Tensor", "mul.out", "mul.Tensor", "mul_.Tensor"}
    # The skipped entry's kernel is still generated (the build's plan holds every entry's kernels).
    assert "hls/binary/v_mul_float32_opt4.cpp" in files
