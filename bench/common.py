"""Shared by the benchmarks: timing, the results table, JSON and the machine facts."""
from __future__ import annotations

import json
import os
import platform
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMG = os.path.join(ROOT, "docs", "img")


def median_seconds(fn, repeat: int, warmup: int = 1, min_time: float = 0.0) -> float:
    """Median wall time of one call, over `repeat` calls (more while under `min_time` in total)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeat or (time.perf_counter() - start) < min_time and len(times) < 100 * repeat:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def best_in_turns(fns, calls: int, turns: int = 3, warm: bool = True) -> list[tuple[float, float]]:
    """For each of `fns` (the CPU's and the device's call of one case), the least wall clock and the
    least process CPU time of its calls, in seconds: in each of `turns` turns, each function
    `calls` timed calls in a row, after a warm-up call when `warm` (else each turn's first call
    follows the other functions': cold). The turns let both sides see the same states of the
    machine, whose memory bandwidth moves by up to 2x within minutes."""
    for fn in fns:
        fn()  # the first call's allocations
    times = [[] for _ in fns]
    for _ in range(turns):
        for fn, t in zip(fns, times):
            if warm:
                fn()
            for _ in range(calls):
                start, start_cpu = time.perf_counter(), time.process_time()
                fn()
                t.append((time.perf_counter() - start, time.process_time() - start_cpu))
    return [(min(w for w, _ in t), min(c for _, c in t)) for t in times]


def machine() -> dict:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
            "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()}


def print_table(headers: list[str], rows: list[list]) -> None:
    cells = [[h for h in headers]] + [[f"{c:.3g}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for i, r in enumerate(cells):
        print("  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def write_json(path: str, doc: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")


def plot_path(name: str) -> str:
    os.makedirs(IMG, exist_ok=True)
    return os.path.join(IMG, name)


def pyplot():
    """matplotlib's pyplot, writing PNG files; None (said once) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return None
    return plt


def save_plot(fig, name: str) -> str:
    path = plot_path(name)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")
    return path


def plot_level_ratios(plt, names, levels, cpu, fpga, title: str, target: float, target_label: str, name: str,
                      log: bool = False) -> str:
    """One bar per case and level: fpga[case, level] / cpu[case], the target as a red line."""
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(names)), 3.6))
    width = 0.8 / len(levels)
    for i, level in enumerate(levels):
        ax.bar([j + i * width for j in range(len(names))], [fpga[case, level] / cpu[case] for case in names],
               width, label=f"opt={level}")
    ax.axhline(target, color="red", lw=0.8, label=target_label)
    if target != 1.0:
        ax.axhline(1.0, color="grey", lw=0.6)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, rotation=60, fontsize=7)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("fpga (emulated) / CPU time")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return save_plot(fig, name)
