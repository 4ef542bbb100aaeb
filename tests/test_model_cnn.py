"""A small CNN (Conv2d, BatchNorm2d, MaxPool2d, Linear, cross-entropy, SGD with momentum) trains on
"fpga" to the weights it reaches on the CPU from the same start. Convolutions reach the counted CPU
fallback through convolution_overrideable until they get a kernel; the rest mixes kernels and
fallbacks."""
import copy

import torch
from torch import nn

import aten_fpga
from aten_fpga.conformance import device_only

STEPS = 4


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 3 * 3, 10),
    )


def train(model: nn.Module, batches) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_cnn_trains_to_the_cpu_weights():
    torch.manual_seed(1)
    batches = [(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))) for _ in range(STEPS)]
    cpu_model = make_model()
    fpga_model = copy.deepcopy(cpu_model).to("fpga")
    aten_fpga.reset_stats()
    # the fpga batches are valid only in device memory, as if a data pipeline on the device made them
    fpga_losses = train(fpga_model, [(device_only(x), device_only(y)) for x, y in batches])
    cpu_losses = train(cpu_model, batches)

    torch.testing.assert_close(fpga_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    for (name, p_fpga), p_cpu in zip(fpga_model.state_dict().items(), cpu_model.state_dict().values()):
        assert p_fpga.device.type == "fpga", name
        torch.testing.assert_close(p_fpga.cpu(), p_cpu, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    stats = aten_fpga.stats()
    conv = {op: r for op, r in stats.items() if "convolution" in op}
    assert conv and all(r["fpga"] > 0 and r["cpu_fallback"] == 0 for r in conv.values()), conv  # im2col + GEMM
    fallbacks = {op for op, r in stats.items() if r["cpu_fallback"]}
    assert fallbacks <= STILL_ON_THE_CPU, fallbacks


# What the CNN's step still runs on the CPU (counted): nothing, since GEMM, convolution, pooling,
# batch norm, the losses and the optimizer's foreach ops run as kernels.
STILL_ON_THE_CPU: set[str] = set()
