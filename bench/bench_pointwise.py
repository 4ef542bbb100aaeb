"""Throughput of a few pointwise kernels on the emulated device, per XCL_OPT level.

    PYTHONPATH=$PWD python3 bench/bench_pointwise.py [--n 16777216]

Elements per second of one call (the second of two: the first warms the allocator), output
allocation included, against the same op on the CPU. Needs the images of `scons opt=1..4`.
"""
from __future__ import annotations

import argparse
import time

import torch

import aten_fpga

OPS = {
    "add": lambda x, y: x + y,
    "eq": lambda x, y: x == y,
    "exp": lambda x, y: torch.exp(x),
    "where": lambda x, y: torch.where(x > 0, x, y),  # two kernels: gt, then where
}


def rate(fn, *args) -> float:
    fn(*args)
    t = time.perf_counter()
    fn(*args)
    return args[0].numel() / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 24)
    n = p.parse_args().n
    x, y = torch.randn(n), torch.randn(n)
    fx, fy = x.to("fpga"), y.to("fpga")
    print(f"{'':6}" + "".join(f"{name:>12}" for name in OPS) + "   (M elements/s, float32, n = " + f"{n})")
    print(f"{'cpu':6}" + "".join(f"{rate(fn, x, y) / 1e6:12.0f}" for fn in OPS.values()))
    for level in (1, 2, 3, 4):
        aten_fpga.load(level)
        print(f"{f'opt{level}':6}" + "".join(f"{rate(fn, fx, fy) / 1e6:12.0f}" for fn in OPS.values()))


if __name__ == "__main__":
    main()
