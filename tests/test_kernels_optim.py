"""Fills (kernels/hls/fill, host/ps/fpga_fill.cpp) and the multi-tensor _foreach_* kernels
(kernels/hls/multi, host/ps/fpga_foreach.cpp) on device "fpga", at every XCL_OPT level, against
PyTorch on the CPU, bit for bit; then the optimizers that use them (SGD, Adam, AdamW with
foreach=True) step for step.

Inputs are made on the device by a kernel (`* 1`), so they are valid only in device memory: a
missing sync is a wrong answer. Run with ATEN_FPGA_SANITIZE=1 where the sanitizer exists. Each
foreach op is asserted to be one kernel launch, whatever the number of tensors."""
import pytest
import torch

import aten_fpga

# Sizes: empty, shorter than a 512-bit word, not whole words, several table rows (16384 elements a row).
SHAPES = [(0,), (3,), (17, 5), (40000,), (2, 3, 4), (1,)]




def launches():
    """Kernel launches so far on device 0: every launch runs its compute unit 0."""
    activity = aten_fpga._C.cu_activity(0)
    return activity[0]["runs"] if activity else 0


def kernels_of(op):
    """The kernels `op` launched since the stats were reset, with their launch counts."""
    return aten_fpga.report().get(op, {}).get("kernels", {})


def on_device(t):
    """`t` on the fpga, produced by a kernel: valid only in device memory."""
    return t.to("fpga") == True if t.dtype == torch.bool else t.to("fpga") * 1  # noqa: E712


def cpu_lists(seed, n=len(SHAPES), positive=False):
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(SHAPES[i % len(SHAPES)], generator=g) for i in range(n)]
    return [t.abs() + 0.1 for t in out] if positive else out


def exact(actual, expected, rtol=0.0, atol=0.0):
    assert actual.device.type == "fpga"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol, equal_nan=True)


# sqrt is within 1 ulp of ATen's, which is not correctly rounded (docs/kernels.md); every other op
# is bit exact.
ULP = {"_foreach_sqrt": 2.0**-23, "_foreach_sqrt_": 2.0**-23}


def fpga_runs(op):
    return aten_fpga.stats().get(op, {"fpga": 0, "cpu_fallback": 0})


# --- fills ------------------------------------------------------------------------------------------

