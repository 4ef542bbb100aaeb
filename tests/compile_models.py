"""The models torch.compile(backend="aten_fpga") is measured on (tests/test_compile_models.py,
bench/bench_compile.py): a GELU MLP block, a LayerNorm + softmax attention-score block, and the
LeNet-style CNN; each with a training step (forward, loss, backward)."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from test_model_lenet import LeNet5


class MLPBlock(nn.Module):
    """A transformer's MLP: x + fc2(gelu(fc1(x)))."""

    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


class ScoreBlock(nn.Module):
    """LayerNorm, then softmax(q k^T / sqrt(d)) of the normalized tokens: attention scores."""

    def __init__(self, d=64):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.q, self.k = nn.Linear(d, d), nn.Linear(d, d)
        self.scale = d ** -0.5

    def forward(self, x):
        h = self.norm(x)
        return torch.softmax(self.q(h) @ self.k(h).transpose(-1, -2) * self.scale, dim=-1)


def inputs(name: str, seed: int = 0, batch: int = 8):
    """(x, target) on the CPU for model `name`."""
    g = torch.Generator().manual_seed(seed)
    if name == "mlp":
        return torch.randn(batch, 32, 64, generator=g), torch.randn(batch, 32, 64, generator=g)
    if name == "scores":
        return torch.randn(batch, 32, 64, generator=g), torch.softmax(torch.randn(batch, 32, 32, generator=g), -1)
    return torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g)


MODELS = {"mlp": MLPBlock, "scores": ScoreBlock, "cnn": LeNet5}


def loss_of(name: str, out, target):
    return F.cross_entropy(out, target) if name == "cnn" else F.mse_loss(out, target)


def step(name: str, model, x, target):
    """One training step's forward and backward; returns the loss (gradients are in model)."""
    loss = loss_of(name, model(x), target)
    loss.backward()
    return loss


class WithLoss(nn.Module):
    """The model and its loss as one module, so the loss's ops are in the compiled graphs too."""

    def __init__(self, name, model):
        super().__init__()
        self.name, self.model = name, model

    def forward(self, x, target):
        return loss_of(self.name, self.model(x), target)
