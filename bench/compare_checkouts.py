"""Two checkouts' benchmarks in one run: is the emulator slower in NEW than in OLD?

    PYTHONPATH=$PWD python3 bench/compare_checkouts.py OLD NEW [--repeat 3] [--threshold 0.10]
        [--bench "bench_reduce --size 2048"] ... [--json build/bench/compare.json]

OLD and NEW are checkout folders, each with its own built image and host extension (`scons` in
each). Every benchmark (by default the four of the emulator's speed budget, DEFAULT_BENCHES) runs
as a subprocess per checkout: that checkout's own `bench/<name>.py`, with cwd and PYTHONPATH the
checkout, so each imports its own aten_fpga and loads its own build. The runs alternate between
the checkouts for `--repeat` rounds, so that the load of a shared machine falls on both alike: each
benchmark old then new in even rounds, new then old in odd ones (neither always runs first).

Each run's JSON (the benchmark's `--json`, written under this checkout's build/bench/compare/)
gives rows with the ratio the benchmark computes against torch on the CPU in the same process
(`ratio`, and `time_ratio` where it has one: process CPU time). For each row and ratio the table
shows the median over rounds for old and for new, and new / old: above 1 the new checkout lost
ground against the same CPU. A row is flagged when new / old exceeds 1 + threshold.

The runs write no plot (docs/img/ of either checkout stays as it is): `common.pyplot` is replaced
by one that returns None, the benchmarks' own "no matplotlib" path. They see the environment
without ATEN_FPGA_* variables (each checkout's own defaults: its build, its opt=4 image, no
sanitizer) and with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (the installed package may be a third
checkout). The 1-minute load average is recorded before and after every run.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, print_table, write_json  # noqa: E402

# The issue's budget: within 10% on these, against the checkout before (docs/benchmarks.md). At
# their own default sizes (2^24 elements; mm 64 to 2048) and the opt=4 image, a round of the four
# on both checkouts took 3 minutes on the 2-core machine at a load average of 5 (docs/benchmarks.md).
DEFAULT_BENCHES = [
    "bench_pointwise",
    "bench_reduce",
    "bench_overhead",
    "bench_ops --ops mm --levels 4",
]
# What a row measures, by name here -> its field in each benchmark's rows. `ratio` (fpga / CPU wall
# time in the same process) is what the budget judges; `time_ratio` (process CPU time, bench_reduce)
# moves less with the machine's load; `fpga_time` (the device side alone, in the benchmark's unit)
# tells whether a change of the ratio is the emulator's or torch's.
METRICS = {"ratio": ("ratio",), "time_ratio": ("time_ratio",), "fpga_time": ("fpga_s", "fpga_us", "fpga_ms", "ms")}
# The fields that name a row within a benchmark's section (the rest are its measurements).
ID_FIELDS = ("op", "case", "copy", "category", "n", "size", "level")

# Runs one benchmark script inside a checkout (cwd): its own aten_fpga, and no plot.
SHIM = """
import os, runpy, sys
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import common
common.pyplot = lambda: None  # the benchmarks' path without matplotlib: no docs/img/*.png written
import aten_fpga
here = os.path.realpath(os.getcwd()) + os.sep
if not os.path.realpath(aten_fpga.__file__).startswith(here):
    sys.exit(f"aten_fpga came from {aten_fpga.__file__}, not from the checkout {here}")
print(f"compare_checkouts: aten_fpga {aten_fpga.__file__}, image {aten_fpga.image()}", flush=True)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def rows(doc: dict) -> dict[tuple, dict[str, float]]:
    """A benchmark JSON's rows that carry a ratio: {key: {metric: value}} (METRICS' names). A key
    is the section (the top-level field holding the row) then the row's (field, value) pairs of
    ID_FIELDS; a section that is one dict with a ratio (bench_overhead's mlp_step) is one row."""
    out: dict[tuple, dict[str, float]] = {}
    for section, value in doc.items():
        items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
        for r in items:
            if not isinstance(r, dict) or not isinstance(r.get("ratio"), (int, float)):
                continue
            metrics = {}
            for metric, fields in METRICS.items():
                found = [r[f] for f in fields if isinstance(r.get(f), (int, float))]
                if found:
                    metrics[metric] = float(found[0])
            key = (section,) + tuple((f, r[f]) for f in ID_FIELDS if f in r)
            if key in out:
                raise ValueError(f"two rows of {doc.get('benchmark', '?')} have the key {key}: "
                                 "add the field that tells them apart to ID_FIELDS")
            out[key] = metrics
    return out