FILL_DTYPES = [torch.float32, torch.float16, torch.int32, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", FILL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (16,), (33, 3), (70000,)])
def test_fill_zero_ones_full(level, dtype, shape):
    value = {torch.bool: True, torch.int32: -7, torch.int64: 2**40 + 3}.get(dtype, 0.1)
    aten_fpga.reset_stats()
    exact(torch.full(shape, value, dtype=dtype, device="fpga"), torch.full(shape, value, dtype=dtype))
    exact(torch.zeros(shape, dtype=dtype, device="fpga"), torch.zeros(shape, dtype=dtype))
    exact(torch.ones(shape, dtype=dtype, device="fpga"), torch.ones(shape, dtype=dtype))
    x = on_device(torch.arange(max(1, torch.Size(shape).numel())).to(dtype))
    exact(torch.zeros_like(x), torch.zeros_like(x.cpu()))
    exact(x.fill_(value), torch.full(x.shape, value, dtype=dtype))
    stats = aten_fpga.stats()
    assert "fill_.Scalar" in stats and "zero_" in stats, stats
    assert all(stats[op]["cpu_fallback"] == 0 for op in ("fill_.Scalar", "zero_")), stats


def test_fill_views_keep_their_neighbours(level):
    """A slice ending inside a 512-bit word, a strided view and a transposed one are filled through a
    dense temporary: the elements around them keep their values."""
    base = torch.randn(40, 33)
    for view in (lambda t: t[1:5, 2:9], lambda t: t[:, 3], lambda t: t.t()[2:7], lambda t: t.view(-1)[5:11]):
        x, expected = on_device(base), base.clone()
        view(x).fill_(2.5)
        view(expected).fill_(2.5)
        exact(x, expected)
        view(x).zero_()
        view(expected).zero_()
        exact(x, expected)


def test_fill_value_conversion_and_errors(level):
    # float16: the value is rounded to half once, as ATen does (not through float first).
    v = 1.0 + 2.0**-11 + 2.0**-40
    exact(torch.full((5,), v, dtype=torch.float16, device="fpga"), torch.full((5,), v, dtype=torch.float16))
    with pytest.raises(RuntimeError, match="overflow"):
        torch.zeros(3, dtype=torch.int32, device="fpga").fill_(2**40)
    # A 0-dim value tensor on the device or on the CPU.
    x = torch.zeros(9, device="fpga")
    exact(x.fill_(on_device(torch.tensor(3.25))), torch.full((9,), 3.25))
    exact(x.fill_(torch.tensor(-1.5)), torch.full((9,), -1.5))
    with pytest.raises(RuntimeError, match="0-dimension"):
        x.fill_(torch.ones(2, device="fpga"))
    # Other dtypes run on the CPU, counted.
    aten_fpga.reset_stats()
    exact(torch.zeros(4, dtype=torch.float64, device="fpga"), torch.zeros(4, dtype=torch.float64))
    assert fpga_runs("zero_")["cpu_fallback"] == 1


def test_fill_is_one_launch_and_no_sync(level):
    x = on_device(torch.randn(50000))
    aten_fpga.reset_stats()
    before = launches()
    x.fill_(1.5)
    x.zero_()
    assert launches() - before == 2
    assert kernels_of("fill_.Scalar") == {"v_fill_float32": 1} and kernels_of("zero_") == {"v_fill_float32": 1}
    r = aten_fpga.report()
    assert r["fill_.Scalar"]["bytes_to_host"] == 0 and r["zero_"]["bytes_to_host"] == 0, r
    assert r["fill_.Scalar"]["bytes_to_device"] == 0 and r["zero_"]["bytes_to_device"] == 0, r


# --- foreach ----------------------------------------------------------------------------------------

def scalars(n):
    return [0.5 + 0.25 * i for i in range(n)]


# name: (the call on (lists, scalar list), how many input lists, in place, positive inputs)
FOREACH = {
    "_foreach_add_.Scalar": (lambda l, s: torch._foreach_add_(l[0], 0.3), 1, True, False),
    "_foreach_add.Scalar": (lambda l, s: torch._foreach_add(l[0], -1.7), 1, False, False),
    "_foreach_mul_.Scalar": (lambda l, s: torch._foreach_mul_(l[0], 0.999), 1, True, False),
    "_foreach_mul.Scalar": (lambda l, s: torch._foreach_mul(l[0], -0.1), 1, False, False),
    "_foreach_div_.Scalar": (lambda l, s: torch._foreach_div_(l[0], 0.7), 1, True, False),
    "_foreach_div_.ScalarList": (lambda l, s: torch._foreach_div_(l[0], s), 1, True, False),
    "_foreach_div.ScalarList": (lambda l, s: torch._foreach_div(l[0], s), 1, False, False),
    "_foreach_sqrt_": (lambda l, s: torch._foreach_sqrt_(l[0]), 1, True, True),
    "_foreach_sqrt": (lambda l, s: torch._foreach_sqrt(l[0]), 1, False, True),
    "_foreach_neg_": (lambda l, s: torch._foreach_neg_(l[0]), 1, True, False),
    "_foreach_neg": (lambda l, s: torch._foreach_neg(l[0]), 1, False, False),
    "_foreach_add_.List": (lambda l, s: torch._foreach_add_(l[0], l[1], alpha=-0.01), 2, True, False),
    "_foreach_add.List": (lambda l, s: torch._foreach_add(l[0], l[1], alpha=0.3), 2, False, False),
    "_foreach_maximum_.List": (lambda l, s: torch._foreach_maximum_(l[0], l[1]), 2, True, False),
    "_foreach_lerp_.Scalar": (lambda l, s: torch._foreach_lerp_(l[0], l[1], 0.1), 2, True, False),
    "_foreach_addcmul_.Scalar": (lambda l, s: torch._foreach_addcmul_(l[0], l[1], l[2], 0.001), 3, True, False),
    "_foreach_addcdiv_.Scalar": (lambda l, s: torch._foreach_addcdiv_(l[0], l[1], l[2], -0.5), 3, True, True),
    "_foreach_addcdiv_.ScalarList": (lambda l, s: torch._foreach_addcdiv_(l[0], l[1], l[2], s), 3, True, True),
}


def test_every_foreach_entry_is_tested():
    import yaml, os
    table = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "native_functions_fpga.yaml")))
    assert {k for k in table if k.startswith("_foreach_")} == set(FOREACH)


