"""torch.compile(backend="aten_fpga") against eager "fpga" (emulated) and torch on the CPU, per
training step (gradients zeroed as optimizer.zero_grad() does -- set to None --, forward, loss,
backward; the optimizer's update, the same in both, is not in it) of the GELU MLP block, the
LayerNorm + softmax score block and the LeNet-style CNN: compile time (first call: tracing,
fusion, g++ of the fused kernels unless cached), steps/s, kernel launches and device bytes the
kernels read and write per step.

    python bench/bench_compile.py [--models mlp scores cnn] [--steps 5] [--level 4] [--json PATH]

--level loads another emulated image (scons opt=N) first: LeNet's fused kernels run unfused at
XCL_OPT 4, whose ports need rows of whole 512-bit words.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, median_seconds, print_table, write_json  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests"))
import compile_models as cm  # noqa: E402  the models the tests compile

import aten_fpga  # noqa: E402
import aten_fpga.compile as afc  # noqa: E402


def train_step(module, x, t):
    """One step from zeroed gradients: without the zeroing, each step would also launch the adds
    that accumulate every parameter's gradient into the last step's."""
    module.zero_grad(set_to_none=True)
    module(x, t).backward()


def per_step(module, x, t):
    """Launches, kernel bytes and the conv kernels' work (multiply-adds, cycles) of one step."""
    module.zero_grad(set_to_none=True)  # not counted: it launches nothing
    aten_fpga.reset_stats()
    afc.conv.WORK.update(macs=0, cycles=0)
    module(x, t).backward()
    rep = aten_fpga.report()
    return (sum(r["launches"] for r in rep.values()), sum(r["kernel_bytes"] for r in rep.values()),
            dict(afc.conv.WORK))


def bench(name: str, steps: int) -> dict:
    # Every model compiles WithLoss.forward: without a reset, dynamo's recompile limit for that one
    # code object would leave the last model running eagerly under torch.compile.
    torch._dynamo.reset()
    torch.manual_seed(0)
    base = cm.WithLoss(name, cm.MODELS[name]())
    x, t = cm.inputs(name)
    cpu = copy.deepcopy(base)
    eager = copy.deepcopy(base).to("fpga")
    compiled_module = copy.deepcopy(base).to("fpga")
    dx, dt = x.to("fpga"), t.to("fpga")
    compiled = torch.compile(compiled_module, backend="aten_fpga")
    before = dict(afc.cache.STATS)
    start = time.perf_counter()
    compiled(dx, dt).backward()
    torch.fpga.synchronize()
    compile_s = time.perf_counter() - start
    built = afc.cache.STATS["compiled"] - before["compiled"]

    def run(m, a, b):
        def step():
            train_step(m, a, b)
            if a.device.type == "fpga":
                next(m.parameters()).grad.sum().item()  # wait for the step: read one value back
        return step

    cpu_s = median_seconds(run(cpu, x, t), steps)
    eager_s = median_seconds(run(eager, dx, dt), steps)
    compiled_s = median_seconds(run(compiled, dx, dt), steps)
    eager_launches, eager_bytes, _ = per_step(eager, dx, dt)
    fused_launches, fused_bytes, conv_work = per_step(compiled, dx, dt)
    return {"model": name, "compile_s": compile_s, "kernels_built": built,
            "cpu_steps_per_s": 1 / cpu_s, "eager_steps_per_s": 1 / eager_s, "compiled_steps_per_s": 1 / compiled_s,
            "speedup_vs_eager": eager_s / compiled_s,
            "eager_launches": eager_launches, "compiled_launches": fused_launches,
            "launch_ratio": eager_launches / max(1, fused_launches),
            "eager_kernel_bytes": eager_bytes, "compiled_kernel_bytes": fused_bytes,
            "bytes_ratio": eager_bytes / max(1, fused_bytes),
            "conv_macs": conv_work["macs"], "conv_kernel_cycles": conv_work["cycles"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(cm.MODELS), choices=list(cm.MODELS))
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--level", type=int, default=4, help="the emulated image's XCL_OPT level (scons opt=N)")
    p.add_argument("--json", help="default build/bench/compile.json (compile_optN.json for another level)")
    args = p.parse_args(argv)
    aten_fpga.load(args.level)
    name = "compile.json" if args.level == 4 else f"compile_opt{args.level}.json"
    args.json = args.json or os.path.join(ROOT, "build", "bench", name)
    rows = [bench(name, args.steps) for name in args.models]
    print_table(["model", "compile s", "built", "cpu step/s", "eager step/s", "compiled step/s", "vs eager",
                 "launches eager", "compiled", "ratio", "bytes eager", "compiled", "ratio"],
                [[r["model"], r["compile_s"], r["kernels_built"], r["cpu_steps_per_s"], r["eager_steps_per_s"],
                  r["compiled_steps_per_s"], r["speedup_vs_eager"], r["eager_launches"], r["compiled_launches"],
                  r["launch_ratio"], r["eager_kernel_bytes"], r["compiled_kernel_bytes"], r["bytes_ratio"]]
                 for r in rows])
    write_json(args.json, {"machine": machine(), "image": aten_fpga.image(), "cache": afc.cache.cache_dir(),
                           "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
