"""A hardware performance model beside the measurements: for each kernel category, XCL_OPT level and
known platform, the throughput the design can reach, the share of the card's peak memory bandwidth
it uses, the projected speed-up over torch on this machine's CPU, and the energy per op beside the
CPU's and an H100's.

    python bench/perf_model.py [--json PATH] [--n N] [--kernels K,...] [--dtypes D,...]
    python bench/perf_model.py --cnn      (the LeNet / ResNet-block layers: docs/img/cnn_layers.png)
    python bench/perf_model.py --fft      (batched FFTs beside Vitis' SSR FFT: docs/img/fft_model.png)
    python bench/perf_model.py --compile  (torch.compile's fused step beside eager on a U250, from
                                           bench/bench_compile.py's launches and bytes)

The model -- the image the build makes (`--kernels`/`--dtypes` select as scons' kernels= and dtypes=
do; default the whole table), its engines' CUs, banks, compute lanes and arrays, launch latency and
host link -- is aten_fpga/projection.py, the one the package projects a recorded workload with
(aten_fpga.report()'s projected_seconds); this script prints its tables and plots beside this
machine's CPU and the published anchors.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, median_seconds, print_table, pyplot, save_plot, write_json  # noqa: E402

sys.path.insert(0, ROOT)  # this checkout's aten_fpga (its projection puts site_scons on the path)
from aten_fpga.projection import (ADD_LATENCY, BOARD_WATTS, CATEGORY_MEMBER, CLOCK_HZ, COL_TILE,  # noqa: E402,F401
                                  ELEMENT_BYTES, FILL_CYCLES, GEMM_N, LAUNCH_S, MEMBERS, PCIE_GEN3_X16_GBPS,
                                  PCIE_MEASURED_GBPS, PIPELINE_FILL, REDUCE_ROWS, bank_shares, device_seconds,
                                  fft_row_cycles, fit_summary, gemm_design, gemm_throughput, image, pe_array_seconds,
                                  one_kernel_workload, peak_gbps, plan_image, reduce_run_cycles, throughput)
from afpga import platforms, resources, variables  # noqa: E402
from afpga.platforms import PLATFORMS  # noqa: E402



# This machine's CPU: lscpu says "AMD EPYC", family 25 model 1 (Zen 3, Milan) under KVM, without its
# SKU. Milan's package TDPs run 155-280 W; we take the top part's (EPYC 7763, 280 W) as the
# package power: a TDP, not a measurement, and our 2 vCPUs are a slice of that package.
CPU = {"name": "AMD EPYC (Zen 3 Milan, family 25 model 1; SKU hidden by KVM)", "tdp_w": 280,
       "tdp_source": "EPYC 7763 TDP 280 W (top Milan SKU; assumed, not measured)"}
# An H100 SXM measured on the same ops at 2^24 float32; its 700 W board power (TDP) as its power.
H100 = {"name": "H100 SXM", "tdp_w": 700, "n": 1 << 24, "ms": {"binary": 0.0725, "reduce_all": 0.034},
        "ops": {"binary": "add", "reduce_all": "sum"}}


def cpu_seconds(n: int) -> dict[str, float]:
    """torch's CPU time per category at n elements, measured in this run."""
    import torch

    a, b, c = torch.rand(n), torch.rand(n), torch.rand(n)
    rows = a.view(REDUCE_ROWS, -1)
    return {"unary": median_seconds(lambda: torch.neg(a), 5), "binary": median_seconds(lambda: a + b, 5),
            "ternary": median_seconds(lambda: torch.addcmul(a, b, c), 5),
            "reduce": median_seconds(lambda: rows.sum(1), 5), "reduce_all": median_seconds(lambda: a.sum(), 5),
            "reduce_cols": median_seconds(lambda: rows.sum(0), 5)}