@pytest.mark.parametrize("name", sorted(FOREACH))
def test_foreach(level, name):
    call, nlists, inplace, positive = FOREACH[name]
    cpu = [cpu_lists(17 * i + len(name), positive=positive) for i in range(nlists)]
    dev = [[on_device(t) for t in l] for l in cpu]
    s = scalars(len(cpu[0]))
    expected = call(cpu, s)
    aten_fpga.reset_stats()
    before = launches()
    actual = call(dev, s)
    assert launches() - before == 1, f"{name}: one launch for {len(cpu[0])} tensors"
    assert fpga_runs(name) == {"fpga": 1, "cpu_fallback": 0}, aten_fpga.stats()
    (kernel, count), = kernels_of(name).items()
    assert kernel.startswith("v_mt_") and count == 1, kernels_of(name)
    if inplace:
        actual, expected = dev[0], cpu[0]
    for a, e in zip(actual, expected):
        exact(a, e, ULP.get(name, 0.0))
    for a, e in zip(dev[1:], cpu[1:]):  # the other inputs are untouched
        for x, y in zip(a, e):
            exact(x, y)


def test_foreach_lists_one_launch_cannot_serve(level):
    """Mixed dtypes, broadcasting and strided tensors run on the CPU, counted, with ATen's results."""
    a, b = cpu_lists(1, 3), cpu_lists(2, 3)
    b[1] = b[1][:1]  # broadcasts against a[1] in ATen's foreach
    da, db = [on_device(t) for t in a], [on_device(t) for t in b]
    aten_fpga.reset_stats()
    torch._foreach_add_(da, db, alpha=2)
    torch._foreach_add_(a, b, alpha=2)
    assert fpga_runs("_foreach_add_.List")["cpu_fallback"] == 1
    for x, y in zip(da, a):
        exact(x, y)
    x = on_device(torch.randn(6, 8))
    got = torch._foreach_mul([x.t(), x[:, ::2]], 3.0)
    for g, e in zip(got, [x.cpu().t() * 3.0, x.cpu()[:, ::2] * 3.0]):
        exact(g, e)
    with pytest.raises(RuntimeError, match="same number of tensors"):
        torch._foreach_add_(da, db[:2])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        torch._foreach_sqrt([])


# --- the optimizers ---------------------------------------------------------------------------------

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True),
    "sgd_plain": lambda p: torch.optim.SGD(p, lr=0.1, foreach=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01, foreach=True),
    "adam_amsgrad_maximize": lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True, maximize=True, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_foreach_steps(level, name):
    """Five steps on the fpga equal five on the CPU -- bit for bit for SGD; Adam's square root is
    within 1 ulp of ATen's, so its parameters are within 1e-5 relative or 1e-7 absolute -- and the step
    runs with no fallback."""
    g = torch.Generator().manual_seed(3)
    shapes = [(5, 3), (40000,), (17,), (4, 4)]
    init = [torch.randn(s, generator=g) for s in shapes]
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(5)]
    cpu = [t.clone().requires_grad_() for t in init]
    dev = [on_device(t).detach().requires_grad_() for t in init]
    opt_cpu, opt_dev = OPTIMIZERS[name](cpu), OPTIMIZERS[name](dev)
    for step in range(5):
        for p, q, gr in zip(cpu, dev, grads[step]):
            p.grad = gr.clone()
            q.grad = on_device(gr)
        aten_fpga.reset_stats()
        opt_cpu.step()
        opt_dev.step()
        fallbacks = {op: r for op, r in aten_fpga.stats().items() if r["cpu_fallback"]}
        assert not fallbacks, fallbacks
    for p, q in zip(cpu, dev):
        exact(q.detach(), p.detach(), *((0.0, 0.0) if name.startswith("sgd") else (1e-5, 1e-7)))


def test_clip_grad_norm(level):
    """clip_grad_norm_ over fpga parameters: _foreach_norm and _foreach_mul_.Tensor run ATen's
    per-tensor loop on the device's kernels; torch.stack (cat) is the one op still on the CPU. The
    norm is accumulated in double, so it is within rounding of the CPU's float sum."""
    g = torch.Generator().manual_seed(5)
    shapes = [(5, 3), (40000,), (7,)]
    grads = [torch.randn(s, generator=g) for s in shapes]
    cpu = [torch.zeros(s, requires_grad=True) for s in shapes]
    dev = [torch.zeros(s, device="fpga", requires_grad=True) for s in shapes]
    for c, d, gr in zip(cpu, dev, grads):
        c.grad, d.grad = gr.clone(), on_device(gr)
    aten_fpga.reset_stats()
    total = torch.nn.utils.clip_grad_norm_(dev, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(cpu, 1.0)
    torch.testing.assert_close(total.cpu(), expected, rtol=1e-6, atol=0)
    for c, d in zip(cpu, dev):
        exact(d.grad, c.grad, 1e-6, 1e-9)
    fallbacks = {op for op, r in aten_fpga.stats().items() if r["cpu_fallback"]}
    assert fallbacks <= {"cat.out"}, fallbacks
