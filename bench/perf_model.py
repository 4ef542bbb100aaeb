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


# --- GEMM: c = a @ b, n x n x n float32 (kernels/hls/gemm) ---------------------------------------
# Anchors, float32, published: AutoSA's systolic array on a U250 at 300 MHz with 8,320 DSPs, and
# gemm_hls (Vitis HLS, one CU) on a VU9P (the U200/U250 family's die).
GEMM_ANCHORS = [("AutoSA, U250", 938.7, 8320), ("gemm_hls, VU9P", 301.0, None)]
GEMM_DSP_PER_MAC = 5  # a float32 multiply (3 DSPs) and add (2 DSPs)
GEMM_N = 4096
GEMM_TILE_1_3 = (64, 64, 64)  # TM, TN, TK of kernels/hls/gemm/opt1-3
GEMM_IL, GEMM_SM, GEMM_TK4 = 8, 8, 64  # opt4: accumulators per PE, PE row blocks per tile, k chunk


def gemm_design(level: int, platform, pe: tuple[int, int] | None = None) -> dict:
    """The kernel's geometry at `level` on `platform`: MACs per cycle per CU, CUs, tile, DSPs."""
    from afpga.platforms import DSPS, GEMM_PE

    if level == 4:
        pm, pn = pe or GEMM_PE[platform.alias]
        macs, tile, lanes = pm * pn, (pm * GEMM_SM, pn * GEMM_IL, GEMM_TK4), 16
    else:
        pm = pn = None
        macs, tile, lanes = 1, GEMM_TILE_1_3, 1
    cus = LEVEL_CUS[level]
    dsps = macs * cus * GEMM_DSP_PER_MAC
    return {"pe": f"{pm}x{pn}" if pm else "1", "macs": macs, "cus": cus, "tile": tile, "lanes": lanes,
            "dsps": dsps, "dsp_fraction": dsps / DSPS[platform.alias]}


def gemm_throughput(level: int, platform, n: int = GEMM_N, pe: tuple[int, int] | None = None) -> dict:
    """Projected GFLOP/s of one n x n x n float32 product, resident in device memory.

    Per CU and output tile (TM x TN, k in TK chunks): compute takes ceil(n/TK) * TK * TM * TN / MACs
    cycles (edges padded to whole tiles) plus the stage's own fills and drains; level 1 adds its load phases (each chunk's a and b tiles,
    one element per cycle, not overlapped) and the store; levels 2-4 overlap loads, compute and
    store, so a tile takes the longest of them. Memory: each tile reads n * (TM + TN) elements
    (a on one bank, b on another) and writes TM * TN; a port moves at most its width per cycle and
    one bank's bandwidth, and the CUs share the platform's banks."""
    d = gemm_design(level, platform, pe)
    tm, tn, tk = d["tile"]
    tiles = -(-n // tm) * -(-n // tn)
    chunks = -(-n // tk)
    # Compute-stage cycles per tile: the multiply-adds, plus the kernel's unoverlapped work. At
    # levels 1-3: clearing and draining the accumulators (TM * TN each) and, at 2-3, filling the
    # local a and b tiles from the streams before each chunk. At 4 the next chunk's words land
    # during the current chunk: only the first fill and the drain (a word per cycle) remain.
    mac = chunks * tk * tm * tn / d["macs"]
    if level == 4:
        compute = mac + max(tm * tk, tk * tn) / d["lanes"] + tm * tn / d["lanes"]
    else:
        compute = mac + 2 * tm * tn + (chunks * (tm * tk + tk * tn) if level in (2, 3) else 0)
    port = min(d["lanes"] * ELEMENT_BYTES * CLOCK_HZ, platform.bank_gbps * 1e9)  # bytes/s of one port
    read_a, read_b, write_c = (n * tm * ELEMENT_BYTES / port, n * tn * ELEMENT_BYTES / port,
                               tm * tn * ELEMENT_BYTES / port)  # seconds per tile, each on its own port
    if level == 1:
        loads = chunks * (tm * tk + tk * tn) + tm * tn  # the a/b loads and the store, in turn
        per_tile = (compute + loads) / CLOCK_HZ
        bound = "compute + load phases"
    else:
        per_tile = max(compute / CLOCK_HZ, read_a, read_b, write_c)
        bound = "compute" if per_tile == compute / CLOCK_HZ else "memory port/bank"
    bound = bound if level == 1 or mac / compute > 0.9 else bound + " (fills)"
    seconds = -(-tiles // d["cus"]) * per_tile
    # All CUs together: a, b and c traffic over the platform's banks.
    total_bytes = tiles * (n * (tm + tn) + tm * tn) * ELEMENT_BYTES
    banks = 1 if platform.embedded else min(len(platform.banks), 3 * d["cus"])
    bank_s = total_bytes / (banks * platform.bank_gbps * 1e9)
    if bank_s > seconds:
        seconds, bound = bank_s, "memory banks"
    seconds += LAUNCH_S
    return dict(d, level=level, platform=platform.alias, n=n, gflops=2 * n ** 3 / seconds / 1e9,
                peak_gflops=2 * d["macs"] * d["cus"] * CLOCK_HZ / 1e9, bound=bound, seconds=seconds)


def gemm_model(n: int = GEMM_N) -> list[dict]:
    return [gemm_throughput(level, p, n) for level in (1, 2, 3, 4) for p in PLATFORMS.values()]


def gemm_report(n: int = GEMM_N) -> list[dict]:
    """Prints the GEMM projection and plots it beside the anchors (docs/img/gemm_model.png)."""
    rows = gemm_model(n)
    print(f"\nGEMM: projected float32 GFLOP/s for {n} x {n} x {n}, resident, {CLOCK_HZ / 1e6:.0f} MHz")
    print_table(["platform", "opt", "PEs", "CUs", "DSPs", "% DSPs", "GFLOP/s", "peak", "bound"],
                [[r["platform"], r["level"], r["pe"], r["cus"], r["dsps"], 100 * r["dsp_fraction"], r["gflops"],
                  r["peak_gflops"], r["bound"]] for r in rows])
    plt = pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7.5, 4))
        opt4 = [r for r in rows if r["level"] == 4]
        labels = [f"{r['platform']} opt=4\n{r['pe']} PEs" for r in opt4] + [a[0].replace(", ", "\n") for a in GEMM_ANCHORS]
        values = [r["gflops"] for r in opt4] + [a[1] for a in GEMM_ANCHORS]
        colors = ["tab:blue"] * len(opt4) + ["tab:grey"] * len(GEMM_ANCHORS)
        ax.bar(labels, values, color=colors)
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
        ax.axhline(700, color="red", lw=0.8, ls="--", label="target: 700 GFLOP/s on a U250")
        ax.set_ylabel("float32 GFLOP/s")
        ax.set_title(f"GEMM {n}^3: projected (opt=4, blue) vs published (grey)")
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=8)
        save_plot(fig, "gemm_model.png")
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
    gemm_rows = gemm_report()
    write_json(args.json, {"benchmark": "perf_model", "machine": machine(), "n": args.n, "clock_hz": CLOCK_HZ,
                           "launch_s": LAUNCH_S, "rows": rows, "gemm": gemm_rows})
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
