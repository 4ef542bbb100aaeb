"""How long SCons takes when there is little or nothing to do: a no-op `scons` and a one-template
incremental rebuild, for the emulated image (g++) and for a v++ target (through the fake v++ of
tests/fake_vitis, so the figure is the build system's own overhead, not Vitis's).

    python bench/bench_scons.py [--repeat N] [--json PATH]

Each case runs in a temporary copy of the sources (never the checkout's build/), after a first
full build. `incremental` edits a comment of kernels/hls/binary/opt4.cpp.j2 (a different one each
time), so codegen reruns and exactly that template's kernels recompile and the image relinks.
Prints a table of medians and writes the runs as JSON (default build/bench/scons.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fake_vitis"))
from scons_repo import make_repo, ok, scons, tool_log  # noqa: E402

TEMPLATE = "kernels/hls/binary/opt4.cpp.j2"
EDIT = "// binary kernels, edited {i}\n"  # a line the rendered kernels carry, so they change
CASES = {"emu": ("opt=4", "xclbin"), "hw (fake v++)": ("target=hw", "platform=u250", "opt=4", "xclbin")}


def timed(repo: Path, args) -> float:
    start = time.perf_counter()
    ok(scons(repo, *args))
    return time.perf_counter() - start


def bench(args, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        full = timed(repo, args)
        noop = [timed(repo, args) for _ in range(repeat)]
        template = repo / TEMPLATE
        original = template.read_text()
        incremental = []
        for i in range(repeat):
            template.write_text(EDIT.format(i=i) + original)
            tool_log(repo)
            incremental.append(timed(repo, args))
        tools = [" ".join(r[:2]) for r in tool_log(repo)]
    return {"args": list(args), "full_build_seconds": round(full, 3), "noop_runs": [round(x, 3) for x in noop],
            "incremental_runs": [round(x, 3) for x in incremental],
            "noop_median_seconds": round(statistics.median(noop), 3),
            "incremental_median_seconds": round(statistics.median(incremental), 3),
            "last_incremental_tool_runs": tools}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="runs of each case (the median is reported)")
    p.add_argument("--json", default=str(ROOT / "build" / "bench" / "scons.json"), metavar="PATH")
    a = p.parse_args(argv)
    results = {name: bench(args, max(1, a.repeat)) for name, args in CASES.items()}

    width = max(map(len, results)) + 2
    print(f"{'case':<{width}}{'full build':>12}{'no-op':>10}{'one template':>14}   (seconds, median of {a.repeat})")
    for name, r in results.items():
        print(f"{name:<{width}}{r['full_build_seconds']:>12.2f}{r['noop_median_seconds']:>10.2f}"
              f"{r['incremental_median_seconds']:>14.2f}")
    doc = {"benchmark": "scons", "python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count(), "template": TEMPLATE, "cases": results}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
