"""One training step (SGD, cross entropy) of torchvision CNNs at random init on "fpga" (emulated)
against torch on the CPU with one thread: the step ratio, kernel launches, CPU fallbacks, and the
ops the device step spends most time in. The issue's target: every model within 3x the CPU's
single-thread step.

    PYTHONPATH=$PWD python bench/bench_cnn_models.py [--models mobilenet_v3_small ...]
        [--batch 4] [--size 64] [--steps 3] [--level 4] [--json PATH]

Models default to mobilenet_v3_small, efficientnet_b0 and convnext_tiny (depthwise convolutions,
1x1 convolutions), with resnet18 as the im2col + GEMM reference. The emulator runs the HLS C++
(g++ -O3, CUs as threads), so these are emulation figures, not a card's.
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import types

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, best_in_turns, machine, print_table, write_json  # noqa: E402

import aten_fpga  # noqa: E402


def torchvision_models():
    """torchvision.models. A torchvision wheel whose C++ ops do not match the installed torch fails
    at import in its meta registrations, which only the detection ops (nms, roi_align) use: the
    classification models need none of them, so they are skipped in that case."""
    try:
        import torchvision
    except RuntimeError:
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        import torchvision
    return torchvision.models


def step_fn(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        next(model.parameters()).sum().item()  # wait for the step: read one value back
    return step


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="*", default=["mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "resnet18"])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--size", type=int, default=64, help="input height and width")
    p.add_argument("--steps", type=int, default=2, help="timed steps per turn (the least of 3 turns counts)")
    p.add_argument("--level", type=int, default=4)
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "cnn_models.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    models = torchvision_models()
    aten_fpga.load(args.level)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, 3, args.size, args.size, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    rows, top = [], {}
    for name in args.models:
        torch.manual_seed(0)
        base = getattr(models, name)(num_classes=10)
        cpu_step = step_fn(copy.deepcopy(base), x, y)
        step = step_fn(copy.deepcopy(base).to("fpga"), x.to("fpga"), y.to("fpga"))
        step()  # warm up: kernel lookups, the allocator's cache
        aten_fpga.reset_stats()
        step()
        rep = aten_fpga.report()
        # The CPU's and the device's steps in turns, the least wall time of each: on a shared
        # machine both see the same states of its load.
        (cpu_s, _), (fpga_s, _) = best_in_turns([cpu_step, step], args.steps)
        fallbacks = sum(r["cpu_fallback"] for r in rep.values())
        launches = sum(r["launches"] for r in rep.values())
        rows.append([name, cpu_s * 1e3, fpga_s * 1e3, fpga_s / cpu_s, launches, fallbacks])
        top[name] = sorted(((op, r["fpga_seconds"] + r["cpu_seconds"]) for op, r in rep.items()), key=lambda t: -t[1])[:6]
    print(f"training step, batch {args.batch} x 3 x {args.size} x {args.size}, XCL_OPT {args.level}, "
          f"least of 3 turns of {args.steps}; load average {os.getloadavg()[0]:.2f}")
    print_table(["model", "CPU ms (1 thread)", "fpga (emu) ms", "fpga/CPU", "launches", "fallbacks"], rows)
    for name, ops in top.items():
        print(f"{name}: " + ", ".join(f"{op} {s * 1e3:.0f} ms" for op, s in ops))
    write_json(args.json, {"benchmark": "cnn_models", "machine": machine(), "batch": args.batch, "size": args.size,
                           "level": args.level, "load_average": os.getloadavg()[0],
                           "rows": [dict(zip(["model", "cpu_ms", "fpga_ms", "ratio", "launches", "fallbacks"], r))
                                    for r in rows], "top_ops": top})
    return 0


if __name__ == "__main__":
    sys.exit(main())
