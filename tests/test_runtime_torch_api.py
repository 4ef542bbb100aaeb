""""fpga" as a first-class PyTorch device: the torch.fpga module, Tensor.fpga / is_fpga,
Module.fpga, torch.save / torch.load with map_location, and autograd training that ends where
the CPU ends."""
import io

import pytest
import torch

import aten_fpga
from runtime_support import exact


def test_device_module():
    assert torch.fpga.is_available() and torch.fpga.device_count() >= 1
    assert torch.fpga.current_device() == 0
    torch.fpga.set_device(0)
    torch.fpga.set_device("fpga:0")
    torch.fpga.set_device(torch.device("fpga", 0))
    with torch.fpga.device("fpga:0"):
        assert torch.fpga.current_device() == 0
    torch.fpga.synchronize()
    torch.fpga.synchronize(0)
    assert "emulated device 0" in torch.fpga.get_device_name()
    assert torch.fpga.get_device_name(0) == torch.fpga.get_device_name(torch.device("fpga:0"))
    with pytest.raises(ValueError, match="expected an fpga device"):
        torch.fpga.set_device("cpu")
    with pytest.raises(RuntimeError, match="invalid fpga device index 5"):
        torch.fpga.set_device(5)


def test_manual_seed_makes_fpga_random_ops_reproducible():
    # The device's own generator (Philox, docs/rng.md): reproducible for a seed, not the CPU's stream.
    torch.fpga.manual_seed(1234)
    x = torch.randn(100, device="fpga")
    torch.fpga.manual_seed_all(1234)
    y = torch.randn(100, device="fpga")
    exact(y, x.cpu())
    torch.manual_seed(1234)  # seeds the fpga generator too
    exact(torch.randn(100, device="fpga"), x.cpu())
    assert torch.fpga.initial_seed() == 1234
    assert 0.5 < x.cpu().std().item() < 1.5


def test_tensor_and_module_methods():
    a = torch.randn(3, 4)
    x = a.fpga()
    assert x.is_fpga and not a.is_fpga and x.device == torch.device("fpga:0")
    exact(x, a)
    assert a.fpga(0).device == torch.device("fpga", 0)
    m = torch.nn.Linear(4, 2)
    w = m.weight.detach().clone()
    assert m.fpga() is m and m.weight.is_fpga and m.bias.is_fpga
    exact(m.weight.detach(), w)
    assert torch.device("fpga").type == "fpga" and torch.empty(1, device="fpga").is_fpga


@pytest.mark.parametrize("where", ["fpga", "fpga:0", torch.device("fpga:0"), {"cpu": "fpga:0"},
                                   lambda storage, loc: storage.fpga()],
                         ids=["str", "str-index", "device", "dict", "callable"])
def test_save_cpu_load_onto_fpga(where):
    a = torch.randn(5, 6)
    buf = io.BytesIO()
    torch.save({"w": a, "t": a[1:, ::2]}, buf)
    buf.seek(0)
    d = torch.load(buf, map_location=where)
    exact(d["w"], a)
    exact(d["t"], a[1:, ::2])
    assert d["t"].untyped_storage().data_ptr() == d["w"].untyped_storage().data_ptr()  # views stay views


def test_save_fpga_right_after_a_kernel_and_load_anywhere():
    a, b = torch.randn(1000), torch.randn(1000)
    x = a.fpga() + b.fpga()  # valid only on the device: saving must sync it
    module = torch.nn.Linear(3, 3).fpga()
    buf = io.BytesIO()
    torch.save({"x": x, "view": x[10:20], "state": module.state_dict()}, buf)
    for where, device in [(None, "fpga:0"), ("cpu", "cpu"), ("fpga", "fpga:0")]:
        buf.seek(0)
        d = torch.load(buf, map_location=where)
        assert str(d["x"].device) == device and str(d["view"].device) == device
        torch.testing.assert_close(d["x"].cpu(), a + b, rtol=0, atol=0)
        torch.testing.assert_close(d["view"].cpu(), (a + b)[10:20], rtol=0, atol=0)
        fresh = torch.nn.Linear(3, 3)
        fresh.load_state_dict(d["state"])
        torch.testing.assert_close(fresh.weight, module.weight.cpu(), rtol=0, atol=0)


def train_mlp(device, steps=20):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.randn(64, 16).to(device)
    target = torch.randn(64, 4).to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [p.detach().cpu() for p in model.parameters()], losses


def test_mlp_trains_on_fpga_to_the_cpu_weights():
    aten_fpga.reset_stats()
    cpu_params, cpu_losses = train_mlp("cpu")
    fpga_params, fpga_losses = train_mlp("fpga")
    for p, q in zip(fpga_params, cpu_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(fpga_losses), torch.tensor(cpu_losses), rtol=1e-5, atol=1e-6)
    assert fpga_losses[-1] < fpga_losses[0]  # it did learn
    stats = aten_fpga.stats()
    assert stats["addmm"]["fpga"] > 0 and stats["mm"]["fpga"] > 0  # the GEMM kernels, forward and backward
    assert not any(r["cpu_fallback"] for r in stats.values()), stats  # the whole step runs on the FPGA