def model(n: int, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> list[dict]:
    cpu = cpu_seconds(n)
    rows = []
    for category, member in CATEGORY_MEMBER.items():
        for level in (1, 2, 3, 4):
            for p in PLATFORMS.values():
                img = image(level, p, wanted, dtypes)
                if member not in img.kernels:
                    continue
                d = device_seconds(category, img, n)
                resident, moved = d["seconds"], d["moved"]
                # With transfers, the same bytes cross the host link (inputs in, outputs out).
                transfers = resident + (moved / (p.host_link_gbps * 1e9) if p.host_link_gbps else 0.0)
                gbps = moved / resident / 1e9
                watts = BOARD_WATTS.get(p.alias)
                rows.append({"category": category, "member": member, "level": level, "platform": p.alias,
                             "cus": d["cus"], "gelem_per_s": d["rate"] / 1e9, "bound": d["bound"],
                             "device_ms": resident * 1e3,
                             "gbps": gbps, "peak_gbps": peak_gbps(p), "percent_of_peak": 100 * gbps / peak_gbps(p),
                             "with_transfers_ms": transfers * 1e3, "cpu_ms": cpu[category] * 1e3,
                             "speedup_resident": cpu[category] / resident,
                             "speedup_with_transfers": cpu[category] / transfers,
                             # what the card's memory peak alone would allow against this CPU
                             "speedup_ceiling": cpu[category] / (moved / (peak_gbps(p) * 1e9)),
                             "board_w": watts, "energy_mj": watts * resident * 1e3 if watts else None,
                             "cpu_energy_mj": CPU["tdp_w"] * cpu[category] * 1e3})
    return rows


def plan_rows(n: int, whole: list[dict]) -> list[dict]:
    """The streaming rows' op alone as a workload (10 launches of n elements), on the image its plan
    builds for each card (projection.plan_image: its kernels, with the CUs that serve it best
    within the card): the rate a model's image reaches where the whole table's CUs are few. `whole`:
    model()'s rows, the whole table's image, beside it."""
    out = []
    for category in ("unary", "binary", "reduce"):
        member = CATEGORY_MEMBER[category]
        for p in PLATFORMS.values():
            img = image(4, p)
            k = img.kernels[member]
            moved = n * sum(st.bytes for st in img.streams(member))
            rows = one_kernel_workload(k.op.name, member, 10, 10 * moved)
            planned, build = plan_image(rows, p, (k.op.name,), (k.dtype.name,))
            d = device_seconds(category, planned, n, member)
            gbps = d["moved"] / d["seconds"] / 1e9
            out.append({"category": category, "member": member, "platform": p.alias, "cus": d["cus"],
                        "gbps": gbps, "percent_of_peak": 100 * gbps / peak_gbps(p), "bound": d["bound"],
                        "whole_table_percent": next(r["percent_of_peak"] for r in whole
                                                    if r["category"] == category and r["level"] == 4
                                                    and r["platform"] == p.alias),
                        "image_fit": fit_summary(planned.fit)})
    return out


def energy_rows(rows: list[dict], n: int) -> list[dict]:
    """Energy per op at opt=4 beside the CPU's (TDP x its time) and the H100's (TDP x measured time)."""
    out = []
    for category in ("binary", "reduce_all"):
        pts = [r for r in rows if r["category"] == category and r["level"] == 4 and r["board_w"]]
        if not pts:  # the image (--kernels, --dtypes) has no such member
            continue
        for r in pts:
            out.append({"category": category, "device": r["platform"] + " opt=4", "watts": r["board_w"],
                        "ms": r["device_ms"], "mj": r["energy_mj"], "kind": "projected"})
        cpu_ms = pts[0]["cpu_ms"]
        out.append({"category": category, "device": "this CPU (torch)", "watts": CPU["tdp_w"], "ms": cpu_ms,
                    "mj": CPU["tdp_w"] * cpu_ms, "kind": "measured time x TDP"})
        if n == H100["n"]:
            ms = H100["ms"][category]
            out.append({"category": category, "device": H100["name"], "watts": H100["tdp_w"], "ms": ms,
                        "mj": H100["tdp_w"] * ms, "kind": "measured time x TDP"})
    return out


def limits(wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> list[list]:
    """The physical limits the projections sit under, and the opt=4 image's plan: CUs of each
    streaming engine, the GEMM engine's CUs and PE array, and whether the estimate says it fits."""
    out = []
    for p in PLATFORMS.values():
        img = image(4, p, wanted, dtypes)
        kind = "PS DDR4 (HP ports)" if p.embedded else f"{p.banks[0].kind} {len(p.banks)} x {p.bank_gbps:.2f} GB/s"
        streaming = sorted({img.cus(c) for c in img.engines if c in variables.STREAMING})
        gemm = f"{img.cus('gemm')} x {'x'.join(map(str, img.config.gemm_pe))}" if "gemm" in img.engines else "-"
        out.append([p.alias, kind, peak_gbps(p), PCIE_GEN3_X16_GBPS if p.host_link_gbps else None,
                    p.host_link_gbps, "/".join(map(str, streaming)) or "-", gemm, fit_summary(img.fit)])
    return out


def members_model(n: int, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = ()) -> list[dict]:
    """MEMBERS at XCL_OPT 4 on every platform: what their compute lanes leave of the memory's peak."""
    rows = []
    for member in MEMBERS:
        for p in PLATFORMS.values():
            img = image(4, p, wanted, dtypes)
            if member not in img.kernels:
                continue
            k = img.kernels[member]
            d = device_seconds(k.op.category, img, n, member)
            gbps = d["moved"] / d["seconds"] / 1e9
            rows.append({"member": member, "engine": img.engine_of(member).name, "platform": p.alias,
                         "compute_lanes": img.compute_lanes(member), "word_lanes": k.lanes, "cus": d["cus"],
                         "gelem_per_s": d["rate"] / 1e9, "bound": d["bound"], "device_ms": d["seconds"] * 1e3,
                         "gbps": gbps, "percent_of_peak": 100 * gbps / peak_gbps(p)})
    return rows


# --- CNN layers: im2col + GEMM against a direct convolution, and pooling -------------------------
# A convolution as im2col + GEMM: im2col walks one col element per cycle at XCL_OPT 1-3 and 16 at
# XCL_OPT 4 (kernels/hls/im2col), and
# writes the col matrix ([C*K, N*OH*OW]) to device memory; the GEMM reads it back. A direct
# convolution reads the input once but needs its own MAC array. Both use the XCL_OPT 4 GEMM's PE
# array (the build's gemm_pe for the card): its cycles for an m x n x k product are those of the
# kernel as written -- per c tile, the row blocks that hold rows of c, each k * IL cycles -- so a
# product with few rows (a convolution's Cout) uses a fraction of the array. The GEMM streams its
# operands from one bank each. Pooling walks one window element per cycle per CU. Backward: two GEMMs (grad_input
# through col2im, grad_weight through a fresh im2col) for the convolution, one window walk for pooling.



def cnn_layers() -> list[dict]:
    """The convolution and pooling layers of the LeNet-5 step (batch 32) and a ResNet BasicBlock
    (batch 8, 56x56): (model, layer, kind, N, C, H, W, Cout, k, stride, padding)."""
    def layer(model, name, kind, n, c, h, w, cout, k, s=1, p=0):
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        return {"model": model, "layer": name, "kind": kind, "n": n, "c": c, "h": h, "w": w, "cout": cout,
                "k": k, "stride": s, "padding": p, "oh": oh, "ow": ow}
    return [layer("LeNet-5", "conv1 5x5 1->6", "conv", 32, 1, 28, 28, 6, 5),
            layer("LeNet-5", "pool1 2x2", "pool", 32, 6, 24, 24, 6, 2, 2),
            layer("LeNet-5", "conv2 5x5 6->16", "conv", 32, 6, 12, 12, 16, 5),
            layer("LeNet-5", "pool2 2x2", "pool", 32, 16, 8, 8, 16, 2, 2),
            layer("ResNet block", "conv 3x3 64->64", "conv", 8, 64, 56, 56, 64, 3, 1, 1)]


def cnn_layer_seconds(l: dict, platform, method: str) -> float:
    """Projected forward + backward seconds of one layer on `platform`: method "im2col+gemm" (the
    walk at XCL_OPT 1-3: one col element per cycle), "im2col16+gemm" (XCL_OPT 4: 16 lanes),
    "direct" (convolutions) or "pool"."""
    bank = platform.bank_gbps * 1e9
    pix = l["n"] * l["oh"] * l["ow"]
    if l["kind"] == "pool":
        walk = pix * l["c"] * l["k"] ** 2 / CLOCK_HZ  # one window element per cycle, forward
        return 2 * walk + 4 * LAUNCH_S  # backward walks the windows again
    ck = l["c"] * l["k"] ** 2
    # forward: [Cout x C*K] @ [C*K x pixels]; grad_weight: [Cout x pixels] @ [pixels x C*K]; grad_input:
    # [C*K x Cout] @ [Cout x pixels] -- a third of the layer's GEMM time each, as the formula below counts it.
    gemm = (pe_array_seconds(l["cout"], pix, ck, platform) + pe_array_seconds(l["cout"], ck, pix, platform)
            + pe_array_seconds(ck, pix, l["cout"], platform)) / 3
    image = l["n"] * l["c"] * l["h"] * l["w"] * ELEMENT_BYTES
    out = pix * l["cout"] * ELEMENT_BYTES
    if method == "direct":  # reads the image, writes the output: one pass per GEMM-equivalent
        return 3 * max(gemm, (image + out) / bank) + 3 * LAUNCH_S
    col = pix * l["c"] * l["k"] ** 2
    lanes = 16 if method == "im2col16+gemm" else 1
    walk = max(col / (lanes * CLOCK_HZ), col * ELEMENT_BYTES / bank)  # im2col writes col
    gemm_io = max(gemm, (col * ELEMENT_BYTES + out) / bank)  # the GEMM streams col back
    # forward: im2col + GEMM; backward: im2col + GEMM (grad_weight), GEMM + col2im (grad_input).
    return 3 * walk + 3 * gemm_io + 6 * LAUNCH_S


def cnn_cpu_seconds(l: dict) -> float:
    """torch's CPU time of the layer's forward + backward on this machine."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(l["n"], l["c"], l["h"], l["w"], requires_grad=True)
    if l["kind"] == "pool":
        fn = lambda: F.max_pool2d(x, l["k"], l["stride"]).sum().backward()  # noqa: E731
    else:
        w = torch.randn(l["cout"], l["c"], l["k"], l["k"], requires_grad=True)
        fn = lambda: F.conv2d(x, w, None, l["stride"], l["padding"]).sum().backward()  # noqa: E731
    return median_seconds(fn, 3)


def cnn_model(platforms=("u250", "u55c")) -> list[dict]:
    by_alias = {p.alias: p for p in PLATFORMS.values()}
    rows = []
    for l in cnn_layers():
        cpu = cnn_cpu_seconds(l)
        for alias in platforms:
            for method in (("pool",) if l["kind"] == "pool" else ("im2col+gemm", "im2col16+gemm", "direct")):
                t = cnn_layer_seconds(l, by_alias[alias], method)
                rows.append({"model": l["model"], "layer": l["layer"], "platform": alias, "method": method,
                             "device_ms": t * 1e3, "cpu_ms": cpu * 1e3, "speedup": cpu / t})
    return rows


def cnn_main(json_path: str) -> None:
    rows = cnn_model()
    print(f"CNN layers, forward + backward, projected (GEMM: the XCL_OPT 4 PE array at {CLOCK_HZ / 1e6:.0f} MHz)")
    print_table(["model", "layer", "platform", "method", "device ms", "cpu ms", "x cpu"],
                [[r["model"], r["layer"], r["platform"], r["method"], r["device_ms"], r["cpu_ms"], r["speedup"]]
                 for r in rows])
    write_json(json_path, {"benchmark": "perf_model_cnn", "machine": machine(), "clock_hz": CLOCK_HZ,
                           "launch_s": LAUNCH_S, "rows": rows})
    plt = pyplot()
    if plt is None:
        return
    layers = list(dict.fromkeys((r["model"], r["layer"]) for r in rows))
    series = list(dict.fromkeys((r["platform"], r["method"]) for r in rows if r["method"] != "pool"))
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / (len(series) + 1)
    for i, (alias, method) in enumerate(series + [("cpu", "torch")]):
        ys = []
        for model, layer in layers:
            pts = [r for r in rows if r["model"] == model and r["layer"] == layer]
            if alias == "cpu":
                ys.append(pts[0]["cpu_ms"])
            else:
                pick = [r for r in pts if r["platform"] == alias and r["method"] in (method, "pool")]
                ys.append(pick[0]["device_ms"])
        ax.bar([j + i * width for j in range(len(layers))], ys, width,
               label=f"{alias} {method}" if alias != "cpu" else "this CPU (torch)")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(layers))])
    ax.set_xticklabels([f"{m}\n{l}" for m, l in layers], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms, forward + backward")
    ax.set_title("CNN layers: projected device time (pool layers: the window walk) vs torch on this CPU")
    ax.legend(fontsize=7)
    save_plot(fig, "cnn_layers.png")


# --- FFT (kernels/hls/fft) -------------------------------------------------------------------------
# Anchor: AMD's Vitis DSP library 1-D SSR FFT on a U250, 1024-point float32 at SSR 8, 367.6 MHz:
# 2.92 GSa/s (about 146 GFLOP/s counted as 5 N log2 N per transform).
FFT_ANCHOR = {"name": "Vitis DSP SSR FFT (U250, SSR 8, 367.6 MHz)", "gsa_per_s": 2.92}




def fft_model(n: int = 1024, batch: int = 4096, aliases=("u250", "u55c")) -> list[dict]:
    """Projected batched-FFT throughput per platform and level on the fft engine's CUs: compute (the
    row cycles above) or memory (a complex64 sample read on one master and written on the other,
    a port word a cycle each, within its bank's share) bound, whichever is lower."""
    by_alias = {p.alias: p for p in PLATFORMS.values()}
    rows = []
    for alias in aliases:
        plat = by_alias[alias]
        for level in (1, 2, 3, 4):
            img = image(level, plat)
            cus = img.cus("fft")
            streams = img.streams("v_fft_complex64")
            compute = cus * img.clock_hz * n / fft_row_cycles(n, level)  # samples / s
            per_cu = min(min(img.clock_hz * s.per_word, share[s.bundle] / s.bytes)
                         for share in bank_shares(img, "fft", cus, streams) for s in streams)
            memory = cus * per_cu
            sa = min(compute, memory)
            seconds = batch * n / sa + LAUNCH_S
            rows.append({"platform": alias, "level": level, "n": n, "batch": batch, "gsa_per_s": sa / 1e9,
                         "gflops": 5 * n * (n.bit_length() - 1) / n * sa / 1e9,
                         "bound": "compute" if compute <= memory else "memory", "device_ms": seconds * 1e3})
    return rows


def fft_main(json_path: str) -> None:
    rows = fft_model()
    print(f"batched 1024-point complex64 FFT (batch 4096), projected at {CLOCK_HZ / 1e6:.0f} MHz; anchor: "
          f"{FFT_ANCHOR['name']} {FFT_ANCHOR['gsa_per_s']} GSa/s")
    print_table(["platform", "opt", "GSa/s", "GFLOP/s", "bound", "device ms", "x anchor"],
                [[r["platform"], r["level"], r["gsa_per_s"], r["gflops"], r["bound"], r["device_ms"],
                  r["gsa_per_s"] / FFT_ANCHOR["gsa_per_s"]] for r in rows])
    write_json(json_path, {"benchmark": "perf_model_fft", "machine": machine(), "clock_hz": CLOCK_HZ,
                           "anchor": FFT_ANCHOR, "rows": rows})
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels = [f"{r['platform']}\nopt={r['level']}" for r in rows] + ["Vitis SSR FFT\nU250 (anchor)"]
    values = [r["gsa_per_s"] for r in rows] + [FFT_ANCHOR["gsa_per_s"]]
    ax.bar(range(len(values)), values, color=["C0"] * len(rows) + ["C3"])
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("GSa/s (1024-point complex64)")
    ax.set_title("Batched FFT: projected throughput per level beside the Vitis SSR FFT")
    save_plot(fig, "fft_model.png")



# --- GEMM: c = a @ b, n x n x n float32 (kernels/hls/gemm) ---------------------------------------
# Anchors, float32, published: AutoSA's systolic array on a U250 at 300 MHz with 8,320 DSPs, and
# gemm_hls (Vitis HLS, one CU) on a VU9P (the U200/U250 family's die).
GEMM_ANCHORS = [("AutoSA, U250", 938.7, 8320), ("gemm_hls, VU9P", 301.0, None)]


def gemm_model(n: int = GEMM_N, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = (),
               pe: tuple[int, int] | None = None, cus: tuple[tuple[str, int], ...] = ()) -> list[dict]:
    return [gemm_throughput(level, p, n, pe, wanted, dtypes, cus) for level in (1, 2, 3, 4)
            for p in PLATFORMS.values() if "gemm" in image(level, p, wanted, dtypes, pe, cus).engines]


def gemm_plans(n: int = GEMM_N) -> list[dict]:
    """The n^3 float32 product as a workload on each Alveo card's plan image of the GEMM alone:
    the array and CUs projection.plan_image gives it (what a matmul-bound model's plan gets)."""
    out = []
    for p in PLATFORMS.values():
        if p.embedded:
            continue
        rows = one_kernel_workload("mm", "v_gemm_float32", 1, 3 * ELEMENT_BYTES * n * n, n ** 3)
        img, build = plan_image(rows, p, ("gemm",), ("float32",))
        out.append(gemm_throughput(4, p, n, img.config.gemm_pe, ("gemm",), ("float32",),
                                   tuple(sorted(build["cus"].items()))))
    return out


def gemm_report(n: int = GEMM_N, wanted: tuple[str, ...] = (), dtypes: tuple[str, ...] = (),
                pe: tuple[int, int] | None = None, plots: bool = True,
                cus: tuple[tuple[str, int], ...] = ()) -> list[dict]:
    """Prints the GEMM projection and plots it beside the anchors (docs/img/gemm_model.png)."""
    rows = gemm_model(n, wanted, dtypes, pe, cus)
    if not rows:
        return rows
    planned = gemm_plans(n) if plots else []
    print(f"\nGEMM: projected float32 GFLOP/s for {n} x {n} x {n}, resident, {CLOCK_HZ / 1e6:.0f} MHz; DSPs of the "
          f"GEMM engine ({rows[0]['members']} member(s), one PE array a CU that they share) against the budget "
          f"({100 * resources.BUDGET:.0f}% of what the shell leaves) less the rest of the image")
    print_table(["platform", "opt", "PEs", "CUs", "DSPs", "% card", "rest", "left", "fits left", "GFLOP/s", "peak",
                 "bound", "image fits (worst)"],
                [[r["platform"], r["level"], r["pe"], r["cus"], round(r["dsps"]), 100 * r["dsp_fraction"],
                  round(r["dsp_rest"]), round(r["dsp_left"]), "yes" if r["fits_dsps"] else "no", r["gflops"],
                  r["peak_gflops"], r["bound"], r["image_fit"]] for r in rows])
    if planned:
        print(f"\nthe same product as a workload's plan (the GEMM alone: plan_image's array and CUs on each card)")
        print_table(["platform", "PEs", "CUs", "DSPs", "GFLOP/s", "peak", "bound", "image fits"],
                    [[r["platform"], r["pe"], r["cus"], round(r["dsps"]), r["gflops"], r["peak_gflops"], r["bound"],
                      r["image_fit"]] for r in planned])
    plt = pyplot() if plots else None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(11, 4))
        opt4 = [r for r in rows if r["level"] == 4]
        labels = [f"{r['platform']} opt=4\n{r['pe']} PEs" for r in opt4] + \
            [f"{r['platform']} plan\n{r['cus']}x {r['pe']}" for r in planned] + [a[0].replace(", ", "\n") for a in GEMM_ANCHORS]
        values = [r["gflops"] for r in opt4] + [r["gflops"] for r in planned] + [a[1] for a in GEMM_ANCHORS]
        colors = ["tab:blue" if r["fits_dsps"] else "tab:orange" for r in opt4] + ["tab:green"] * len(planned) + \
            ["tab:grey"] * len(GEMM_ANCHORS)
        ax.bar(labels, values, color=colors)
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
        for i, r in enumerate(opt4):
            ax.text(i, 0, f"{r['dsps']:.0f} DSP\n{max(r['dsp_left'], 0):.0f} left", ha="center", va="bottom",
                    fontsize=6, color="white")
        ax.axhline(700, color="red", lw=0.8, ls="--", label="target: 700 GFLOP/s on a U250")
        ax.set_ylabel("float32 GFLOP/s")
        ax.set_title(f"GEMM {n}^3: projected at opt=4 in the whole table's image (blue: its DSPs fit what the rest\n"
                     "leaves, orange: they do not), in a plan's image of the GEMM (green), vs published (grey)",
                     fontsize=9)
        ax.tick_params(axis="x", labelsize=6.5)
        ax.legend(fontsize=8)
        save_plot(fig, "gemm_model.png")
    return [dict(r, image="selection") for r in rows] + [dict(r, image="plan of the GEMM alone") for r in planned]


def compile_main(json_path: str, measured: str, platform: str = "u250") -> None:
    """A training step's launch and memory time on a card, eager against fused, from the launches
    and device bytes bench_compile.py counted per step: each launch costs LAUNCH_S and the bytes
    stream through one 512-bit port at the clock, capped by one bank. The GEMMs' compute, the same
    in both, is left out: the difference is what fusion saves. The convolutions' compute is not the
    same: eager's run on the GEMM kernel's PE array (their multiply-adds at PM x PN per cycle), the
    compiled step's on the conv kernels (the cycles they take as written, conv.work)."""
    from afpga.platforms import ALIASES

    plat = PLATFORMS[ALIASES.get(platform, platform)]
    pm, pn = image(4, plat).config.gemm_pe
    with open(measured, encoding="utf-8") as f:
        steps = json.load(f)["rows"]
    rate = min(CLOCK_HZ * 64, plat.bank_gbps * 1e9)  # bytes/s through one port
    rows = []
    for r in steps:
        eager_conv = r.get("conv_macs", 0) / (pm * pn) / CLOCK_HZ
        fused_conv = r.get("conv_kernel_cycles", 0) / CLOCK_HZ
        eager = r["eager_launches"] * LAUNCH_S + r["eager_kernel_bytes"] / rate + eager_conv
        fused = r["compiled_launches"] * LAUNCH_S + r["compiled_kernel_bytes"] / rate + fused_conv
        rows.append({"model": r["model"], "platform": plat.alias, "eager_ms": eager * 1e3, "fused_ms": fused * 1e3,
                     "eager_conv_ms": eager_conv * 1e3, "fused_conv_ms": fused_conv * 1e3, "speedup": eager / fused})
    print(f"projected launch + memory (+ convolution compute) time of one training step on {platform} (from {measured})")
    print_table(["model", "platform", "eager ms", "fused ms", "conv eager ms", "conv fused ms", "x"],
                [[r["model"], r["platform"], r["eager_ms"], r["fused_ms"], r["eager_conv_ms"], r["fused_conv_ms"],
                  r["speedup"]] for r in rows])
    write_json(json_path, {"benchmark": "perf_model_compile", "machine": machine(), "launch_s": LAUNCH_S,
                           "bytes_per_s": rate, "rows": rows})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1 << 24, help="elements per op (float32)")
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "perf_model.json"))
    p.add_argument("--cnn", action="store_true", help="the CNN layers' model instead (cnn_main)")
    p.add_argument("--fft", action="store_true", help="the batched FFT's model instead (fft_main)")
    p.add_argument("--compile", action="store_true", help="torch.compile's fused step beside eager (compile_main)")
    p.add_argument("--kernels", default="", help="the image's kernels, as scons kernels= (categories or ops, comma "
                                                 "separated; default the whole table)")
    p.add_argument("--dtypes", default="", help="the image's dtypes, as scons dtypes= (default all)")
    p.add_argument("--gemm-pe", default="", help="the GEMM's PE array at opt=4, PMxPN, as scons gemm_pe= (default "
                                                 "the platform's, platforms.GEMM_PE)")
    p.add_argument("--plan", default="", help="a workload plan (aten_fpga.record): its image's kernels, dtypes, GEMM "
                                              "array and CUs, as scons plan= builds it for a card (GEMM table only)")
    args = p.parse_args(argv)
    wanted = tuple(x for x in args.kernels.split(",") if x)
    dtypes = tuple(x for x in args.dtypes.split(",") if x)
    pe = tuple(int(x) for x in args.gemm_pe.split("x")) if args.gemm_pe else None
    if args.plan:
        from afpga import plan_file

        chosen = plan_file.selection(args.plan)
        gemm_report(wanted=chosen.kernels, dtypes=chosen.dtypes, plots=False, cus=chosen.cus,
                    pe=platforms.parse_gemm_pe(chosen.gemm_pe) if chosen.gemm_pe else pe)
        return 0
    image(4, PLATFORMS[platforms.DEFAULT], wanted, dtypes, pe)  # a selection of no kernel is refused before timing
    if args.compile:
        compile_main(os.path.join(ROOT, "build", "bench", "perf_model_compile.json"),
                     os.path.join(ROOT, "build", "bench", "compile.json"))
        return 0
    if args.fft:
        fft_main(os.path.join(ROOT, "build", "bench", "perf_model_fft.json"))
        return 0
    if args.cnn:
        cnn_main(os.path.join(ROOT, "build", "bench", "perf_model_cnn.json"))
        return 0
    rows = model(args.n, wanted, dtypes)
    lim = limits(wanted, dtypes)
    selection = ("kernels=" + args.kernels if wanted else "the whole table") + \
        (" dtypes=" + args.dtypes if dtypes else "")
    print(f"physical limits (data sheets): memory peak and host link per direction; the opt=4 image ({selection}): "
          "CUs of each streaming engine, GEMM CUs x PE array, whether the build's estimate says it fits")
    print_table(["platform", "memory", "peak GB/s", "PCIe Gen3 x16 GB/s", "measured GB/s", "stream CUs", "GEMM",
                 "fits (fullest)"], lim)
    print(f"\nprojected for {args.n} float32 elements per op, against this CPU's measured time")
    print("(x ceiling: the speed-up the card's memory peak alone allows, moving the op's bytes at peak)")
    print_table(["category", "opt", "platform", "CUs", "Gelem/s", "GB/s", "% peak", "bound", "device ms", "+PCIe ms",
                 "cpu ms", "x resident", "x +PCIe", "x ceiling"],
                [[r["category"], r["level"], r["platform"], r["cus"], r["gelem_per_s"], r["gbps"], r["percent_of_peak"],
                  r["bound"], r["device_ms"], r["with_transfers_ms"], r["cpu_ms"], r["speedup_resident"],
                  r["speedup_with_transfers"], r["speedup_ceiling"]] for r in rows])
    planned = plan_rows(args.n, rows) if not (wanted or dtypes) else []
    if planned:
        print(f"\nthe op alone as a workload, {args.n} elements a launch, on its plan's image at opt=4 (the CUs "
              "that serve it best within the card: aten_fpga.record, docs/workflow.md) against the whole table's")
        print_table(["category", "platform", "CUs", "GB/s", "% peak", "bound", "whole table % peak", "image fits"],
                    [[r["category"], r["platform"], r["cus"], r["gbps"], r["percent_of_peak"], r["bound"],
                      r["whole_table_percent"], r["image_fit"]] for r in planned])
    members = members_model(args.n, wanted, dtypes)
    print(f"\nmembers at opt=4, {args.n} elements: compute lanes (of the word's) against the memory")
    print_table(["member", "platform", "lanes", "of", "CUs", "Gelem/s", "GB/s", "% peak", "bound", "device ms"],
                [[r["member"], r["platform"], r["compute_lanes"], r["word_lanes"], r["cus"], r["gelem_per_s"],
                  r["gbps"], r["percent_of_peak"], r["bound"], r["device_ms"]] for r in members])
    for r in rows:
        if r["level"] == 4 and r["speedup_ceiling"] < 1:
            print(f"{r['platform']} {r['category']}: its {r['peak_gbps']:.1f} GB/s peak is below what this CPU "
                  f"reached ({r['gbps'] * r['device_ms'] / r['cpu_ms']:.1f} GB/s): no design on it is faster here; "
                  "an embedded board's own host is its processing system's CPU, not this one")
    energy = energy_rows(rows, args.n)
    print(f"\nenergy per op at {args.n} float32 (board power or TDP x time; {CPU['tdp_source']}; "
          f"{H100['name']}: {H100['tdp_w']} W TDP x measured time)")
    print_table(["op", "device", "W", "ms", "mJ", "how"],
                [[H100["ops"][e["category"]], e["device"], e["watts"], e["ms"], e["mj"], e["kind"]] for e in energy])
    # docs/img shows the default image: a selection's projection is printed and written to --json only.
    plots = not (wanted or dtypes or pe)
    gemm_rows = gemm_report(wanted=wanted, dtypes=dtypes, pe=pe, plots=plots)
    write_json(args.json, {"benchmark": "perf_model", "machine": machine(), "n": args.n, "clock_hz": CLOCK_HZ,
                           "launch_s": LAUNCH_S, "fill_cycles": FILL_CYCLES, "kernels": wanted, "dtypes": dtypes,
                           "cpu": CPU, "h100": H100, "limits": lim, "rows": rows, "members": members,
                           "energy": energy, "gemm": gemm_rows, "planned": planned})
    plt = pyplot() if plots else None
    if plt is not None:
        plot(plt, rows, energy, args.n, members)
    elif not plots:
        print("(no plots: docs/img shows the default image, not a --kernels/--dtypes/--gemm-pe selection)")
    return 0


