"""One CNN training step (LeNet-5, 28x28, batch 32, SGD) on "fpga" (emulated) against torch on the
CPU: wall time, kernel launches, CPU fallbacks and bytes synced between host and device per step,
at each XCL_OPT level that is built, and where the step's device time goes.

    python bench/bench_cnn.py [--levels 1 4] [--steps 5] [--json PATH]
"""
from __future__ import annotations

import argparse
import copy
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, median_seconds, print_table, write_json  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from test_model_lenet import LeNet5  # noqa: E402  the model the tests train

import aten_fpga  # noqa: E402
from aten_fpga._paths import emu_image_path  # noqa: E402


def step_fn(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if x.device.type == "fpga":
            next(model.parameters()).sum().item()  # wait for the step: read one value back
    return step


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--levels", type=int, nargs="*", default=[1, 2, 3, 4])
    p.add_argument("--steps", type=int, default=5, help="timed steps (median)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on a shared machine more threads spin and time noise)")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "cnn.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 1, 28, 28, generator=g), torch.randint(0, 10, (32,), generator=g)
    base = LeNet5()
    cpu_s = median_seconds(step_fn(copy.deepcopy(base), x, y), args.steps)
    rows, per_op = [], {}
    for level in args.levels:
        if not os.path.exists(emu_image_path(level)):
            print(f"opt={level}: no image (scons opt={level}); skipped")
            continue
        aten_fpga.load(level)
        model = copy.deepcopy(base).to("fpga")
        step = step_fn(model, x.to("fpga"), y.to("fpga"))
        step()  # warm up: kernel lookups, the allocator's cache
        aten_fpga.reset_stats()
        step()
        rep = aten_fpga.report()
        fpga_s = median_seconds(step, args.steps, warmup=0)
        launches = sum(r["launches"] for r in rep.values())
        fallbacks = {op: r["cpu_fallback"] for op, r in rep.items() if r["cpu_fallback"]}
        rows.append({"level": level, "cpu_ms": cpu_s * 1e3, "fpga_ms": fpga_s * 1e3, "ratio": fpga_s / cpu_s,
                     "launches": launches, "fpga_op_runs": sum(r["fpga"] for r in rep.values()), "cpu_fallbacks": sum(fallbacks.values()),
                     "bytes_to_device": sum(r["bytes_to_device"] for r in rep.values()),
                     "bytes_to_host": sum(r["bytes_to_host"] for r in rep.values()),
                     "fallback_ops": sorted(fallbacks)})
        per_op[level] = {op: r for op, r in rep.items() if r["fpga"] or r["cpu_fallback"]}
    print(f"LeNet-5 training step (batch 32), median of {args.steps}; torch CPU {cpu_s * 1e3:.1f} ms")
    print_table(["opt", "fpga ms", "cpu ms", "fpga/cpu", "launches", "fallbacks", "bytes->dev", "bytes->host"],
                [[r["level"], r["fpga_ms"], r["cpu_ms"], r["ratio"], r["launches"], r["cpu_fallbacks"],
                  r["bytes_to_device"], r["bytes_to_host"]] for r in rows])
    if rows:
        last = rows[-1]["level"]
        print(f"\nper op at opt={last} (one step): fpga runs, CPU fallbacks, seconds")
        print_table(["op", "fpga", "fallback", "fpga s", "cpu s"],
                    [[op, r["fpga"], r["cpu_fallback"], r["fpga_seconds"], r["cpu_seconds"]]
                     for op, r in sorted(per_op[last].items(), key=lambda kv: -(kv[1]["fpga_seconds"] + kv[1]["cpu_seconds"]))])
    write_json(args.json, {"benchmark": "cnn", "machine": machine(), "model": "LeNet-5", "batch": 32, "threads": args.threads, "rows": rows,
                           "per_op": {str(k): v for k, v in per_op.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
