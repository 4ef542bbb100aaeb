"""The fused optimizers (_fused_adam_, _fused_adamw_, _fused_sgd_: torch.optim.Adam/AdamW/SGD with
fused=True) on device "fpga", at every XCL_OPT level: each step is one launch of a multi-tensor
kernel (kernels/hls/fused_adam, fused_sgd) over the whole parameter list, and its results are ATen's
CPU fused kernels', bit for bit, step after step -- but for the last numel % VEC elements of each
tensor, which ATen computes in a scalar loop that the compiler contracted differently from its
vector loop (ATen's step is not the same function of an element everywhere): there, within TAIL.

Parameters and gradients are made on the device by a kernel (`* 1`), so they are valid only in
device memory: a missing sync is a wrong answer. Run with ATEN_FPGA_SANITIZE=1."""
import pytest
import torch

import aten_fpga

# Shapes: shorter than a 512-bit word, not whole words, several table rows (16384 elements a row).
SHAPES = [(3,), (17, 5), (40000,), (2, 3, 4), (1,), (64, 16)]
STEPS = 5
# Floats per vector of ATen's CPU loop (AVX512: 16, else 8) and the tolerance of its scalar tail.
VEC = 16 if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else 8
TAIL = dict(rtol=1e-5, atol=1e-6)


def on_device(t):
    """`t` on the fpga, produced by a kernel: valid only in device memory."""
    return t.to("fpga") * 1


def runs(op):
    return aten_fpga.stats().get(op, {"fpga": 0, "cpu_fallback": 0})


# name: (optimizer class, its options, the ATen op a step calls)
CONFIGS = {
    "adam": (torch.optim.Adam, dict(lr=1e-2), "_fused_adam_"),
    "adam_wd_maximize": (torch.optim.Adam, dict(lr=3e-3, weight_decay=0.1, maximize=True), "_fused_adam_"),
    "adam_amsgrad": (torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=0.01, amsgrad=True),
                     "_fused_adam_"),
    "adamw": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1), "_fused_adamw_"),
    "adamw_amsgrad": (torch.optim.AdamW, dict(lr=1e-3, eps=1e-6, amsgrad=True), "_fused_adamw_"),
    "sgd": (torch.optim.SGD, dict(lr=0.1), "_fused_sgd_"),
    "sgd_momentum_wd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.01), "_fused_sgd_"),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3), "_fused_sgd_"),
    "sgd_dampening_maximize": (torch.optim.SGD, dict(lr=0.02, momentum=0.5, dampening=0.1, maximize=True),
                               "_fused_sgd_"),
}


def exact(actual, expected):
    assert actual.device.type == "fpga" and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def like_aten(actual, expected):
    """Bit exact on ATen's vector body, within TAIL on its scalar tail."""
    assert actual.device.type == "fpga" and actual.shape == expected.shape
    a, e = actual.cpu().reshape(-1), expected.reshape(-1)
    body = e.numel() - e.numel() % VEC
    torch.testing.assert_close(a[:body], e[:body], rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(a[body:], e[body:], equal_nan=True, **TAIL)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fused_step_matches_cpu(level, name):
    cls, options, op = CONFIGS[name]
    g = torch.Generator().manual_seed(len(name))
    cpu_params = [torch.randn(s, generator=g) for s in SHAPES]
    dev_params = [on_device(p) for p in cpu_params]
    cpu_opt = cls(cpu_params, fused=True, **options)
    dev_opt = cls(dev_params, fused=True, **options)
    for step in range(STEPS):
        grads = [torch.randn(s, generator=g) for s in SHAPES]
        for p, d, gr in zip(cpu_params, dev_params, grads):
            p.grad, d.grad = gr.clone(), on_device(gr)
        cpu_opt.step()
        aten_fpga.reset_stats()
        dev_opt.step()
        report = aten_fpga.report()
        assert report[op]["launches"] == 1, f"{name} step {step}: one launch for {len(SHAPES)} tensors: {report[op]}"
        assert runs(op) == {"fpga": 1, "cpu_fallback": 0}, aten_fpga.stats()
        for p, d in zip(cpu_params, dev_params):
            like_aten(d, p)
            for key, value in cpu_opt.state[p].items():
                if key != "step":
                    like_aten(dev_opt.state[d][key], value)
        if "step" in dev_opt.state[dev_params[0]]:  # Adam's steps, counted on the device
            assert [float(dev_opt.state[d]["step"]) for d in dev_params] == [step + 1.0] * len(SHAPES)


def test_grad_scale_falls_back_counted(level):
    """A GradScaler step (grad_scale, found_inf) is not in the kernel: it runs on the CPU, counted."""
    g = torch.Generator().manual_seed(3)
    cpu = [[torch.randn(s, generator=g) for s in SHAPES] for _ in range(4)]
    cpu[3] = [v.abs() for v in cpu[3]]  # exp_avg_sq
    steps = [torch.tensor(2.0) for _ in SHAPES]
    dev = [[on_device(t) for t in l] for l in cpu]
    dev_steps = [on_device(s) for s in steps]
    scale, found = torch.tensor(4.0), torch.tensor(0.0)
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    aten_fpga.reset_stats()
    torch._fused_adam_(*dev, [], dev_steps, grad_scale=on_device(scale), found_inf=on_device(found), **kw)
    torch._fused_adam_(*cpu, [], steps, grad_scale=scale, found_inf=found, **kw)
    assert runs("_fused_adam_") == {"fpga": 0, "cpu_fallback": 1}, aten_fpga.stats()
    for dl, cl in zip(dev, cpu):
        for d, c in zip(dl, cl):
            exact(d, c)


def test_mismatched_lists_are_an_error(level):
    p = [on_device(torch.randn(4)), on_device(torch.randn(5))]
    with pytest.raises(RuntimeError, match="same number of tensors"):
        torch._fused_sgd_(p, p[:1], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
                          maximize=False, is_first_step=False)
