"""Pointwise kernels on the emulated device against torch on the CPU, per XCL_OPT level.

    PYTHONPATH=$PWD python3 bench/bench_pointwise.py [--n 16777216] [--levels 1,2,3,4] [--repeat 5]
                                                     [--ops exp,sigmoid] [--json PATH]

float32 inputs of n elements resident on the device; each figure is the best of three turns of
`repeat` calls, each turn after a warm-up call, output allocation included on both sides (the best,
not the median: the machine is shared, and the least disturbed call is the one that measures the
code). An op's CPU and device turns alternate, so both see the same states of the machine
(bench/common.py best_in_turns); the CPU's figure is its best over every level's turns. Two
ratios: fpga / CPU per level (target at opt=4, 2^24: <= 1.0 for the transcendental ops) and each level / opt=4
(target at 2^22: levels 1-3 within 4x). Needs the images of `scons opt=N` for the levels asked.
Plots the fpga / CPU ratios to docs/img/pointwise.png.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, best_in_turns, machine, plot_level_ratios, print_table, pyplot, write_json  # noqa: E402

import aten_fpga  # noqa: E402

OPS = {
    "add": lambda x, y: x + y,
    # a per-channel weight over NCHW (batch_norm's affine step): 64 channels of 64 x 64
    "mul_channel": lambda x, y: x.view(-1, 64, 64, 64) * y[:64].view(1, 64, 1, 1),
    "mul": lambda x, y: x * y,
    "eq": lambda x, y: x == y,
    "where": lambda x, y: torch.where(x > 0, x, y),  # two kernels: gt, then where
    "exp": lambda x, y: torch.exp(x),
    "sigmoid": lambda x, y: torch.sigmoid(x),
    "tanh": lambda x, y: torch.tanh(x),
    "gelu": lambda x, y: F.gelu(x),
    "gelu_tanh": lambda x, y: F.gelu(x, approximate="tanh"),
    "log": lambda x, y: torch.log(y),  # y is positive
    "sin": lambda x, y: torch.sin(x),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--levels", default="4")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "pointwise.json"))
    args = p.parse_args(argv)
    levels = [int(level) for level in args.levels.split(",")]
    ops = {name: OPS[name] for name in args.ops.split(",")}
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(args.n, generator=gen), torch.rand(args.n, generator=gen) + 0.5
    load = os.getloadavg()[0]
    cpu, fpga = {}, {}
    for level in levels:
        aten_fpga.load(level)
        fx, fy = x.to("fpga"), y.to("fpga")
        for name, fn in ops.items():
            (c, _), (f, _) = best_in_turns([lambda: fn(x, y), lambda: fn(fx, fy)], args.repeat)
            cpu[name], fpga[name, level] = min(c, cpu.get(name, c)), f
    headers = ["op", "CPU ms"] + [f"opt{level} ms" for level in levels] + [f"opt{level}/CPU" for level in levels]
    if 4 in levels and len(levels) > 1:
        headers += [f"opt{level}/opt4" for level in levels if level != 4]
    rows, records = [], []
    for name in ops:
        row = [name, cpu[name] * 1e3] + [fpga[name, level] * 1e3 for level in levels]
        row += [fpga[name, level] / cpu[name] for level in levels]
        if 4 in levels and len(levels) > 1:
            row += [fpga[name, level] / fpga[name, 4] for level in levels if level != 4]
        rows.append(row)
        for level in levels:
            records.append({"op": name, "level": level, "n": args.n, "cpu_s": cpu[name], "fpga_s": fpga[name, level],
                            "ratio": fpga[name, level] / cpu[name]})
    print(f"float32, n = {args.n}, best of 3 turns of {args.repeat}; load average {load:.1f} on "
          f"{os.cpu_count()} cores; torch threads {torch.get_num_threads()}")
    print_table(headers, rows)
    write_json(args.json, {"benchmark": "pointwise", "machine": machine(), "load_average": load,
                           "repeat": args.repeat, "rows": records})
    plt = pyplot()
    if plt is not None:
        plot_level_ratios(plt, list(ops), levels, cpu, fpga, f"pointwise ops on {args.n} float32, torch "
                          f"{torch.get_num_threads()} threads, load average {load:.1f}", 1.0,
                          "target 1.0x (transcendentals, opt=4)", "pointwise.png")
    aten_fpga.load(4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
