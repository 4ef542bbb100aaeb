"""One optimizer step on "fpga" (emulated at the loaded XCL_OPT level) with fused=True (one multi-tensor
launch per step) and foreach=True (one launch per foreach op), against torch's CPU fused=True step
in the same run: launches per step and time ratios.

    PYTHONPATH=$PWD python bench/bench_fused_optim.py [--tensors 28] [--numel 65536] [--json out.json]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import machine, median_seconds, print_table, write_json  # noqa: E402

import aten_fpga  # noqa: E402

OPTIMIZERS = {
    "Adam": (torch.optim.Adam, dict(lr=1e-3)),
    "AdamW": (torch.optim.AdamW, dict(lr=1e-3, weight_decay=0.01)),
    "SGD": (torch.optim.SGD, dict(lr=0.01, momentum=0.9, nesterov=True)),
}


def make(device, n, numel, cls, opts, **mode):
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(numel, generator=g).to(device) for _ in range(n)]
    for p in params:
        p.grad = torch.randn(numel, generator=g).to(device) * 1e-2
    opt = cls(params, **opts, **mode)
    opt.step()  # creates the state
    return opt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensors", type=int, default=28)
    ap.add_argument("--numel", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows, doc = [], {"machine": machine(), "tensors": args.tensors, "numel": args.numel, "results": {}}
    for name, (cls, opts) in OPTIMIZERS.items():
        cpu = make("cpu", args.tensors, args.numel, cls, opts, fused=True)
        t_cpu = median_seconds(cpu.step, args.repeat)
        entry = {"cpu_fused_ms": t_cpu * 1e3}
        for mode in ("fused", "foreach"):
            dev = make("fpga", args.tensors, args.numel, cls, opts, **{mode: True})
            aten_fpga.reset_stats()
            dev.step()
            launches = sum(r.get("launches", 0) for r in aten_fpga.report().values())
            t = median_seconds(dev.step, args.repeat)
            entry[mode] = {"ms": t * 1e3, "launches": launches, "vs_cpu": t / t_cpu}
            rows.append([name, mode, launches, t * 1e3, t_cpu * 1e3, t / t_cpu])
        doc["results"][name] = entry
    print_table(["optimizer", "fpga path", "launches/step", "fpga ms", "cpu fused ms", "fpga/cpu"], rows)
    if args.json:
        write_json(args.json, doc)


if __name__ == "__main__":
    main()
