"""A hardware performance model beside the measurements: for each kernel category, XCL_OPT level and
known platform, the throughput the design can reach and the projected speed-up over torch on this
machine's CPU.

    python bench/perf_model.py [--json PATH] [--n N]

Assumptions (docs/perf_model.md explains them):
- kernel clock 300 MHz (Vitis' default for these platforms); float32 elements;
- levels: 1 = sequential burst phases (read each input, compute, write: one element per cycle per
  phase), 2 = dataflow (one element per cycle), 3 = level 2 as 4 CUs, 4 = 512-bit ports (16 lanes);
- every m_axi port has its own bank (the build's sp= spreading), a port moves at most its width per
  cycle and at most one bank's peak bandwidth; all CUs together share the platform's banks;
- "resident": the operands already live in device memory (a chain of FPGA ops); "with transfers":
  the inputs are copied in and the output out over the host link (PCIe Gen3 x16, ~12 GB/s per
  direction; the embedded platform shares the host's memory, so it has no such copy);
- 15 us per kernel launch (XRT run start + wait).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, median_seconds, print_table, pyplot, save_plot, write_json  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "site_scons"))
from afpga.platforms import PLATFORMS  # noqa: E402

CLOCK_HZ = 300e6
ELEMENT_BYTES = 4
LAUNCH_S = 15e-6
LEVEL_CUS = {1: 1, 2: 1, 3: 4, 4: 1}
LEVEL_LANES = {1: 1, 2: 1, 3: 1, 4: 16}
# Ports (inputs, outputs) of a category's kernel; a reduction's output traffic is negligible.
CATEGORY_PORTS = {"unary": (1, 1), "binary": (2, 1), "ternary": (3, 1), "reduce": (1, 0)}


def throughput(category: str, level: int, platform) -> tuple[float, str]:
    """Elements per second one kernel launch reaches, and what bounds it."""
    n_in, n_out = CATEGORY_PORTS[category]
    ports = n_in + n_out
    lanes, cus = LEVEL_LANES[level], LEVEL_CUS[level]
    compute = CLOCK_HZ * lanes / (ports + 1 if level == 1 else 1)  # level 1 runs its phases in turn
    port = min(CLOCK_HZ * lanes * ELEMENT_BYTES, platform.bank_gbps * 1e9) / ELEMENT_BYTES
    per_cu, bound = (compute, "compute") if compute <= port else (port, "port width/bank")
    banks = len(platform.banks)
    if platform.embedded:  # the HP ports all reach the same PS DDR
        total = 19.2e9 / (ports * ELEMENT_BYTES)
    else:
        total = min(banks, cus * ports) * platform.bank_gbps * 1e9 / (ports * ELEMENT_BYTES)
    if cus * per_cu > total:
        return total, "memory banks"
    return cus * per_cu, bound


def cpu_seconds(n: int) -> dict[str, float]:
    """torch's CPU time per category at n elements: from bench_ops' JSON when it has n, else measured."""
    path = os.path.join(ROOT, "build", "bench", "ops.json")
    if os.path.exists(path):
        with open(path) as f:
            rows = [r for r in json.load(f)["rows"] if r["n"] == n]
        by_cat: dict[str, list[float]] = {}
        for r in rows:
            by_cat.setdefault(r["category"], []).append(r["cpu_s"])
        if by_cat:
            return {c: sorted(v)[len(v) // 2] for c, v in by_cat.items()}
    import torch

    a, b, c = torch.rand(n), torch.rand(n), torch.rand(n)
    return {"unary": median_seconds(lambda: torch.exp(a), 5), "binary": median_seconds(lambda: a + b, 5),
            "ternary": median_seconds(lambda: torch.addcmul(a, b, c), 5), "reduce": median_seconds(lambda: a.sum(), 5)}


def model(n: int) -> list[dict]:
    cpu = cpu_seconds(n)
    rows = []
    for category, (n_in, n_out) in CATEGORY_PORTS.items():
        if category not in cpu:
            continue
        for level in (1, 2, 3, 4):
            for p in PLATFORMS.values():
                rate, bound = throughput(category, level, p)
                resident = n / rate + LAUNCH_S
                moved = n * (n_in + n_out) * ELEMENT_BYTES
                transfers = resident + (moved / (p.host_link_gbps * 1e9) if p.host_link_gbps else 0.0)
                rows.append({"category": category, "level": level, "platform": p.alias,
                             "gelem_per_s": rate / 1e9, "bound": bound, "device_ms": resident * 1e3,
                             "with_transfers_ms": transfers * 1e3, "cpu_ms": cpu[category] * 1e3,
                             "speedup_resident": cpu[category] / resident,
                             "speedup_with_transfers": cpu[category] / transfers})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1 << 24, help="elements per op (float32)")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "perf_model.json"))
    args = p.parse_args(argv)
    rows = model(args.n)
    print(f"projected for {args.n} float32 elements per op, against this CPU's measured time")
    print_table(["category", "opt", "platform", "Gelem/s", "bound", "device ms", "+PCIe ms", "cpu ms", "x resident", "x +PCIe"],
                [[r["category"], r["level"], r["platform"], r["gelem_per_s"], r["bound"], r["device_ms"],
                  r["with_transfers_ms"], r["cpu_ms"], r["speedup_resident"], r["speedup_with_transfers"]] for r in rows])
    write_json(args.json, {"benchmark": "perf_model", "machine": machine(), "n": args.n, "clock_hz": CLOCK_HZ,
                           "launch_s": LAUNCH_S, "rows": rows})
    plt = pyplot()
    if plt is not None:
        cats = sorted({r["category"] for r in rows})
        fig, axes = plt.subplots(1, len(cats), figsize=(4.5 * len(cats), 3.8), squeeze=False, sharey=True)
        for ax, cat in zip(axes[0], cats):
            for level in (1, 2, 3, 4):
                pts = [r for r in rows if r["category"] == cat and r["level"] == level]
                ax.plot([r["platform"] for r in pts], [r["speedup_resident"] for r in pts], marker="o", label=f"opt={level}")
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_yscale("log")
            ax.set_title(f"{cat}: projected speed-up (resident)")
            ax.legend(fontsize=8)
        save_plot(fig, "perf_model.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
