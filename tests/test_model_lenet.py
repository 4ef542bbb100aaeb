"""LeNet-5 (28x28, batch 32: conv, ReLU, max-pool, linear, cross-entropy) trains 20 SGD steps on
"fpga"; its weights match the CPU's within 1e-4 relative. The ops of a step that still fall back to
the CPU must be a subset of LENET_FALLBACKS: each kernel family that lands (GEMM, losses and
activation gradients, optimizer) removes its ops from the list, and the test then keeps them off
the CPU for good. The goal is an empty list."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import aten_fpga

# What a LeNet step still runs on the CPU, and which kernel family takes it off:
LENET_FALLBACKS: set[str] = set()  # none: GEMM, convolution, pooling, ReLU, cross-entropy and fills are kernels


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def batches(steps, batch=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g))
            for _ in range(steps)]


def train(model, data, device):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in data:
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
    return loss


def fallbacks():
    return {op for op, s in aten_fpga.stats().items() if s["cpu_fallback"] > 0}


def test_lenet_trains_20_steps_like_the_cpu():
    torch.manual_seed(0)
    cpu = LeNet5()
    dev = copy.deepcopy(cpu).to("fpga")
    data = batches(20)
    train(cpu, data[:1], "cpu")
    aten_fpga.reset_stats()
    train(dev, data[:1], "fpga")  # one step: what it launches and what falls back
    step = aten_fpga.stats()
    fell_back = fallbacks()
    for op in ("convolution_overrideable", "convolution_backward_overrideable", "max_pool2d_with_indices",
               "max_pool2d_with_indices_backward"):
        assert op not in fell_back, (op, step.get(op))
    kernels = {k for r in aten_fpga.report().values() for k in r["kernels"]}  # launched in the step
    for k in ("v_im2col_float32", "v_col2im_float32", "v_max_pool2d_float32", "v_max_pool2d_backward_float32"):
        assert k in kernels, (k, sorted(kernels))
    assert fell_back <= LENET_FALLBACKS, f"new CPU fallbacks in the LeNet step: {sorted(fell_back - LENET_FALLBACKS)}"
    train(cpu, data[1:], "cpu")
    train(dev, data[1:], "fpga")
    for (name, a), (_, b) in zip(dev.named_parameters(), cpu.named_parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=1e-5, msg=name)
