"""One training step of the GPT-style target model (tests/gpt_model.py), "fpga" (emulated) against
torch on the CPU, and its optimizer step alone (AdamW, foreach) with the multi-tensor kernels.

    PYTHONPATH=$PWD python bench/bench_gpt.py [--steps N] [--threads N] [--json PATH]

Reports per step, for a training step without and with dropout (0.1) and for the optimizer step
alone: wall time of each device and their ratio, kernel launches, CPU fallbacks and the bytes synced
each way (what a card would move over PCIe), from aten_fpga.report(). The JSON adds, per row, the
ops that fell back and the launches per op. A second table projects each fpga step on a U250's
default image (aten_fpga.projection.step_projection) with synchronous launches, as the emulator
runs them, and with asynchronous ones: the host's own time is the step's less the kernels' (the
emulator's launches wait for their kernels), the device's comes from the report's launches.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from common import ROOT, machine, print_table, write_json  # noqa: E402
from gpt_model import GPT, batches  # noqa: E402

import aten_fpga  # noqa: E402


def totals() -> dict:
    """Launches, fallbacks and bytes synced so far, summed over ops; the ops that fell back and the
    launches of each op."""
    r = aten_fpga.report()
    out = {"launches": 0, "cpu_fallbacks": 0, "bytes_to_device": 0, "bytes_to_host": 0}
    for row in r.values():
        out["launches"] += row.get("launches", 0)
        out["cpu_fallbacks"] += row.get("cpu_fallback", 0)
        out["bytes_to_device"] += row.get("bytes_to_device", 0)
        out["bytes_to_host"] += row.get("bytes_to_host", 0)
    out["fallback_ops"] = sorted(op for op, row in r.items() if row.get("cpu_fallback", 0))
    out["launches_per_op"] = {op: row["launches"] for op, row in r.items() if row.get("launches", 0)}
    return out


def measure(device: str, steps: int, optimizer_only: bool, dropout: float = 0.0) -> dict:
    torch.manual_seed(0)
    model = GPT(dropout).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    data = [(x.to(device), y.to(device)) for x, y in batches(steps + 1)]

    def step(x, y):
        if not optimizer_only:
            opt.zero_grad(set_to_none=True)
            loss = model(x, y)
            loss.backward()
        opt.step()

    x, y = data[0]
    opt.zero_grad(set_to_none=True)
    model(x, y).backward()  # grads for the optimizer-only runs, and the optimizer's state
    opt.step()
    if device == "fpga":
        torch.fpga.synchronize()
        aten_fpga.reset_stats()
    start = time.perf_counter()
    for x, y in data[1:]:
        step(x, y)
    if device == "fpga":
        torch.fpga.synchronize()
    seconds = (time.perf_counter() - start) / steps
    row = {"device": device, "seconds": seconds}
    if device == "fpga":
        t = totals()
        row.update({k: v / steps if isinstance(v, int) else v for k, v in t.items()})
        row["launches_per_op"] = {op: n / steps for op, n in t["launches_per_op"].items()}
        rows = aten_fpga.report()
        row["report"], row["host_seconds"] = rows, seconds * steps - sum(r["fpga_seconds"] for r in rows.values())
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "gpt.json"))
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on a shared, loaded machine OpenMP's spinning threads "
                        "make the CPU's times meaningless)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    results, details, projected = [], [], []
    from aten_fpga import projection

    u250 = projection.image(4, projection.platform_of("u250"))
    for what, optimizer_only, dropout in (("training step", False, 0.0), ("training step, dropout 0.1", False, 0.1),
                                          ("AdamW step", True, 0.0)):
        cpu = measure("cpu", args.steps, optimizer_only, dropout)
        fpga = measure("fpga", args.steps, optimizer_only, dropout)
        results.append({"what": what, "cpu_ms": cpu["seconds"] * 1e3, "fpga_ms": fpga["seconds"] * 1e3,
                        "ratio": fpga["seconds"] / cpu["seconds"], "launches": fpga["launches"],
                        "cpu_fallbacks": fpga["cpu_fallbacks"], "kb_to_device": fpga["bytes_to_device"] / 1e3,
                        "kb_to_host": fpga["bytes_to_host"] / 1e3})
        details.append({"what": what, "fallback_ops": fpga["fallback_ops"], "launches_per_op": fpga["launches_per_op"]})
        step = projection.step_projection(fpga["report"], u250, fpga["host_seconds"])
        projected.append({"what": what, "host_ms": step["host_seconds"] * 1e3 / args.steps,
                          "device_busy_ms": step["device_busy_seconds"] * 1e3 / args.steps,
                          "sync_ms": step["sync_seconds"] * 1e3 / args.steps,
                          "async_ms": step["async_seconds"] * 1e3 / args.steps,
                          "sync_idle": step["sync_device_idle"], "async_idle": step["async_device_idle"]})
    print(f"GPT-style model (tests/gpt_model.py), per step, image {os.path.basename(os.path.dirname(aten_fpga.image()))}")
    headers = list(results[0])
    print_table(headers, [[r[h] for h in headers] for r in results])
    for d in details:
        print(f"{d['what']}: ops falling back: {', '.join(d['fallback_ops']) or 'none'}")
    print("\nProjected on a U250 (XCL_OPT 4, the default image), per step: launches waiting for their kernels "
          "(sync) or queued (async)")
    headers = list(projected[0])
    print_table(headers, [[r[h] for h in headers] for r in projected])
    write_json(args.json, {"machine": machine(), "image": aten_fpga.image(), "steps": args.steps, "results": results,
                           "details": details, "u250_projection": projected})


if __name__ == "__main__":
    main()
