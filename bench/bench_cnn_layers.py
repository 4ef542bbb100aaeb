"""CNN layers on the emulated device against torch on the CPU, in the same run: batch_norm
(training, forward and backward), softmax/log_softmax and cross_entropy, forward and backward, and
convolutions of each shape the device runs its own way (host/ps/fpga_conv.cpp), forward and
backward: depthwise 3x3 (stride 1 and 2) and 7x7, grouped 3x3, 1x1, and a dense 3x3 for reference.

    PYTHONPATH=$PWD python bench/bench_cnn_layers.py [--levels 4] [--repeat 3] [--json PATH]

Each figure is the median of R runs after a warm-up, and includes the result's copy to the host
(a scalar's worth: the backward's summed gradient), so every kernel has finished. The emulator runs
the HLS C++ as written (g++ -O3, CUs as threads on a shared machine), so these figures measure
the emulation, not a card. Also counts the kernel launches and CPU fallbacks of one run.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aten_fpga  # noqa: E402
from common import ROOT, machine, median_seconds, print_table, write_json  # noqa: E402


def batch_norm_step(x, w, b, rm, rv, grad):
    """Forward in training mode (running statistics updated) and backward to the input and weights."""
    xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))
    y = F.batch_norm(xr, rm, rv, wr, br, training=True, momentum=0.1, eps=1e-5)
    y.backward(grad)
    return xr.grad.sum() + wr.grad.sum() + br.grad.sum()


def cross_entropy_step(x, target, grad):
    xr = x.detach().requires_grad_()
    loss = F.cross_entropy(xr, target)
    loss.backward(grad)
    return xr.grad.sum()


def conv_step(x, w, grad, **kw):
    """conv2d forward and backward to the input and the weight."""
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    F.conv2d(xr, wr, **kw).backward(grad)
    return xr.grad.sum() + wr.grad.sum()


# (name, N, C, H, Cout, kernel, stride, padding, groups): MobileNet's and ConvNeXt's layer shapes.
CONVS = [
    ("depthwise 3x3", 8, 32, 56, 32, 3, 1, 1, 32),
    ("depthwise 3x3 stride 2", 8, 32, 56, 32, 3, 2, 1, 32),
    ("depthwise 7x7", 8, 96, 28, 96, 7, 1, 3, 96),
    ("grouped 3x3 (8 groups)", 8, 64, 28, 64, 3, 1, 1, 8),
    ("1x1", 8, 64, 28, 128, 1, 1, 0, 1),
    ("dense 3x3", 8, 32, 28, 32, 3, 1, 1, 1),
]


def cases(device: str):
    g = torch.Generator().manual_seed(0)
    put = (lambda t: t.to(device) * 1 if t.is_floating_point() else t.to(device))
    n, c, hw = 32, 64, 56
    bn = [put(torch.randn(n, c, hw, hw, generator=g)), put(torch.rand(c, generator=g) + 0.5),
          put(torch.randn(c, generator=g)), put(torch.zeros(c)), put(torch.ones(c)),
          put(torch.randn(n, c, hw, hw, generator=g))]
    logits = put(torch.randn(256, 1000, generator=g))
    target = put(torch.randint(0, 1000, (256,), generator=g))
    convs = {}
    for name, cn, cc, ch, cout, k, stride, pad, groups in CONVS:
        x, w = put(torch.randn(cn, cc, ch, ch, generator=g)), put(torch.randn(cout, cc // groups, k, k, generator=g))
        oh = (ch + 2 * pad - k) // stride + 1
        grad = put(torch.randn(cn, cout, oh, oh, generator=g))
        convs[f"conv {name} fwd+bwd {cn}x{cc}x{ch}x{ch}"] = (
            lambda x=x, w=w, grad=grad, kw=dict(stride=stride, padding=pad, groups=groups): conv_step(x, w, grad, **kw))
    return {
        **convs,
        f"batch_norm fwd+bwd {n}x{c}x{hw}x{hw}": lambda: batch_norm_step(*bn),
        "softmax(256x1000, 1)": lambda: torch.softmax(logits, 1).sum(),
        "cross_entropy fwd+bwd 256x1000": lambda: cross_entropy_step(logits, target, put(torch.tensor(1.0))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="4", help="comma-separated XCL_OPT levels (their images must be built)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "cnn_layers.json"))
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    levels = [int(v) for v in args.levels.split(",")]
    torch.set_num_threads(1)  # the CPU's single-thread figures, as the model steps compare against

    cpu = {name: median_seconds(lambda f=f: f().item(), args.repeat) for name, f in cases("cpu").items()
           if args.only in name}
    rows, results = [], []
    for level in levels:
        aten_fpga.load(level)
        for name, f in cases("fpga").items():
            if args.only not in name:
                continue
            t = median_seconds(lambda f=f: f().item(), args.repeat)
            aten_fpga.reset_stats()
            f().item()
            stats = aten_fpga.stats()
            launches = sum(s["fpga"] for s in stats.values())
            fallbacks = sum(s["cpu_fallback"] for s in stats.values())
            ratio = t / cpu[name]
            rows.append([name, level, cpu[name] * 1e3, t * 1e3, ratio, launches, fallbacks])
            results.append({"case": name, "level": level, "cpu_ms": cpu[name] * 1e3, "fpga_ms": t * 1e3,
                            "fpga_over_cpu": ratio, "ops_on_fpga": launches, "cpu_fallbacks": fallbacks})
    print_table(["case", "XCL_OPT", "CPU ms", "fpga (emu) ms", "fpga/CPU", "ops on fpga", "fallbacks"], rows)
    print(f"load average {os.getloadavg()[0]:.2f}")
    write_json(args.json, {"machine": machine(), "repeat": args.repeat, "load_average": os.getloadavg()[0],
                           "results": results})


if __name__ == "__main__":
    main()
