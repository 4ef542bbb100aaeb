"""Mixed precision on "fpga", the host side (host/ps/autocast.cpp, aten_fpga/device.py):
torch.autocast("fpga") with PyTorch's shared autocast op lists, and torch.amp.GradScaler("fpga").
Ops without a kernel for the autocast dtype (every bfloat16 op, today) run through the counted CPU
fallback; results are compared with the same casts done on the CPU."""
from __future__ import annotations

import pytest
import torch

import aten_fpga
from runtime_support import op_report


def test_autocast_is_available_and_names_its_dtypes():
    assert torch.amp.is_autocast_available("fpga")
    assert torch.fpga.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    with torch.autocast("fpga", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("fpga") and torch.get_autocast_dtype("fpga") == torch.bfloat16
    assert not torch.is_autocast_enabled("fpga")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matrix_products_run_in_the_autocast_dtype(fresh_stats, dtype):
    a, b, w, bias = torch.randn(8, 16), torch.randn(16, 4), torch.randn(5, 16), torch.randn(5)
    x = torch.neg(torch.neg(a.to("fpga")))  # a kernel's output, float32
    with torch.autocast("fpga", dtype=dtype):
        mm = torch.mm(x, b.to("fpga"))
        lin = torch.nn.functional.linear(x, w.to("fpga"), bias.to("fpga"))
    assert mm.dtype == lin.dtype == dtype
    # the same casts, then the op in that dtype, on the CPU
    torch.testing.assert_close(mm.cpu(), torch.mm(a.to(dtype), b.to(dtype)))
    torch.testing.assert_close(lin.cpu(), torch.nn.functional.linear(a.to(dtype), w.to(dtype), bias.to(dtype)))
    assert op_report("mm")["fpga"] + op_report("mm")["cpu_fallback"] + op_report("mm.out")["fpga"] + \
        op_report("mm.out")["cpu_fallback"] >= 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sensitive_ops_run_in_float32_and_mixed_inputs_promote(dtype):
    h = torch.randn(1000).to(dtype)
    x = torch.neg(torch.neg(h.to("fpga")))  # a lower-precision kernel output
    f = torch.randn(1000)
    with torch.autocast("fpga", dtype=dtype):
        e = torch.exp(x)
        s = torch.softmax(x, 0)
        total = x.sum()
        p = torch.addcmul(f.to("fpga"), x, x)
    assert e.dtype == s.dtype == total.dtype == p.dtype == torch.float32
    torch.testing.assert_close(e.cpu(), torch.exp(h.float()))
    torch.testing.assert_close(s.cpu(), torch.softmax(h.float(), 0))
    torch.testing.assert_close(total.cpu(), h.float().sum())
    torch.testing.assert_close(p.cpu(), torch.addcmul(f, h.float(), h.float()))


def test_ops_outside_the_lists_keep_their_dtype_and_autocast_stays_per_device():
    x = torch.randn(100).to("fpga")
    with torch.autocast("fpga", dtype=torch.float16):
        r = torch.relu(x)
        cpu = torch.mm(torch.randn(2, 3), torch.randn(3, 2))  # autocast("fpga") leaves the CPU alone
    assert r.dtype == torch.float32 and cpu.dtype == torch.float32


def test_binary_cross_entropy_is_refused_with_the_fix():
    p, t = torch.rand(10).to("fpga"), torch.rand(10).to("fpga")
    with torch.autocast("fpga", dtype=torch.float16), pytest.raises(RuntimeError, match="BCEWithLogitsLoss"):
        torch.nn.functional.binary_cross_entropy(p, t)


def _train(device: str, steps: int, poison_step: int | None = None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device, init_scale=1024.0, growth_interval=2)
    data = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(steps)]
    scales = []
    for i, (xb, yb) in enumerate(data):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
        scaler.scale(loss).backward()
        if i == poison_step:
            model[0].weight.grad.view(-1)[3] = float("inf")
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return [p.detach().cpu() for p in model.parameters()], scales


def test_grad_scaler_trains_as_on_the_cpu_and_skips_a_step_with_inf_gradients(fresh_stats):
    params, scales = _train("fpga", 5, poison_step=2)
    ref_params, ref_scales = _train("cpu", 5, poison_step=2)
    # growth every 2 clean steps, halved at the inf step (whose update is skipped)
    assert scales == ref_scales == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q, rtol=2e-3, atol=2e-3)
    ran = aten_fpga.stats()
    for op in ("_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_"):
        assert ran[op]["fpga"] + ran[op]["cpu_fallback"] == 5, (op, ran.get(op))