def plot(plt, rows: list[dict], energy: list[dict], n: int, members: list[dict]) -> None:
    """docs/img/perf_model.png: speed-up per level and GB/s (% of peak) at opt=4 beside the limits;
    docs/img/perf_model_members.png: % of peak at opt=4 per member (compute lanes) and platform;
    docs/img/perf_model_energy.png: energy per op beside the CPU and the H100."""
    cats = list(dict.fromkeys(r["category"] for r in rows))
    fig, axes = plt.subplots(2, len(cats), figsize=(4.2 * len(cats), 7.6), squeeze=False)
    for ax, cat in zip(axes[0], cats):
        for level in (1, 2, 3, 4):
            pts = [r for r in rows if r["category"] == cat and r["level"] == level]
            ax.plot([r["platform"] for r in pts], [r["speedup_resident"] for r in pts], marker="o", label=f"opt={level}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(f"{cat}: x CPU (resident)", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7)
    for ax, cat in zip(axes[1], cats):
        pts = [r for r in rows if r["category"] == cat and r["level"] == 4]
        ax.bar([r["platform"] for r in pts], [r["gbps"] for r in pts], label="opt=4 projected")
        ax.scatter([r["platform"] for r in pts], [r["peak_gbps"] for r in pts], color="red", marker="_", s=400,
                   label="memory peak", zorder=3)
        for i, r in enumerate(pts):
            ax.text(i, r["gbps"], f"{r['percent_of_peak']:.0f}%", ha="center", va="bottom", fontsize=7)
        ax.axhline(PCIE_GEN3_X16_GBPS, color="grey", ls="--", lw=0.8, label="PCIe Gen3 x16 15.75")
        ax.axhline(PCIE_MEASURED_GBPS, color="grey", ls=":", lw=0.8, label="PCIe measured ~12")
        ax.set_yscale("log")
        ax.set_title(f"{cat}: GB/s at opt=4", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    save_plot(fig, "perf_model.png")
    if members:
        names = list(dict.fromkeys(r["member"] for r in members))
        aliases = list(dict.fromkeys(r["platform"] for r in members))
        lanes = {r["member"]: f"{r['compute_lanes']} of {r['word_lanes']} lanes" for r in members}
        fig, ax = plt.subplots(figsize=(10, 3.8))
        width = 0.8 / len(aliases)
        for j, alias in enumerate(aliases):
            pts = {r["member"]: r["percent_of_peak"] for r in members if r["platform"] == alias}
            ax.bar([i + j * width for i in range(len(names))], [pts.get(m, 0) for m in names], width, label=alias)
        ax.axhline(70, color="red", lw=0.8, ls="--", label="target: 70% of peak")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels([f"{m}\n{lanes[m]}" for m in names], fontsize=7)
        ax.set_ylabel("% of the card's peak memory bandwidth")
        ax.set_title(f"opt=4 members, {n} elements: compute lanes against the memory (the build's engine CUs)",
                     fontsize=9)
        ax.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        save_plot(fig, "perf_model_members.png")
    cats = [c for c in ("binary", "reduce_all") if any(e["category"] == c for e in energy)]
    if not cats:
        return
    fig, axes = plt.subplots(1, len(cats), figsize=(5 * len(cats), 3.4), squeeze=False)
    for ax, cat in zip(axes[0], cats):
        pts = [e for e in energy if e["category"] == cat]
        colors = ["tab:blue" if e["kind"] == "projected" else "tab:grey" for e in pts]
        ax.barh([e["device"] for e in pts], [e["mj"] for e in pts], color=colors)
        ax.set_xscale("log")
        ax.set_xlabel(f"mJ per {H100['ops'][cat]} of {n} float32")
        ax.set_title(f"{H100['ops'][cat]}: energy per op (W x time)", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    save_plot(fig, "perf_model_energy.png")


if __name__ == "__main__":
    sys.exit(main())
