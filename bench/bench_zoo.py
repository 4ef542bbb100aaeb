"""The zoo's training steps (tests/test_zoo.py: Hugging Face models from small configs at random
init) on "fpga" (emulated), eager and under torch.compile(backend="aten_fpga"), against torch on
the CPU with one thread, all in one process: the step's wall time, kernel launches and CPU
fallbacks per step.

    python bench/bench_zoo.py [--models gpt2 resnet ...] [--steps 3] [--turns 3] [--json PATH]

A step is zeroed gradients, forward with the model's own loss, and backward. Its time is the least
of `--turns` turns of `--steps` steps, eager's and compiled's turns taking turns (the machine is
shared: the least is the step without the others' load, and both see the same load swings). The configs are the
test's: small, so a step is many short kernels and the per-launch cost weighs more than it would
at full size.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, best_in_turns, machine, print_table, pyplot, save_plot, write_json  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
from test_zoo import MODELS, no_dropout  # noqa: E402  the models the test trains

import aten_fpga  # noqa: E402


def step_fn(model, inputs, device):
    args = {k: v.to(device) for k, v in inputs.items()}

    def step():
        model.zero_grad(set_to_none=True)
        model(**args).loss.backward()
        if device != "cpu":
            torch.fpga.synchronize()
    return step


def counted(step) -> tuple[int, int]:
    """Kernel launches and CPU fallbacks of one step."""
    aten_fpga.reset_stats()
    step()
    stats = aten_fpga.stats().values()
    return sum(s["fpga"] for s in stats), sum(s["cpu_fallback"] for s in stats)


def bench(zoo, steps: int, turns: int) -> dict:
    torch._dynamo.reset()
    torch.manual_seed(0)
    cls, cfg = zoo.build()
    base = cls(no_dropout(cfg)).train()
    inputs = zoo.inputs(cfg)
    cpu = step_fn(copy.deepcopy(base), inputs, "cpu")
    eager = step_fn(copy.deepcopy(base).to("fpga"), inputs, "fpga")
    compiled = step_fn(torch.compile(copy.deepcopy(base).to("fpga"), backend="aten_fpga"), inputs, "fpga")
    compiled()  # tracing and the fused kernels' g++, not timed
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        [(t_cpu, _)] = best_in_turns([cpu], steps, turns)
    finally:
        torch.set_num_threads(threads)
    (t_eager, _), (t_compiled, _) = best_in_turns([eager, compiled], steps, turns)
    (l_eager, f_eager), (l_compiled, f_compiled) = counted(eager), counted(compiled)
    return {"model": zoo.name, "cpu_ms": 1e3 * t_cpu, "eager_ms": 1e3 * t_eager, "compiled_ms": 1e3 * t_compiled,
            "eager_launches": l_eager, "compiled_launches": l_compiled,
            "eager_fallbacks": f_eager, "compiled_fallbacks": f_compiled}


def plot(rows: list[dict]) -> None:
    """The step against the CPU's single-thread step, eager and compiled, per model; the issue's
    targets (3x, 2x for the transformers) as lines."""
    plt = pyplot()
    if plt is None:
        return
    names = [r["model"] for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(names)), 3.6))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], [r["eager_ms"] / r["cpu_ms"] for r in rows], 0.4, label="eager fpga")
    ax.bar([i + 0.2 for i in x], [r["compiled_ms"] / r["cpu_ms"] for r in rows], 0.4, label="compiled fpga")
    for level, label in ((3, "target 3x"), (2, "target 2x (transformers)")):
        ax.axhline(level, color="red", linestyle="--" if level == 2 else "-", linewidth=1, label=label)
    ax.set_xticks(list(x), names, rotation=30, ha="right")
    ax.set_ylabel("step / CPU 1-thread step")
    ax.set_title("The zoo's training steps on the emulator")
    ax.legend(fontsize=7)
    save_plot(fig, "zoo_steps.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=[z.name for z in MODELS], choices=[z.name for z in MODELS])
    ap.add_argument("--steps", type=int, default=3, help="timed steps per turn")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "zoo.json"))
    args = ap.parse_args(argv)
    rows = [bench(z, args.steps, args.turns) for z in MODELS if z.name in args.models]
    print_table(["model", "cpu 1t ms", "eager ms", "eager/cpu", "compiled ms", "compiled/eager",
                 "launches eager", "compiled", "reduction", "fallbacks eager", "compiled"],
                [[r["model"], r["cpu_ms"], r["eager_ms"], r["eager_ms"] / r["cpu_ms"], r["compiled_ms"],
                  r["compiled_ms"] / r["eager_ms"], r["eager_launches"], r["compiled_launches"],
                  r["eager_launches"] / max(r["compiled_launches"], 1), r["eager_fallbacks"],
                  r["compiled_fallbacks"]] for r in rows])
    reduction = statistics.median(r["eager_launches"] / max(r["compiled_launches"], 1) for r in rows)
    print(f"median launch reduction under torch.compile: {reduction:.2f}x")
    write_json(args.json, {"machine": machine(), "steps": args.steps, "turns": args.turns, "rows": rows,
                           "median_launch_reduction": reduction})
    plot(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
