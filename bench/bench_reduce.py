"""How long reductions take on the emulated device, at each XCL_OPT level, against torch on the CPU.

    PYTHONPATH=$PWD python bench/bench_reduce.py [--size N] [--repeat R]

Needs every level's image (`scons opt=N` for N in 1..4). One N x N float32 tensor (default 4096);
each figure is the best of R runs after a warm-up, including the result's copy to the host. The
emulator runs the HLS C++ as written, so the figures measure the emulation, not a card.
"""
from __future__ import annotations

import argparse
import time

import torch

import aten_fpga

CASES = {
    "x.sum()": lambda a: a.sum(),
    "x.sum(1)": lambda a: a.sum(1),
    "x.sum(0)": lambda a: a.sum(0),
    "x.amax(1)": lambda a: a.amax(1),
    "x.argmax(1)": lambda a: a.argmax(1),
    "x.var(1)": lambda a: a.var(1),
    "vector_norm(x)": lambda a: torch.linalg.vector_norm(a),
}


def best(fn, x, repeat: int) -> float:
    fn(x).cpu()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(x).cpu()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(args.size, args.size)
    rows = {name: [best(fn, x, args.repeat)] for name, fn in CASES.items()}
    for level in (1, 2, 3, 4):
        aten_fpga.load(level)
        on_device = x.to("fpga")
        for name, fn in CASES.items():
            rows[name].append(best(fn, on_device, args.repeat))
    print(f"{args.size} x {args.size} float32, best of {args.repeat}, ms")
    print(f"{'':<16}{'CPU (1 thread)':>15}" + "".join(f"{f'opt{l}':>10}" for l in (1, 2, 3, 4)))
    for name, times in rows.items():
        print(f"{name:<16}{times[0] * 1e3:>15.1f}" + "".join(f"{t * 1e3:>10.1f}" for t in times[1:]))


if __name__ == "__main__":
    main()
