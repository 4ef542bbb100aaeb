"""The transformer target: a 2-layer GPT-style model (tests/gpt_model.py: vocabulary 256, width 64,
4 heads, sequence 32, batch 8) trains 20 AdamW steps on "fpga".

- With dropout 0 its losses match the CPU's within 1e-4 relative.
- With dropout 0.1 training runs and is reproducible for a seed.
- The ops that still fall back to the CPU in a training step are counted and must be a subset of
  STEP_FALLBACKS, each listed with the work that removes it. The list only shrinks: the goal is
  an empty one."""
import math
import os
import sys

import pytest
import torch

import aten_fpga

sys.path.insert(0, os.path.dirname(__file__))
from gpt_model import train  # noqa: E402

# The ops of a training step (forward, backward, AdamW) that still run on the CPU, and why.
STEP_FALLBACKS = {
    # indexing and data movement (device RNG, indexing, the strided copy kernel, attention: issue 14)
    "embedding_dense_backward": "indexing: embedding's backward",
    "index_select": "indexing: embedding's forward",
    "arange.start_out": "indexing: arange",
    "cat.out": "indexing: cat",
    "_unsafe_view": "views",
    "clone": "strided copy kernel",
    "masked_fill_.Scalar": "attention's causal mask",
    "tril.out": "attention's causal mask",
    "triu.out": "attention's causal mask",
    "scatter_add.out": "indexing",
    "embedding_backward": "indexing",
    "_local_scalar_dense": "loss.item(): a read of the result, not a fallback to remove",
    # matmul / linear (the gemm kernels)
    "mm": "gemm", "mm.out": "gemm", "bmm": "gemm", "bmm.out": "gemm", "addmm": "gemm", "addmm.out": "gemm",
    "_softmax": "softmax", "_softmax.out": "softmax",
    "_softmax_backward_data": "softmax", "_softmax_backward_data.out": "softmax",
    # layer_norm, softmax, cross-entropy, GELU backward (the cnn kernels)
    "native_layer_norm": "layer_norm", "native_layer_norm_backward": "layer_norm",
    "_log_softmax": "cross-entropy", "_log_softmax.out": "cross-entropy",
    "_log_softmax_backward_data": "cross-entropy", "_log_softmax_backward_data.out": "cross-entropy",
    "nll_loss_forward": "cross-entropy", "nll_loss_forward.output": "cross-entropy",
    "nll_loss_backward": "cross-entropy", "nll_loss_backward.grad_input": "cross-entropy",
    "gelu_backward": "GELU backward", "gelu_backward.grad_input": "GELU backward",
    # dropout (device RNG)
    "native_dropout": "device RNG", "bernoulli_.float": "device RNG",
    "native_dropout_backward": "device RNG",
    # reductions the backward of broadcast adds uses, not in the table yet
    "sum.dim_IntList": "reductions",
}


def step_fallbacks(dropout=0.0):
    """Losses of 20 fpga steps, and the ops that fell back in steps 2-20 (step 1 creates the state)."""
    seen = {}

    def on_step(i):
        if i == 1:
            aten_fpga.reset_stats()

    losses = train("fpga", 20, dropout=dropout, on_step=on_step)
    for op, r in aten_fpga.stats().items():
        if r["cpu_fallback"]:
            seen[op] = r["cpu_fallback"]
    return losses, seen


def test_gpt_matches_cpu_and_falls_back_only_where_listed():
    cpu = train("cpu", 20)
    fpga, fallbacks = step_fallbacks()
    assert all(math.isfinite(l) for l in fpga)
    torch.testing.assert_close(torch.tensor(fpga), torch.tensor(cpu), rtol=1e-4, atol=0)
    assert cpu[-1] < cpu[0]  # it trains
    unexpected = sorted(set(fallbacks) - set(STEP_FALLBACKS))
    assert not unexpected, f"ops falling back in the step that STEP_FALLBACKS does not list: {unexpected}"
    # The optimizer's part of the step runs on the device: no _foreach_* op falls back.
    assert not [op for op in fallbacks if op.startswith("_foreach_")], fallbacks


def test_gpt_dropout_trains_and_is_reproducible():
    """Dropout 0.1: training runs and two runs from the same seed give the same losses. (Until the
    device RNG lands, dropout's masks come from the CPU fallback's generator, which torch.manual_seed
    seeds: the run is reproducible, but not yet on the device.)"""
    a, _ = step_fallbacks(dropout=0.1)
    b, _ = step_fallbacks(dropout=0.1)
    assert all(math.isfinite(l) for l in a)
    assert a == b
    assert a != train("cpu", 20, dropout=0.0)  # dropout changed the run
