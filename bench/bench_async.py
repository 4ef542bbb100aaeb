"""Asynchronous launches against synchronous ones (ATEN_FPGA_LAUNCH_BLOCKING=1), for a training step
of the GPT-style model (tests/gpt_model.py) and of a Hugging Face GPT-2 at random init: the step's
time, the host's time per launch, and the fraction of the step the device sat idle waiting for
the host.

    PYTHONPATH=$PWD python bench/bench_async.py [--steps 5] [--json PATH]

Each (model, mode) runs in its own interpreter (the mode is read once per process). A step is
zeroed gradients, forward with the loss, backward and an AdamW step, then torch.fpga.synchronize().
The device's busy time is the union of the intervals in the device trace (aten_fpga._C.device_trace:
every launch and device-side copy); idle = 1 - busy / step. The host's time per launch is its own
time, waiting excluded: the time to issue the step over its launches when launches are queued, and
the step's time less the device's busy time over the launches when each launch waits.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import ROOT, machine, print_table, write_json  # noqa: E402

MODELS = ["gpt", "hf-gpt2"]
MODES = {"sync": {"ATEN_FPGA_LAUNCH_BLOCKING": "1"}, "async": {"ATEN_FPGA_LAUNCH_BLOCKING": "0"}}


def build(name: str):
    """(model on fpga, a step's inputs on fpga, loss function)."""
    import torch

    torch.manual_seed(0)
    if name == "gpt":
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from gpt_model import GPT, batches

        x, y = batches(1)[0]
        return GPT(0.0).to("fpga"), (x.to("fpga"), y.to("fpga")), lambda m, a: m(*a)
    import transformers as hf

    hf.logging.set_verbosity_error()
    # GPT-2's architecture at a width the emulator trains in seconds (12 layers of 768 take minutes).
    cfg = hf.GPT2Config(n_embd=128, n_layer=4, n_head=4, vocab_size=512, n_positions=64,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ids = torch.randint(0, cfg.vocab_size, (4, 64))
    return hf.GPT2LMHeadModel(cfg).to("fpga"), (ids.to("fpga"), ids.to("fpga")), \
        lambda m, a: m(input_ids=a[0], labels=a[1]).loss


def busy_ns(entries, begin: int, end: int) -> int:
    """The union of the trace's intervals, clipped to [begin, end]."""
    total, reach = 0, begin
    for s, e in sorted((max(e[3], begin), min(e[4], end)) for e in entries):
        if e <= reach:
            continue
        total += e - max(s, reach)
        reach = e
    return total


def child(name: str, steps: int) -> dict:
    import torch

    import aten_fpga
    from aten_fpga import _C

    torch.set_num_threads(1)
    model, inputs, loss_of = build(name)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_of(model, inputs).backward()
        opt.step()

    for _ in range(2):  # the optimizer's state, the caches
        step()
    torch.fpga.synchronize()
    rows = []
    for _ in range(steps):
        aten_fpga.reset_stats()
        _C.device_trace()
        _C.set_device_trace(True)
        t0 = time.monotonic_ns()
        step()
        t1 = time.monotonic_ns()
        torch.fpga.synchronize()
        t2 = time.monotonic_ns()
        _C.set_device_trace(False)
        busy = busy_ns(_C.device_trace(), t0, t2)
        launches = sum(r["launches"] for r in aten_fpga.report().values())
        rows.append({"step": t2 - t0, "issue": t1 - t0, "busy": busy, "launches": launches})
    rows.sort(key=lambda r: r["step"])
    r = rows[len(rows) // 2]  # the median step
    host_ns = r["issue"] if not _C.launch_blocking() else r["step"] - r["busy"]
    return {"model": name, "mode": "sync" if _C.launch_blocking() else "async", "step_ms": r["step"] / 1e6,
            "issue_ms": r["issue"] / 1e6, "device_busy_ms": r["busy"] / 1e6, "idle_fraction": 1 - r["busy"] / r["step"],
            "launches": r["launches"], "host_us_per_launch": host_ns / 1e3 / max(1, r["launches"])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "async.json"))
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.steps)))
        return 0
    results = []
    for name in args.models:
        for mode, env in MODES.items():
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, "--steps", str(args.steps)],
                               env=dict(os.environ, **env), capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stderr[-3000:], file=sys.stderr)
                return 1
            results.append(json.loads(r.stdout.strip().splitlines()[-1]))
    headers = ["model", "mode", "step_ms", "issue_ms", "device_busy_ms", "idle_fraction", "launches",
               "host_us_per_launch"]
    print("A training step, synchronous (ATEN_FPGA_LAUNCH_BLOCKING=1) against asynchronous launches (median step)")
    print_table(headers, [[r[h] for h in headers] for r in results])
    load = os.getloadavg()
    write_json(args.json, {"machine": machine(), "load": load, "steps": args.steps, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
