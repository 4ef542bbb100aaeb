"""Helpers of the build tests: a temporary copy of what the build needs, scons run in it with the
fake Vitis tools (this folder) on PATH, and the tools' argument log."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent
PARTS = ("SConstruct", "site_scons", "codegen", "kernels", "host")
# The build tests' own table: small and fixed, so they stay fast and exact as the real table grows.
TABLE = """\
add.out: {kernel: binary/add, dtypes: [float32]}
mul.out: {kernel: binary/mul, dtypes: [float32]}
"""


def make_repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir()
    for part in PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, repo / part)
    (repo / "native_functions_fpga.yaml").write_text(TABLE)
    return repo


def add_category(repo: Path, name: str, op: str, expr: str, func: str) -> None:
    """A second kernel category (a copy of binary's templates) with one op, and its table entry."""
    shutil.copytree(repo / "kernels/hls/binary", repo / "kernels/hls" / name)
    (repo / "kernels/hls" / name / "ops.yaml").write_text(
        f"inputs: [in1, in2]\noutputs: [out]\nops:\n  {op}:\n    expr: '{expr}'\n    dtypes: [float32]\n")
    with open(repo / "native_functions_fpga.yaml", "a") as f:
        f.write(f"\n{func}:\n  kernel: {name}/{op}\n  dtypes: [float32]\n")


def scons(repo: Path, *args: str, vitis: bool = True, **env: str) -> subprocess.CompletedProcess:
    """`python -m SCons -Q args` in `repo`; the fake v++ and emconfigutil are on PATH if `vitis`."""
    path = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "v++").exists()]
    e = dict(os.environ, PATH=os.pathsep.join(([str(FAKE)] if vitis else []) + path),
             FAKE_VITIS_LOG=str(repo / "vitis.log"), **env)
    e.pop("EDGE_COMMON_SW", None)
    return subprocess.run([sys.executable, "-m", "SCons", "-Q", *args], cwd=repo, env=e,
                          capture_output=True, text=True, timeout=600)


def ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def tool_log(repo: Path, clear: bool = True) -> list[list[str]]:
    """Every fake tool run since the last call: argv lists."""
    log = repo / "vitis.log"
    runs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    if clear and log.exists():
        log.unlink()
    return runs


def steps_run(output: str) -> list[str]:
    """The progress lines of counted steps that started ("[n/total] label (...)")."""
    return [line for line in output.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
