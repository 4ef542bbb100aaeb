"""Pointwise and reduction ops on "fpga" (emulated) against torch on the CPU, per size and XCL_OPT
level, in the same run.

    python bench/bench_ops.py [--quick] [--levels 1,2,3,4] [--json PATH] [--mm-sizes 64,...,2048]

Inputs are resident on the device (as in a chain of FPGA ops); each figure is the median wall time
of one op call, output allocation included on both sides. The ratio is fpga time / CPU time (lower
is better; the target at opt=4 with one CU per core is <= 1.25 for binary and unary ops at 2^24).
Matrix products (the gemm category) are measured as square float32 `mm` of n x n x n (run_mm), n
from 64 to 2048, with GFLOP/s; the target at opt=4 is <= 4 at n = 1024. `--mm-image LABEL=FOLDER`
times more images beside the levels' (an XCL_OPT 4 build with another gemm_pe, copied aside).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, median_seconds, print_table, pyplot, save_plot, write_json  # noqa: E402

import aten_fpga  # noqa: E402

QUICK_OPS = ("add", "mul", "exp", "sigmoid", "sum")


def table_ops() -> dict[str, str]:
    """ATen base name -> kernel category, for every float32 entry of the table."""
    sys.path.insert(0, ROOT)
    from codegen.table import load_table

    ops = {}
    for e in load_table(os.path.join(ROOT, "native_functions_fpga.yaml")).entries:
        if "float32" in e.dtypes:
            ops.setdefault(e.func.split(".")[0], e.category)
    return ops


def call(op: str, category: str, tensors: list[torch.Tensor]):
    f = getattr(torch, op)
    if category == "binary":
        return lambda: f(tensors[0], tensors[1])
    if category == "ternary":
        return lambda: f(tensors[0], tensors[1], tensors[2]) if op != "where" else f(tensors[0] > 0, tensors[1], tensors[2])
    return lambda: f(tensors[0])  # unary, reduce


def run(quick: bool, levels: list[int], only: tuple[str, ...] = (), exponents: tuple[int, ...] = ()) -> dict:
    ops = table_ops()
    if quick or only:
        ops = {k: v for k, v in ops.items() if k in (only or QUICK_OPS)}
    sizes = [2 ** e for e in (exponents or ((10, 16, 20) if quick else (10, 12, 14, 16, 18, 20, 22, 24)))]
    rows = []
    torch.manual_seed(0)
    for n in sizes:
        cpu_in = [torch.rand(n) + 0.5 for _ in range(3)]  # positive: valid for log, sqrt, pow ...
        fpga_in = [t.to("fpga") for t in cpu_in]
        repeat = 5 if n >= 2 ** 20 else 20
        for op, category in sorted(ops.items()):
            if category == "gemm":
                continue  # run_mm: matrix shapes, not element counts
            if category == "reduce" and op in ("argmax", "argmin", "all", "any"):
                pass
            try:
                cpu_t = median_seconds(call(op, category, cpu_in), repeat, min_time=0.05)
            except (RuntimeError, TypeError):
                continue  # needs other arguments than the category's default call
            for level in levels:
                aten_fpga.load(level)
                fpga_t = median_seconds(call(op, category, fpga_in), repeat, min_time=0.05)
                rows.append({"op": op, "category": category, "n": n, "level": level,
                             "cpu_s": cpu_t, "fpga_s": fpga_t, "ratio": fpga_t / cpu_t})
    aten_fpga.load(4)
    return {"benchmark": "ops", "machine": machine(), "quick": quick, "rows": rows}


def run_mm(levels: list[int], sizes: list[int], images: dict[str, str] | None = None) -> list[dict]:
    """Square float32 mm, n x n times n x n, inputs resident on the device; GFLOP/s = 2 n^3 / time.
    `images`: more images to time beside the levels' (label -> image folder), e.g. an XCL_OPT 4
    build with another gemm_pe; their rows carry the label as their level."""
    rows = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        repeat = 3 if n >= 1024 else 10
        cpu_t = median_seconds(lambda: a @ b, repeat, min_time=0.2)
        for level, image in [(level, level) for level in levels] + list((images or {}).items()):
            aten_fpga.load(image)
            fa, fb = a.to("fpga") * 1, b.to("fpga") * 1  # made by a kernel: valid on the device only
            aten_fpga.reset_stats()
            fpga_t = median_seconds(lambda: fa @ fb, repeat, min_time=0.2 if n < 2048 else 0.0)
            ran = aten_fpga.stats().get("mm", {"fpga": 0, "cpu_fallback": 0})
            if ran["fpga"] == 0 or ran["cpu_fallback"]:  # a benchmark of the fallback would be the CPU's time
                raise SystemExit(f"mm did not run on the fpga kernel at opt={level} ({ran}): is {aten_fpga.image()} "
                                 "this checkout's image? (scripts outside the repo root need PYTHONPATH)")
            rows.append({"op": "mm", "category": "gemm", "n": n, "level": level, "cpu_s": cpu_t, "fpga_s": fpga_t,
                         "ratio": fpga_t / cpu_t, "fpga_gflops": 2 * n ** 3 / fpga_t / 1e9,
                         "cpu_gflops": 2 * n ** 3 / cpu_t / 1e9, "load1": os.getloadavg()[0]})
    aten_fpga.load(4)
    # Both sides share the machine's cores with whatever else runs: figures mean little at a load
    # average above the core count.
    loads = [r["load1"] for r in rows] or [os.getloadavg()[0]]
    print(f"mm: 1-minute load average {min(loads):.2f} to {max(loads):.2f} during the run ({os.cpu_count()} cores)")
    return rows


def plot(doc: dict, name: str = "ops.png") -> str | None:
    plt = pyplot()
    if plt is None:
        return None
    rows = doc["rows"]
    cats = sorted({r["category"] for r in rows})
    fig, axes = plt.subplots(1, len(cats), figsize=(5 * len(cats), 4), squeeze=False)
    for ax, cat in zip(axes[0], cats):
        for level in sorted({r["level"] for r in rows}, key=str):
            pts = {}
            for r in rows:
                if r["category"] == cat and r["level"] == level:
                    pts.setdefault(r["n"], []).append(r["ratio"])
            xs = sorted(pts)
            ys = [sorted(pts[x])[len(pts[x]) // 2] for x in xs]  # median over the category's ops
            ax.plot(xs, ys, marker="o", label=f"opt={level}" if isinstance(level, int) else level)
        ax.axhline(1.0, color="grey", lw=0.8)
        target = 4.0 if cat == "gemm" else 1.25
        ax.axhline(target, color="red", lw=0.8, ls="--", label=f"target {target:g}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{cat} ops (median over ops)")
        ax.set_xlabel("n (n x n x n mm, float32)" if cat == "gemm" else "elements (float32)")
        ax.set_ylabel("fpga (emulated) time / CPU time")
        ax.legend(fontsize=8)
    return save_plot(fig, name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--levels", default="1,2,3,4")
    p.add_argument("--ops", default="", help="only these ops (ATen base names, comma separated)")
    p.add_argument("--sizes", default="", help="element counts as powers of two, e.g. 10,24")
    p.add_argument("--mm-sizes", default="", help="n of the n x n x n mm (default 64,...,2048; --quick: to 512)")
    p.add_argument("--mm-image", action="append", default=[], metavar="LABEL=FOLDER",
                   help="also time mm on this image folder, e.g. 'opt=4 gemm_pe=32x48=build/emu/pe32x48' (repeatable)")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "ops.json"))
    args = p.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    only = tuple(x for x in args.ops.split(",") if x)
    doc = run(args.quick, levels, tuple(o for o in only if o != "mm"), tuple(int(x) for x in args.sizes.split(",") if x)) \
        if only != ("mm",) else {"benchmark": "ops", "machine": machine(), "quick": args.quick, "rows": []}
    if not only or "mm" in only:
        mm_sizes = [int(x) for x in args.mm_sizes.split(",") if x] or \
            [2 ** e for e in range(6, 10 if args.quick else 12)]
        doc["rows"] += run_mm(levels, mm_sizes, dict(x.rsplit("=", 1) for x in args.mm_image))
    print_table(["op", "n", "opt", "cpu ms", "fpga ms", "fpga/cpu", "fpga GFLOP/s"],
                [[r["op"], r["n"], r["level"], r["cpu_s"] * 1e3, r["fpga_s"] * 1e3, r["ratio"], r.get("fpga_gflops", "")]
                 for r in doc["rows"]])
    write_json(args.json, doc)
    plot(doc, "ops_mm.png" if only == ("mm",) else "ops.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