def label(key: tuple) -> str:
    """`op=add n=4194304 level=4`, with the section first unless it is the usual `rows`."""
    section, fields = key[0], key[1:]
    parts = ([] if section == "rows" else [section]) + [f"{f}={v}" for f, v in fields]
    return " ".join(parts)


def change(old_rounds: list[dict], new_rounds: list[dict], key: tuple, metric: str) -> dict | None:
    """One metric of one row over the rounds: the medians of old and new, new / old of the medians,
    and the range of the rounds' own new / old (round i's two runs of the benchmark ran one right
    after the other)."""
    olds = [r[key][metric] for r in old_rounds if metric in r.get(key, {})]
    news = [r[key][metric] for r in new_rounds if metric in r.get(key, {})]
    if not olds and not news:
        return None
    old = statistics.median(olds) if olds else None
    new = statistics.median(news) if news else None
    paired = [n[key][metric] / o[key][metric] for o, n in zip(old_rounds, new_rounds)
              if metric in o.get(key, {}) and metric in n.get(key, {}) and o[key][metric]]
    return {"old": old, "new": new, "new_over_old": new / old if old and new is not None else None,
            "round_min": min(paired) if paired else None, "round_max": max(paired) if paired else None}


def compare(bench: str, old_docs: list[dict], new_docs: list[dict], threshold: float) -> list[dict]:
    """Pairs the rows of the old and new rounds of one benchmark: per row, `change` of each metric,
    and whether the ratio's new / old exceeds 1 + threshold. A row only one side has is kept, its
    other side None."""
    old_rounds, new_rounds = [rows(d) for d in old_docs], [rows(d) for d in new_docs]
    out = []
    for key in dict.fromkeys(k for r in old_rounds + new_rounds for k in r):
        metrics = {m: change(old_rounds, new_rounds, key, m) for m in METRICS}
        ratio = metrics["ratio"]["new_over_old"]
        out.append({"bench": bench, "row": label(key), **metrics,
                    "regressed": ratio is not None and ratio > 1 + threshold})
    return out


def bench_name(spec: str) -> str:
    return shlex.split(spec)[0]


