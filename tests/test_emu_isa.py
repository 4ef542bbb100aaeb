"""The emulated kernels give the same bits whatever the host's vector ISA. The default image is
compiled for the host (-march=native: AVX2 on some machines of this kind, AVX-512 on others); this
builds the same image for x86-64-v3 (AVX2) with `scons march=x86-64-v3` and runs a sample of every
family -- each pointwise op x dtype on special and random values, the reductions, GEMM, softmax,
the norms, convolution, pooling, the fused optimizer -- on both images from device-resident inputs,
comparing the results bit for bit (a NaN's sign and payload aside). On an AVX2 host the two builds differ in tuning only; on an
AVX-512 host this is the check that the card's answer does not depend on where it is emulated."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import aten_fpga
from codegen.plan import ROOT
from test_kernels_pointwise import OPS, operands

MARCH = "x86-64-v3"


@pytest.fixture(scope="module")
def avx2_image():
    r = subprocess.run([sys.executable, "-m", "SCons", "-Q", "opt=4", f"march={MARCH}", "xclbin"], cwd=ROOT,
                       capture_output=True, text=True, timeout=3000)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    folder = os.path.join(ROOT, "build", "emu", f"opt4-{MARCH}")
    yield folder
    aten_fpga.load(4)


def on_device(t: torch.Tensor) -> torch.Tensor:
    """`t` as the output of a kernel: valid only in device memory."""
    return t.to("fpga").clone() if t.dtype == torch.bool else torch.neg(torch.neg(t.to("fpga")))


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bits of `t`, NaNs made one NaN: IEEE 754 leaves a NaN result's sign and payload open, and
    x86 takes them from whichever NaN operand g++ placed first (a - NaN, NaN * inf), an order its
    tuning picks; every other value must match to the bit."""
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.is_floating_point():
        t = torch.where(t.isnan(), torch.full_like(t, float("nan")), t)
        t = t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def pointwise_cases():
    for op in OPS:
        for dtype in op.dtypes:
            args = operands(op.arity, dtype, 4133, seed=3)
            if op.name.startswith("where"):
                args[0] = args[0] != 0 if not dtype.is_complex else args[0].real != 0
            yield f"{op.name}-{dtype}", op.funcs, op.fn, args


def family_cases():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, 300, generator=g)
    w, b = torch.randn(300, generator=g), torch.randn(300, generator=g)
    a, m = torch.randn(96, 80, generator=g), torch.randn(80, 72, generator=g)
    img, k = torch.randn(2, 3, 17, 19, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    yield "sum", ("sum.IntList_out",), lambda t: t.sum(1), [x]
    yield "mean0", ("mean.out",), lambda t: t.mean(0), [x]
    yield "var", ("var.correction",), lambda t: t.var(1), [x]
    yield "norm", ("linalg_vector_norm.out",), lambda t: torch.linalg.vector_norm(t, 3.0, dim=1), [x]
    yield "prod", ("prod.int_out",), lambda t: (t * 0.1 + 1).prod(1), [x]
    yield "amax", ("amax.out",), lambda t: t.amax(0), [x]
    yield "argmax", ("argmax.out",), lambda t: t.argmax(1), [x]
    yield "mm", ("mm",), torch.mm, [a, m]
    yield "mm_half", ("mm",), torch.mm, [a.half(), m.half()]
    yield "softmax", ("_softmax.out",), lambda t: torch.softmax(t, 1), [x]
    yield "log_softmax", ("_log_softmax.out",), lambda t: torch.log_softmax(t, 1), [x]
    yield "layer_norm", ("native_layer_norm",), lambda t, w, b: F.layer_norm(t, (300,), w, b), [x, w, b]
    yield "conv2d", ("convolution_overrideable",), lambda t, k: F.conv2d(t, k, padding=1), [img, k]
    yield "max_pool2d", ("max_pool2d_with_indices",), lambda t: F.max_pool2d(t, 2), [img]
    yield "gelu_backward", ("gelu_backward.grad_input",), lambda g, t: torch.ops.aten.gelu_backward(g, t), [x, w.expand(64, 300)]


def run(cases):
    """Each case's result (on the CPU), and the funcs that did not run as a kernel."""
    results, missing = {}, []
    for name, funcs, fn, args in cases():
        aten_fpga.reset_stats()
        results[name] = fn(*map(on_device, args)).cpu()
        stats = aten_fpga.stats()
        missing += [(name, f) for f in funcs if stats.get(f, {}).get("fpga", 0) == 0]
    return results, missing


@pytest.mark.parametrize("cases", [pointwise_cases, family_cases], ids=["pointwise", "families"])
def test_same_bits_on_avx2_as_on_the_host(avx2_image, cases):
    aten_fpga.load(4)
    host, host_missing = run(cases)
    aten_fpga.load(avx2_image)
    assert aten_fpga.image().startswith(avx2_image)
    avx2, avx2_missing = run(cases)
    aten_fpga.load(4)
    assert not host_missing and not avx2_missing, (host_missing, avx2_missing)  # every case ran as a kernel
    differ = [name for name in host if not torch.equal(bits(host[name]), bits(avx2[name]))]
    assert not differ, f"results that depend on the host's ISA: {differ}"
    assert len(host) >= (40 if cases is pointwise_cases else 15)
