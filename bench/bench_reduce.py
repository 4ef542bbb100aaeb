"""Reductions on the emulated device against torch on the CPU, per XCL_OPT level.

    PYTHONPATH=$PWD python3 bench/bench_reduce.py [--size 4096] [--levels 1,2,3,4] [--repeat 5]
                                                  [--ops sum,var] [--cold] [--json PATH]

One size x size float32 tensor (default 4096: 2^24 elements) resident on the device; each op over
the whole tensor, along dim 1 (rows) and along dim 0 (columns). Each figure is the best of three
turns of `repeat` calls, each turn after a warm-up call, including the result's copy to the host
(the best, not the median: the machine is shared). Both sides are timed warm, each call right
after another of the same op on the same tensor, as a user's repeated op runs (on this machine
part of a 64 MiB tensor then stays in the 32 MiB L3). A case's CPU and device turns alternate
(bench/common.py best_in_turns), so that both see the same states of the machine: its memory
bandwidth moves by up to 2x within minutes, and timed all CPU cases first the ratio moved by 30%
between runs. `--cold` times single calls in turns, each right after the other side's, so both
read from DRAM (the streaming folds then take 1.0-1.5x the CPU's time, docs/benchmarks.md). Beside
each wall clock is the CPU time the process spent in the call (time.process_time: torch's over its
threads, the emulator's over its CU threads), which a loaded machine moves far less than the wall
clock. torch runs with its default threads. Target at opt=4: <= 1.25x the CPU. The emulator runs
the HLS C++ as written, so the figures measure the emulation, not a card. Plot: docs/img/reduce.png
(docs/img/reduce_cold.png with --cold; fpga / CPU per case and level, the target as a line).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, best_in_turns, machine, plot_level_ratios, print_table, pyplot, write_json  # noqa: E402

import aten_fpga  # noqa: E402

OPS = {
    "sum": lambda a, *dim: a.sum(*dim),
    "mean": lambda a, *dim: a.mean(*dim),
    "amax": lambda a, *dim: a.amax(*dim),
    "argmax": lambda a, *dim: a.argmax(*dim),
    "var": lambda a, *dim: a.var(*dim),
    "norm": lambda a, *dim: torch.linalg.vector_norm(a, dim=dim or None),
}
DIMS = {"all": (), "dim1": (1,), "dim0": (0,)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--levels", default="4")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cold", action="store_true",
                    help="time each call right after the other side's (from DRAM), not after one of its own")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--json", help="default build/bench/reduce.json (reduce_cold.json with --cold)")
    args = ap.parse_args(argv)
    stem = "reduce_cold" if args.cold else "reduce"  # the JSON's and the plot's name
    args.json = args.json or os.path.join(ROOT, "build", "bench", f"{stem}.json")
    levels = [int(level) for level in args.levels.split(",")]
    cases = {f"{op}.{d}": (OPS[op], dim) for op in args.ops.split(",") for d, dim in DIMS.items()}
    x = torch.randn(args.size, args.size, generator=torch.Generator().manual_seed(0))
    load = os.getloadavg()[0]
    # (calls per turn, turns, warm-up): warm, three turns of `repeat` calls; cold, one call per turn.
    turns = (1, 3 * args.repeat, False) if args.cold else (args.repeat, 3, True)
    cpu, cpu_time = {}, {}  # each case's best over every level's turns
    fpga, fpga_time = {}, {}
    for level in levels:
        aten_fpga.load(level)
        on_device = x.to("fpga")
        for name, (fn, dim) in cases.items():
            (c, ct), (f, ft) = best_in_turns([lambda: fn(x, *dim).cpu(), lambda: fn(on_device, *dim).cpu()],
                                              *turns)
            cpu[name], cpu_time[name] = min(c, cpu.get(name, c)), min(ct, cpu_time.get(name, ct))
            fpga[name, level], fpga_time[name, level] = f, ft
    timing = f"best of {3 * args.repeat} single calls, cold" if args.cold else f"best of 3 turns of {args.repeat}"
    print(f"{args.size} x {args.size} float32, {timing}; load average {load:.1f} on {os.cpu_count()} "
          f"cores; torch threads {torch.get_num_threads()}")
    rows, records = [], []
    for name in cases:
        rows.append([name, cpu[name] * 1e3] + [fpga[name, level] * 1e3 for level in levels]
                    + [fpga[name, level] / cpu[name] for level in levels]
                    + [fpga_time[name, level] / cpu_time[name] for level in levels])
        for level in levels:
            records.append({"case": name, "level": level, "cpu_s": cpu[name], "fpga_s": fpga[name, level],
                            "ratio": fpga[name, level] / cpu[name], "cpu_time_s": cpu_time[name],
                            "fpga_time_s": fpga_time[name, level],
                            "time_ratio": fpga_time[name, level] / cpu_time[name]})
    print_table(["case", "CPU ms"] + [f"opt{level} ms" for level in levels] + [f"opt{level}/CPU" for level in levels]
                + [f"opt{level}/CPU (CPU time)" for level in levels], rows)
    write_json(args.json, {"benchmark": "reduce", "machine": machine(), "load_average": load, "cold": args.cold,
                           "size": args.size, "repeat": args.repeat, "rows": records})
    plt = pyplot()
    if plt is not None:
        plot_level_ratios(plt, list(cases), levels, cpu, fpga, f"reductions of {args.size} x {args.size} float32"
                          f"{', cold' if args.cold else ''}, load average {load:.1f}", 1.25, "target 1.25x",
                          f"{stem}.png", log=True)
    aten_fpga.load(4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
