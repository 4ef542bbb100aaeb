"""Measure how far each transcendental pointwise kernel is from torch on the CPU, in ulps.

    PYTHONPATH=$PWD python3 bench/ulp_pointwise.py [--level 4] [--n 1000000] [--dtype float16]

Inputs: the special values of the tests and n values spread over each op's domain (normal around
zero, wide log-uniform magnitudes of both signs). Prints the largest distance per op and the share
of elements that differ at all; docs/kernels.md and tests/test_kernels_pointwise.py (ULP) carry
the result.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import aten_fpga  # noqa: E402
from test_kernels_pointwise import OPS, SCALED, ULP, ULP16, scaled_error, specials, ulp_distance  # noqa: E402


def inputs(n: int, gen: torch.Generator, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    normal = torch.randn(n // 2, generator=gen) * 2
    reach = 60 if dtype == torch.float32 else 12  # log-uniform magnitudes within the dtype's range
    mags = torch.exp(torch.empty(n - n // 2).uniform_(-reach, reach, generator=gen))
    signs = torch.randint(0, 2, mags.shape, generator=gen) * 2 - 1
    return torch.cat([specials(dtype), normal.to(dtype), (mags * signs).to(dtype)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--level", type=int, default=4)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    bounds = ULP if dtype == torch.float32 else ULP16
    aten_fpga.load(args.level)
    gen = torch.Generator().manual_seed(0)
    print(f"{'op':<12} {'max ulp':>7} {'differ':>8} {'NaN-only':>8}   ({args.dtype}, XCL_OPT {args.level}, "
          f"{args.n} inputs per operand)")
    for op in OPS:
        if dtype not in op.dtypes or (
                op.name not in bounds and op.name not in SCALED and op.name not in ("hypot", "xlogy", "asinh", "acosh")):
            continue
        xs = [inputs(args.n, gen, dtype) for _ in range(op.arity)]
        if op.arity == 2:  # also small pairs, where pow/atan2/hypot/xlogy are most delicate
            xs = [torch.cat([x, torch.randn(args.n // 4, generator=gen).to(dtype)]) for x in xs]
        expected = op.fn(*xs)
        actual = op.fn(*(x.to("fpga") for x in xs)).cpu()
        differ = ((actual != expected) & ~(actual.isnan() & expected.isnan())).float().mean().item()
        if op.skip is not None:
            keep = ~op.skip(*xs)
            actual, expected, xs = actual[keep], expected[keep], [x[keep] for x in xs]
        worst, nan_only = ulp_distance(actual, expected)
        extra = (f"   |error| / scale <= {scaled_error(actual.float(), expected.float(), *(x.float() for x in xs)):.3g}"
                 if op.name in SCALED else "")
        print(f"{op.name:<12} {worst:>7} {differ:>8.2%} {nan_only:>8}{extra}")


if __name__ == "__main__":
    main()
