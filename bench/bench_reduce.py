"""Reductions on the emulated device against torch on the CPU, per XCL_OPT level.

    PYTHONPATH=$PWD python3 bench/bench_reduce.py [--size 4096] [--levels 1,2,3,4] [--repeat 5]
                                                  [--ops sum,var] [--json PATH]

One size x size float32 tensor (default 4096: 2^24 elements) resident on the device; each op over
the whole tensor, along dim 1 (rows) and along dim 0 (columns). Each figure is the best of `repeat`
calls after a warm-up, including the result's copy to the host (the best, not the median: the
machine is shared), beside the CPU time the process spent in the call (time.process_time: torch's
over its threads, the emulator's over its CU threads), which a loaded machine moves far less than
the wall clock. torch runs with its default threads. Target at opt=4: <= 1.25x the CPU. The
emulator runs the HLS C++ as written, so the figures measure the emulation, not a card. Plot:
docs/img/reduce.png (fpga / CPU per case and level, the target as a line).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, plot_level_ratios, print_table, pyplot, write_json  # noqa: E402

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


def best(fn, repeat: int) -> tuple[float, float]:
    """The least wall-clock and the least process CPU time of `repeat` calls, in seconds."""
    fn().cpu()
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn().cpu()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--levels", default="4")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "reduce.json"))
    args = ap.parse_args(argv)
    levels = [int(level) for level in args.levels.split(",")]
    cases = {f"{op}.{d}": (OPS[op], dim) for op in args.ops.split(",") for d, dim in DIMS.items()}
    x = torch.randn(args.size, args.size, generator=torch.Generator().manual_seed(0))
    load = os.getloadavg()[0]
    cpu, cpu_time = {}, {}
    for name, (fn, dim) in cases.items():
        cpu[name], cpu_time[name] = best(lambda: fn(x, *dim), args.repeat)
    fpga, fpga_time = {}, {}
    for level in levels:
        aten_fpga.load(level)
        on_device = x.to("fpga")
        for name, (fn, dim) in cases.items():
            fpga[name, level], fpga_time[name, level] = best(lambda: fn(on_device, *dim), args.repeat)
    print(f"{args.size} x {args.size} float32, best of {args.repeat}; load average {load:.1f} on {os.cpu_count()} "
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
    write_json(args.json, {"benchmark": "reduce", "machine": machine(), "load_average": load, "size": args.size,
                           "repeat": args.repeat, "rows": records})
    plt = pyplot()
    if plt is not None:
        plot_level_ratios(plt, list(cases), levels, cpu, fpga, f"reductions of {args.size} x {args.size} float32, "
                          f"load average {load:.1f}", 1.25, "target 1.25x", "reduce.png", log=True)
    aten_fpga.load(4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
