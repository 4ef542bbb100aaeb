"""How long SCons takes when there is little or nothing to do, on the project's full table: a no-op
`scons opt=4` (the emulated image and the host extension, what a user runs), `scons -n` listing
nothing to do, and a one-template incremental rebuild; and the same for a v++ target through the
fake v++ of tests/fake_vitis (so the figure is the build system's own overhead, not Vitis's).

    python bench/bench_scons.py [--repeat N] [--cases emu,hw] [--json PATH]

Each case runs in a temporary copy of the sources (never the checkout's build/), seeded with a copy
of the checkout's build/ when there is one (SCons records paths relative to the top, so the copy
is up to date where the checkout is), after a first build. `incremental` edits a comment of
kernels/hls/binary/opt4.cpp.j2 (a different one each time), so codegen reruns and exactly that
category's unit recompiles (emu) or its .xo files (v++), and the image relinks. Wall time depends
on the machine's load, so each run also records the CPU seconds SCons and its children used.
Prints a table of medians and writes the runs as JSON (default build/bench/scons.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fake_vitis"))
from scons_repo import make_repo, ok, scons, tool_log  # noqa: E402

TABLE = "native_functions_fpga.yaml"
TEMPLATE = "kernels/hls/binary/opt4.cpp.j2"
EDIT = "// binary kernels, edited {i}\n"  # a line the rendered kernels carry, so they change
CASES = {"emu": ("opt=4",), "hw": ("target=hw", "platform=u250", "opt=4", "xclbin")}
COMPILED = re.compile(r"^(?:g\+\+|v\+\+) .*?-o (\S+\.(?:os|xo))\b", re.M)  # an object or .xo built


def timed(repo: Path, args) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of scons and its children, output) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = ok(scons(repo, *args))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def seeded_repo(tmp: Path) -> Path:
    repo = make_repo(tmp)
    shutil.copy2(ROOT / TABLE, repo / TABLE)  # the full table, not the build tests' small one
    if (ROOT / "build").is_dir():
        shutil.copytree(ROOT / "build", repo / "build", symlinks=True,
                        ignore=shutil.ignore_patterns("bench", "cache"))
        for f in ROOT.glob(".sconsign*"):
            shutil.copy2(f, repo / f.name)
    return repo


def bench(args, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        repo = seeded_repo(Path(tmp))
        full = timed(repo, args)
        noop = [timed(repo, args) for _ in range(repeat)]
        dry = ok(scons(repo, "-n", *args))
        template = repo / TEMPLATE
        original = template.read_text()
        incremental = []
        for i in range(repeat):
            template.write_text(EDIT.format(i=i) + original)
            tool_log(repo)
            incremental.append(timed(repo, args))
        compiled = sorted(set(COMPILED.findall(incremental[-1][2])))
    return {"args": list(args), "full_build_seconds": round(full[0], 3),
            "noop_runs": [round(w, 3) for w, _, _ in noop], "noop_cpu_runs": [round(c, 3) for _, c, _ in noop],
            "noop_median_seconds": round(statistics.median(w for w, _, _ in noop), 3),
            "noop_median_cpu_seconds": round(statistics.median(c for _, c, _ in noop), 3),
            "dry_run_commands": [line for line in dry.splitlines() if "is up to date" not in line],
            "incremental_runs": [round(w, 3) for w, _, _ in incremental],
            "incremental_median_seconds": round(statistics.median(w for w, _, _ in incremental), 3),
            "incremental_median_cpu_seconds": round(statistics.median(c for _, c, _ in incremental), 3),
            "last_incremental_compiled": compiled}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="runs of each case (the median is reported)")
    p.add_argument("--cases", default=",".join(CASES), help=f"which of {', '.join(CASES)}")
    p.add_argument("--json", default=str(ROOT / "build" / "bench" / "scons.json"), metavar="PATH")
    a = p.parse_args(argv)
    results = {name: bench(CASES[name], max(1, a.repeat)) for name in a.cases.split(",") if name}

    width = max(map(len, results)) + 2
    print(f"{'case':<{width}}{'first run':>10}{'no-op':>8}{'(cpu)':>8}{'one template':>14}{'(cpu)':>8}"
          f"   seconds, median of {a.repeat}")
    for name, r in results.items():
        print(f"{name:<{width}}{r['full_build_seconds']:>10.2f}{r['noop_median_seconds']:>8.2f}"
              f"{r['noop_median_cpu_seconds']:>8.2f}{r['incremental_median_seconds']:>14.2f}"
              f"{r['incremental_median_cpu_seconds']:>8.2f}")
        print(f"{'':<{width}}scons -n: {len(r['dry_run_commands'])} command(s); one template recompiled "
              f"{len(r['last_incremental_compiled'])}: {', '.join(os.path.basename(c) for c in r['last_incremental_compiled'][:4])}"
              f"{' ...' if len(r['last_incremental_compiled']) > 4 else ''}")
    doc = {"benchmark": "scons", "python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count(), "load_average": os.getloadavg(), "table": TABLE, "template": TEMPLATE,
           "cases": results}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