def run_one(checkout: str, spec: str, json_path: str, log_path: str) -> dict:
    """One benchmark run in `checkout`; returns its JSON, with the load and wall time of the run."""
    name, *args = shlex.split(spec)
    script = os.path.join("bench", name + ".py")
    if not os.path.exists(os.path.join(checkout, script)):
        raise SystemExit(f"{checkout} has no {script}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATEN_FPGA_")}
    env.update(PYTHONPATH=checkout, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    load_before, start = os.getloadavg()[0], time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run([sys.executable, "-c", SHIM, script, *args, "--json", json_path], cwd=checkout, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode:
        with open(log_path, encoding="utf-8") as log:
            tail = log.read()[-3000:]
        raise SystemExit(f"{name} failed in {checkout} (exit {proc.returncode}); its output ({log_path}) ends:\n{tail}")
    with open(json_path, encoding="utf-8") as f:
        doc = json.load(f)
    doc["_run"] = {"load_before": load_before, "load_after": os.getloadavg()[0], "seconds": time.time() - start}
    return doc


def git_state(checkout: str) -> dict:
    def git(*args):
        r = subprocess.run(["git", "-C", checkout, *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    return {"path": os.path.abspath(checkout), "commit": git("rev-parse", "HEAD"),
            "subject": git("log", "-1", "--format=%s"), "dirty": bool(git("status", "--porcelain", "--", ".")),
            "extension_built": os.path.exists(os.path.join(checkout, "build", "host")),
            "image_built": os.path.exists(os.path.join(checkout, "build", "emu", "opt4", "torch.xclbin"))}


def fmt(x, spec=".3f") -> str:
    return "-" if x is None else format(x, spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", help="the baseline checkout (built)")
    p.add_argument("new", help="the checkout to judge (built)")
    p.add_argument("--bench", action="append", default=[], metavar='"NAME ARGS"',
                   help="a benchmark of bench/ and its arguments, quoted (repeatable; default: "
                        + "; ".join(DEFAULT_BENCHES) + ")")
    p.add_argument("--repeat", type=int, default=3, help="rounds of old, new per benchmark (default 3)")
    p.add_argument("--threshold", type=float, default=0.10, help="flag new / old above 1 + this (default 0.10)")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "compare.json"))
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    checkouts = {"old": os.path.abspath(args.old), "new": os.path.abspath(args.new)}
    states = {side: git_state(path) for side, path in checkouts.items()}
    for side, s in states.items():
        if not (s["extension_built"] and s["image_built"]):
            p.error(f"{side} checkout {s['path']} has no built host extension or opt=4 image: run `python3 -m SCons -Q` there")
    benches = args.bench or DEFAULT_BENCHES
    out_dir = os.path.join(os.path.dirname(os.path.abspath(args.json)), "compare")
    os.makedirs(out_dir, exist_ok=True)
    docs: list[dict[str, list[dict]]] = [{"old": [], "new": []} for _ in benches]
    loads = []
    t0 = time.time()
    for rnd in range(args.repeat):
        for i, spec in enumerate(benches):
            for side in ("old", "new") if rnd % 2 == 0 else ("new", "old"):
                stem = f"{i}-{bench_name(spec)}-{side}-{rnd}"
                doc = run_one(checkouts[side], spec, os.path.join(out_dir, stem + ".json"),
                              os.path.join(out_dir, stem + ".log"))
                docs[i][side].append(doc)
                run = doc["_run"]
                loads += [run["load_before"], run["load_after"]]
                print(f"round {rnd + 1}/{args.repeat} {side:3} {spec}: {run['seconds']:.0f} s, "
                      f"load {run['load_before']:.1f} -> {run['load_after']:.1f}", flush=True)
    results = [r for spec, d in zip(benches, docs) for r in compare(spec, d["old"], d["new"], args.threshold)]
    print(f"\nold: {states['old']['path']} {(states['old']['commit'] or '?')[:7]}  "
          f"new: {states['new']['path']} {(states['new']['commit'] or '?')[:7]}"
          f"{' (uncommitted changes)' if states['new']['dirty'] else ''}")
    print(f"{args.repeat} rounds, old and new alternating; {(time.time() - t0) / 60:.1f} min; 1-minute load average "
          f"{min(loads):.1f}-{max(loads):.1f} (mean {statistics.mean(loads):.1f}) on {os.cpu_count()} cores")
    for spec in benches:
        print(f"\n{spec}\n(fpga / CPU in the same run, median of rounds; rounds: each round's new/old; "
              "fpga time: the device side alone, new/old)")
        print_table(["row", "old", "new", "new/old", "rounds", "CPU-time new/old", "fpga time new/old", ""],
                    [[r["row"], fmt(r["ratio"]["old"]), fmt(r["ratio"]["new"]), fmt(r["ratio"]["new_over_old"]),
                      f"{fmt(r['ratio']['round_min'], '.2f')}-{fmt(r['ratio']['round_max'], '.2f')}",
                      fmt((r["time_ratio"] or {}).get("new_over_old")),
                      fmt((r["fpga_time"] or {}).get("new_over_old")),
                      "REGRESSED" if r["regressed"] else ("" if r["ratio"]["new_over_old"] is not None
                                                          else "one side only")]
                     for r in results if r["bench"] == spec])
    flagged = [r for r in results if r["regressed"]]
    compared = sum(r["ratio"]["new_over_old"] is not None for r in results)
    print(f"\n{len(flagged)} of {compared} compared rows have an fpga / CPU ratio more than {args.threshold:.0%} "
          f"higher in new" + (":" if flagged else "."))
    for r in flagged:
        print(f"  {bench_name(r['bench'])}: {r['row']} x{r['ratio']['new_over_old']:.2f} "
              f"(fpga time x{fmt((r['fpga_time'] or {}).get('new_over_old'), '.2f')})")
    write_json(args.json, {"benchmark": "compare_checkouts", "old": states["old"], "new": states["new"],
                           "benches": benches, "repeat": args.repeat, "threshold": args.threshold,
                           "load_average": {"min": min(loads), "max": max(loads), "mean": statistics.mean(loads)},
                           "runs": [{"bench": spec, **{side: [d["_run"] for d in ds] for side, ds in sides.items()}}
                                    for spec, sides in zip(benches, docs)],
                           "rows": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
