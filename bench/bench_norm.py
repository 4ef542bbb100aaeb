"""The normalization layers (kernels/hls/norm) on the emulated device against torch on the CPU, in
the same run: batch_norm in training (forward, running statistics, y.sum().backward()) and in eval
(forward), layer_norm forward + backward at a transformer's shape, group_norm forward + backward.

    PYTHONPATH=$PWD python bench/bench_norm.py [--levels 4] [--repeat 5] [--threads 1] [--json PATH]

Each figure is the median of R runs after a warm-up and includes the copy of a scalar to the host
(the summed gradient, or the output's first element), so every kernel has finished. The inputs
live on the device (made by another kernel), as in a model. The emulator runs the HLS C++ as
written (g++ -O3, CUs as threads on a shared machine): these figures measure the emulation, not a
card. Also counts the kernel launches and CPU fallbacks of one run, and records the load average.
Beside wall time, the process CPU time of the same calls (torch's threads and the emulator's CU
threads summed): on a loaded shared machine it measures the work, which the load disturbs less.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aten_fpga  # noqa: E402
from common import ROOT, machine, median_seconds, print_table, write_json  # noqa: E402


def median_process_seconds(fn, repeat: int) -> float:
    """Median process CPU time of one call (every thread of the process), after a warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def batch_norm_train(x, w, b, rm, rv):
    """nn.BatchNorm2d's training step: the forward (running statistics updated), y.sum().backward()."""
    xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))
    F.batch_norm(xr, rm, rv, wr, br, training=True, momentum=0.1, eps=1e-5).sum().backward()
    return xr.grad[0, 0, 0, 0] + wr.grad[0] + br.grad[0]


def layer_norm_step(x, w, b, grad):
    xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))
    F.layer_norm(xr, (x.shape[-1],), wr, br, eps=1e-5).backward(grad)
    return xr.grad[0, 0, 0] + wr.grad[0] + br.grad[0]


def group_norm_step(x, w, b, grad, groups):
    """native_group_norm and its backward (F.group_norm off CPU/CUDA takes ATen's composite)."""
    n, c = x.shape[:2]
    hw = x[0, 0].numel()
    y, mean, rstd = torch.ops.aten.native_group_norm(x, w, b, n, c, hw, groups, 1e-5)
    gx, gw, gb = torch.ops.aten.native_group_norm_backward(grad, x, mean, rstd, w, n, c, hw, groups,
                                                           [True, True, True])
    return y[0, 0, 0, 0] + gx[0, 0, 0, 0] + gw[0] + gb[0]


def cases(device: str):
    g = torch.Generator().manual_seed(0)
    put = (lambda t: t.to(device) * 1)  # on the fpga: the output of a kernel
    n, c, hw = 8, 64, 56
    x = put(torch.randn(n, c, hw, hw, generator=g) * 2 + 3)
    w, b = put(torch.rand(c, generator=g) + 0.5), put(torch.randn(c, generator=g))
    rm, rv = put(torch.zeros(c)), put(torch.ones(c))
    gx = put(torch.randn(n, c, hw, hw, generator=g))
    rows, dim = (32, 128), 768
    lx = put(torch.randn(*rows, dim, generator=g))
    lw, lb = put(torch.rand(dim, generator=g) + 0.5), put(torch.randn(dim, generator=g))
    lg = put(torch.randn(*rows, dim, generator=g))
    return {
        f"batch_norm train fwd+bwd {n}x{c}x{hw}x{hw}": lambda: batch_norm_train(x, w, b, rm, rv),
        f"batch_norm eval fwd {n}x{c}x{hw}x{hw}":
            lambda: F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-5)[0, 0, 0, 0],
        f"layer_norm fwd+bwd {rows[0]}x{rows[1]}x{dim}": lambda: layer_norm_step(lx, lw, lb, lg),
        f"group_norm fwd+bwd {n}x{c}x{hw}x{hw} (32 groups)": lambda: group_norm_step(x, w, b, gx, 32),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="4", help="comma-separated XCL_OPT levels (their images must be built)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: on a shared machine more threads spin, which inflates "
                         "their CPU time, and time noise)")
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "norm.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    levels = [int(v) for v in args.levels.split(",")]

    load_before = os.getloadavg()[0]
    cpu = {name: median_seconds(lambda f=f: f().item(), args.repeat) for name, f in cases("cpu").items()}
    cpu_work = {name: median_process_seconds(lambda f=f: f().item(), args.repeat) for name, f in cases("cpu").items()}
    rows, results = [], []
    for level in levels:
        aten_fpga.load(level)
        for name, f in cases("fpga").items():
            t = median_seconds(lambda f=f: f().item(), args.repeat)
            work = median_process_seconds(lambda f=f: f().item(), args.repeat)
            aten_fpga.reset_stats()
            f().item()
            report = aten_fpga.report()
            launches = sum(r["launches"] for r in report.values())
            fallbacks = sum(r["cpu_fallback"] for r in report.values())
            norm = sum(n for r in report.values() for k, n in r["kernels"].items() if k.startswith("v_norm_"))
            ratio = t / cpu[name]
            work_ratio = work / cpu_work[name]
            rows.append([name, level, cpu[name] * 1e3, t * 1e3, ratio, cpu_work[name] * 1e3, work * 1e3, work_ratio,
                         launches, norm, fallbacks])
            results.append({"case": name, "level": level, "cpu_ms": cpu[name] * 1e3, "fpga_ms": t * 1e3,
                            "fpga_over_cpu": ratio, "cpu_process_ms": cpu_work[name] * 1e3,
                            "fpga_process_ms": work * 1e3, "fpga_over_cpu_process": work_ratio,
                            "launches": launches, "norm_launches": norm, "cpu_fallbacks": fallbacks})
    load_after = os.getloadavg()[0]
    print_table(["case", "XCL_OPT", "CPU ms", "fpga (emu) ms", "fpga/CPU", "CPU cpu-ms", "fpga cpu-ms",
                 "fpga/CPU (cpu time)", "launches", "norm kernels", "fallbacks"], rows)
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    write_json(args.json, {"machine": machine(), "repeat": args.repeat, "threads": args.threads,
                           "load_average": [load_before, load_after],
                           "results": results})


if __name__ == "__main__":
    main()
