"""From a model to a card (docs/workflow.md): run one training step of a model the project did not
write, at random init, on "fpga" inside aten_fpga.record, write its plan, and print the step's
projected time and energy on a U250 and a U55C beside this machine's CPU step.

    python examples/plan_model.py resnet18 [-o plan_resnet18.yaml] [--batch 2]
    python examples/plan_model.py gpt2     (GPT-2 small config, a 128-token sequence)
    python examples/plan_model.py vit      (ViT-B/16 config, 224 x 224)

The models come from Hugging Face transformers' configs (ResNetConfig, GPT2Config, ViTConfig), with
random weights: nothing is downloaded.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import yaml

import aten_fpga
from aten_fpga import projection

CPU_TDP_W = 280  # this machine's package TDP as bench/perf_model.py takes it (EPYC 7763; assumed)


def model_and_batch(name: str, batch: int):
    """The model (random init) and a function making its step's loss from the model."""
    import transformers as tf

    torch.manual_seed(0)
    if name == "resnet18":
        m = tf.ResNetForImageClassification(tf.ResNetConfig(
            depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512], layer_type="basic", num_labels=1000))
        x, y = torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,))
        return m, lambda m, dev: m(pixel_values=x.to(dev), labels=y.to(dev)).loss
    if name == "gpt2":
        m = tf.GPT2LMHeadModel(tf.GPT2Config())  # 12 layers, 768 wide, 12 heads: GPT-2 small
        ids = torch.randint(0, 50257, (batch, 128))
        return m, lambda m, dev: m(input_ids=ids.to(dev), labels=ids.to(dev)).loss
    if name == "vit":
        m = tf.ViTForImageClassification(tf.ViTConfig(num_labels=1000))  # ViT-B/16
        x, y = torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,))
        return m, lambda m, dev: m(pixel_values=x.to(dev), labels=y.to(dev)).loss
    raise SystemExit(f"unknown model {name!r}: choose resnet18, gpt2 or vit")


def step(m, loss_of, dev: str) -> float:
    m.zero_grad(set_to_none=True)
    loss = loss_of(m, dev)
    loss.backward()
    return loss.item()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=("resnet18", "gpt2", "vit"))
    p.add_argument("-o", "--output", help="the plan file (default plan_<model>.yaml)")
    p.add_argument("--batch", type=int, default=1)
    a = p.parse_args(argv)
    out = a.output or f"plan_{a.model}.yaml"
    m, loss_of = model_and_batch(a.model, a.batch)
    m.train()
    cpu_loss = step(m, loss_of, "cpu")  # warm
    times = []
    for _ in range(3):
        t = time.perf_counter()
        step(m, loss_of, "cpu")
        times.append(time.perf_counter() - t)
    cpu_s = statistics.median(times)
    m.to("fpga")
    aten_fpga.reset_stats()
    with aten_fpga.record(out, workload=f"examples/plan_model.py {a.model} --batch {a.batch}: one training step"):
        t = time.perf_counter()
        fpga_loss = step(m, loss_of, "fpga")
        emu_s = time.perf_counter() - t
    print(f"{a.model}: loss cpu {cpu_loss:.4f}, fpga {fpga_loss:.4f}; plan written to {out}")
    stats = aten_fpga.stats()
    fpga_ops = sum(1 for r in stats.values() if r["fpga"])
    falls = {op: r["cpu_fallback"] for op, r in stats.items() if r["cpu_fallback"]}
    print(f"ops on fpga: {fpga_ops}; fell back: {len(falls)} ({', '.join(sorted(falls))})")
    with open(out, encoding="utf-8") as f:
        build = yaml.safe_load(f)["build"]
    kernels, dtypes = tuple(build["kernels"]), tuple(build["dtypes"])
    rows = aten_fpga.report()
    print(f"{'device':24} {'step ms':>10} {'energy mJ':>10}  kernels / host link / CPU fallbacks (ms)")
    print(f"{'this CPU':24} {cpu_s * 1e3:10.1f} {CPU_TDP_W * cpu_s * 1e3:10.0f}  (measured; {CPU_TDP_W} W TDP)")
    print(f"{'emulator':24} {emu_s * 1e3:10.1f} {'-':>10}  (the recorded step, for reference)")
    planned = {}
    for alias in ("u250", "u55c"):
        platform = projection.platform_of(alias)
        # the whole table's image (the build's defaults), then the plan's: its kernels, with the
        # CUs and GEMM array that serve this step best on the card (projection.plan_image)
        planned[alias], entries = projection.plan_image(rows, platform, kernels, dtypes)
        for what, img in (("whole table", projection.loaded_image(alias)), ("plan", planned[alias])):
            parts = [projection.op_seconds(r, img) for r in rows.values()]
            total = sum(x["seconds"] for x in parts)
            split = "/".join(f"{sum(x[k] for x in parts) * 1e3:.1f}" for k in ("kernel_seconds", "link_seconds",
                                                                               "cpu_seconds"))
            print(f"{alias + ', ' + what:24} {total * 1e3:10.1f} {projection.board_watts(img) * total * 1e3:10.0f}  "
                  f"{split}" + (f"  ({projection.fit_summary(img.fit)}; {entries})" if what == "plan" else ""))
    img = planned["u250"]
    print("where the time goes on the U250, the plan's image (top 8 ops):")
    on_card = {op: projection.op_seconds(r, img) for op, r in rows.items()}
    for op, r in sorted(rows.items(), key=lambda kv: -on_card[kv[0]]["seconds"])[:8]:
        s = on_card[op]
        print(f"  {op:40} {s['seconds'] * 1e3:8.2f} ms  (kernels {s['kernel_seconds'] * 1e3:.2f}, link "
              f"{s['link_seconds'] * 1e3:.2f}, cpu {s['cpu_seconds'] * 1e3:.2f}; {r['launches']} launches)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
