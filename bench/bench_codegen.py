"""How long the codegen takes: parsing PyTorch's native_functions.yaml and generating the full FPGA
table (FPGAType*.cpp and every HLS kernel source at every level) into a temporary folder.

    python bench/bench_codegen.py [--repeat N] [--json PATH]

Prints one row per phase, measured in this process in pipeline order (so each phase is cold: the
torchgen parse is cached after its first use), then the end-to-end time of fresh
`python -m codegen generate` processes: the command a default `scons` runs (one level, XCL_OPT 4:
the figure a build waits for, held to the target of under 3 s with a warm cache) and, for
reference, all four levels at once (what no build runs). Writes the same numbers as JSON (default
build/bench/codegen.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_SECONDS = 3.0


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def phases(table: str) -> tuple[list[tuple[str, float]], dict]:
    """In-process timings, each phase cold, in the order `generate` runs them."""
    rows: list[tuple[str, float]] = []

    t, _ = _timed(lambda: __import__("codegen.generate"))
    rows.append(("import codegen (+ torchgen, jinja2)", t))
    from codegen import check, generate
    from codegen.native import INSTALLED_NATIVE, dispatch_stubs, load_native, load_ops, torch_include_dir

    t, native = _timed(load_native)
    rows.append(("parse native_functions.yaml (torchgen)", t))
    t, _ = _timed(lambda: dispatch_stubs(torch_include_dir()))
    rows.append(("scan ATen headers for DispatchStubs", t))
    with tempfile.TemporaryDirectory() as out:
        t, (files, changed) = _timed(lambda: generate.run(table, out))
        rows.append((f"generate: resolve + write {len(files)} files", t))
        t, (_, unchanged) = _timed(lambda: generate.run(table, out))
        rows.append((f"generate again ({len(unchanged)} files changed)", t))
    t, _ = _timed(lambda: load_ops(INSTALLED_NATIVE))
    rows.append(("check: read native_functions.yaml (any version)", t))
    t, report = _timed(lambda: check.check(table))
    rows.append(("check: compare and validate (tables loaded)", t))
    info = {"native_functions": native.path, "operators": len(native.functions),
            "entries": len(report.entries), "files": len(files)}
    return rows, info


BUILD_LEVELS = "4"  # site_scons/afpga/gen.py: a build generates the level it builds, opt=4 by default


def end_to_end(table: str, repeat: int) -> dict[str, tuple[str, list[tuple[float, float]]]]:
    """(wall, CPU) seconds of fresh `python -m codegen generate` processes into empty folders, by
    kind: "cold" with an empty cache (codegen/cache.py) each run, "warm" with one a first run filled
    (what a build waits for: the torchgen parse, the compiled templates and the interfaces of
    unchanged sources come from build/codegen-cache), each for the build's level and for all four.
    CPU time (user + system) does not depend on what else the machine runs; creating files does
    (on this project's VMs about 1 ms a file, which is most of the all-levels figure)."""
    runs: dict[str, tuple[str, list[tuple[float, float]]]] = {}
    for label, levels in (("the build's level", ["--levels", BUILD_LEVELS]), ("all four levels", [])):
        command = [sys.executable, "-m", "codegen", "generate", "--table", table, "--out", "<tmp>", *levels]

        def once(cache_dir: str) -> tuple[float, float]:
            with tempfile.TemporaryDirectory() as out:
                argv = [out if a == "<tmp>" else a for a in command]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                               env={**os.environ, "AFPGA_CODEGEN_CACHE": cache_dir})
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

        shown = " ".join(["python", "-m", "codegen", "generate", *levels])
        cold = []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as empty:
                cold.append(once(empty))
        with tempfile.TemporaryDirectory() as warm:
            once(warm)  # fills it
            runs[f"warm cache, {label}"] = (shown, [once(warm) for _ in range(repeat)])
        runs[f"cold cache, {label}"] = (shown, cold)
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", default=os.path.join(ROOT, "native_functions_fpga.yaml"))
    p.add_argument("--repeat", type=int, default=3, help="end-to-end runs of each kind (median and min reported)")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "codegen.json"), metavar="PATH")
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)

    os.environ["AFPGA_CODEGEN_CACHE"] = tempfile.mkdtemp()  # the phases run cold
    rows, info = phases(args.table)
    shutil.rmtree(os.environ.pop("AFPGA_CODEGEN_CACHE"))
    runs = end_to_end(args.table, max(1, args.repeat))
    walls = {kind: [w for w, _ in r] for kind, (_, r) in runs.items()}
    cpus = {kind: [c for _, c in r] for kind, (_, r) in runs.items()}
    held = "warm cache, the build's level"
    median = statistics.median(walls[held])

    width = max(len(name) for name in [*runs, *(name for name, _ in rows)]) + 2
    print(f"codegen benchmark: {info['entries']} table entries, {info['operators']} ATen overloads, "
          f"{info['files']} generated files (all four levels)")
    print(f"{'phase (in process, all four levels)':<{width}}{'seconds':>9}")
    for name, seconds in rows:
        print(f"{name:<{width}}{seconds:>9.3f}")
    print(f"{'end to end (a fresh process)':<{width}}{'median':>9}{'min':>9}{'CPU med':>9}  "
          f"(of {len(walls[held])}; CPU: user + system)")
    for kind, (command, _) in runs.items():
        print(f"{kind:<{width}}{statistics.median(walls[kind]):>9.3f}{min(walls[kind]):>9.3f}"
              f"{statistics.median(cpus[kind]):>9.3f}  {command}")
    ok = median < TARGET_SECONDS
    print(f"target: under {TARGET_SECONDS:.0f} s for a build's codegen ({held}, median) -> "
          f"{'met' if ok else 'MISSED'}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    from codegen.native import torch_version

    doc = {
        "benchmark": "codegen",
        "torch": torch_version(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        **info,
        "phases": [{"name": name, "seconds": round(seconds, 4)} for name, seconds in rows],
        "end_to_end": {kind: {"command": command, "wall_seconds": [round(w, 4) for w in walls[kind]],
                              "cpu_seconds": [round(c, 4) for c in cpus[kind]],
                              "median_seconds": round(statistics.median(walls[kind]), 4)}
                       for kind, (command, _) in runs.items()},
        "held_to_target": held,
        "load_average": round(os.getloadavg()[0], 2),
        "target_seconds": TARGET_SECONDS,
        "within_target": ok,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
