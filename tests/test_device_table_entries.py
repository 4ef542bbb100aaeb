"""Every table entry is computed on the device, from the device's bytes.

Each entry of native_functions_fpga.yaml (read with the codegen's own loader), for every dtype it
lists, runs in its functional, in-place (where ATen has one) and out= forms on inputs that are valid
only in device memory (made by a gather on the device, so their host shadow is stale: under
ATEN_FPGA_SANITIZE=1 it holds poison). Each form must launch a kernel and equal the CPU's result. An
op whose ATen impl reads the host shadow itself (a hard-coded kCPU kernel, a oneDNN path, a direct
loop) computes with the poison and fails here.
"""
from __future__ import annotations

import ctypes
import os
import struct

import pytest
import torch

import aten_fpga
from codegen.library import load_library
from codegen.table import kernel_of, load_table
from test_kernels_pointwise import SCALED, ULP, ULP16, scaled_error, ulp_distance
from test_kernels_reduce import WIDE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = load_table(os.path.join(ROOT, "native_functions_fpga.yaml"))
LIBRARY = load_library(os.path.join(ROOT, "kernels", "hls"))
SANITIZING = os.environ.get("ATEN_FPGA_SANITIZE", "") not in ("", "0")
POISON = struct.pack("<Q", 0x7FF47FA07FA07FA0)  # host/ps/allocator.h kPoison

# 4 x 64 elements: a whole number of ATen's vector iterations for every dtype, so ATen's scalar
# tail (which rounds differently for a few ops, see test_kernels_pointwise.py) is not involved.
SHAPE = (4, 64)

# Values for arguments that have no default (by the entry), beyond what the argument's type gives.
ARGS = {
    "clamp.out": {"min": -0.5, "max": 0.5},
    "div.out_mode": {"rounding_mode": "floor"},
    "pow.Tensor_Scalar_out": {"exponent": 3},
    "lerp.Scalar_out": {"weight": 0.3},
}


def schemas(name: str):
    return torch._C._jit_get_schemas_for_operator(f"aten::{name}")


def is_out(arg) -> bool:
    return arg.alias_info is not None and arg.alias_info.is_write and arg.kwarg_only


def signature(schema) -> list[tuple[str, str]]:
    """The (name, type) of each argument but the out= ones: equal for an op's three forms."""
    return [(a.name, str(a.type)) for a in schema.arguments if not is_out(a)]


def forms(func: str) -> dict[str, object]:
    """The entry's overload and its functional / in-place / out= siblings, by their schemas."""
    name, _, overload = func.partition(".")
    entry = next(s for s in schemas(name) if s.overload_name == overload)
    sig = signature(entry)
    found = {}
    for kind, op in (("functional", name), ("out", name), ("inplace", name + "_")):
        for s in schemas(op):
            outs = [a for a in s.arguments if is_out(a)]
            if signature(s) == sig and bool(outs) == (kind == "out"):
                packet = getattr(torch.ops.aten, op)
                found[kind] = getattr(packet, s.overload_name or "default")
                break
    return found


def value_for(arg, dtype: torch.dtype):
    """A value for an argument without a default, from its type."""
    t = str(arg.type)
    if t in ("Scalar", "number"):
        return True if dtype == torch.bool else 2 if not (dtype.is_floating_point or dtype.is_complex) else 0.75
    if t in ("int", "Optional[int]"):
        return 1
    if "List[int]" in t:
        return [1]
    if t == "bool":
        return False
    if t.startswith("Optional"):
        return None
    raise AssertionError(f"no test value for argument {arg.name}: {t}")


def device_only(cpu: torch.Tensor) -> torch.Tensor:
    """`cpu` on the device, valid only in device memory: gathered from a wider fpga tensor by a
    strided copy, which runs on the device copies (complex ones as their float parts)."""
    if cpu.is_complex():
        return torch.view_as_complex(device_only(torch.view_as_real(cpu)))
    wide = torch.stack([cpu, cpu], dim=-1).to("fpga")
    t = wide[..., 0].contiguous()
    if SANITIZING:
        assert ctypes.string_at(t.data_ptr(), 8) == POISON, "the input's host shadow is not stale"
    return t


def random(entry, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if entry.kernel == "reduce/prod":  # near 1, so products of rows stay normal
        x = torch.empty(SHAPE).uniform_(0.9, 1.1, generator=gen)
        if dtype == torch.complex64:
            x = x * torch.exp(1j * torch.empty(SHAPE).uniform_(-0.3, 0.3, generator=gen))
        return x.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, SHAPE, generator=gen).bool()
    if dtype in (torch.int32, torch.int64):
        return torch.randint(-9, 10, SHAPE, generator=gen, dtype=dtype)
    r = torch.randn(SHAPE, generator=gen) * 2
    if dtype == torch.complex64:
        return torch.complex(r, torch.randn(SHAPE, generator=gen))
    return r.to(dtype)


def arguments(entry, schema, dtype: torch.dtype, gen: torch.Generator) -> dict[str, object]:
    kwargs = {}
    for a in schema.arguments:
        if is_out(a):
            continue
        if str(a.type) == "Tensor":
            kwargs[a.name] = random(entry, torch.bool if a.name == "condition" else dtype, gen)
        elif a.name in ARGS.get(entry.func, {}):
            kwargs[a.name] = ARGS[entry.func][a.name]
        elif not a.has_default_value():
            kwargs[a.name] = value_for(a, dtype)
    return kwargs


def launches() -> int:
    """Kernels launched since reset_stats(): report()'s per-op launches where it has them, else the
    ops stats() counts as FPGA runs."""
    rows = aten_fpga.report().values()
    if any("launches" in r for r in rows):
        return sum(r.get("launches", 0) for r in rows)
    return sum(r["fpga"] for r in rows)


def assert_same(entry, actual: torch.Tensor, expected: torch.Tensor, x: torch.Tensor) -> None:
    assert actual.device.type == "fpga"
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    op = entry.kernel.split("/")[1]
    if entry.category == "reduce":  # another order than ATen's: against a wider reference, rounded once
        torch.testing.assert_close(actual, expected, equal_nan=True)
    elif op in SCALED:
        bound = SCALED[op] if expected.dtype == torch.float32 else 2.0**-10
        assert scaled_error(actual.float(), expected.float(), x.float()) <= bound
    elif (ULP if expected.dtype == torch.float32 else ULP16 if expected.dtype == torch.float16 else {}).get(op):
        bound = (ULP if expected.dtype == torch.float32 else ULP16)[op]
        worst, nan_mismatches = ulp_distance(actual, expected)
        assert nan_mismatches == 0 and worst <= bound, (worst, nan_mismatches)
    else:
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


# The kernel families whose entries this sweep makes arguments for: elementwise and reductions
# (tensors shaped alike, scalars by type). The other families (GEMM, convolution, pooling, norms,
# losses, FFT, fills, copies, indexing, random numbers, optimizers) and the entries below, whose
# arguments must agree in ways a schema does not say, run on device-only inputs under the sanitizer
# in their own tests (tests/test_kernels_*.py, tests/test_model_*.py).
GENERIC = ("unary", "binary", "ternary", "reduce")
FAMILY_TESTED = {
    "masked_fill_.Scalar", "masked_fill_.Tensor", "native_dropout_backward",  # test_kernels_index_copy, _rng
    "equal", "min", "max",  # test_kernels_fft (stft/istft)
    "tanh_backward.grad_input", "sigmoid_backward.grad_input", "elu_backward.grad_input",  # test_kernels_pointwise
    "gelu_backward.grad_input", "silu_backward.grad_input", "mish_backward",
    "hardswish_",  # in place under a functional name, and not idempotent: test_kernels_pointwise
    "_softmax_backward_data.out", "_log_softmax_backward_data.out",  # test_kernels_softmax
    "native_batch_norm", "native_batch_norm_backward", "native_layer_norm", "native_layer_norm_backward",
    "native_group_norm", "native_group_norm_backward",  # test_kernels_norm
    "nll_loss_forward.output", "nll_loss_backward.grad_input", "nll_loss2d_forward", "nll_loss2d_forward.output",
    "nll_loss2d_backward", "nll_loss2d_backward.grad_input",  # test_kernels_loss
    "_weight_norm_interface", "_weight_norm_interface_backward",  # tuples out: test_kernels_weight_norm
}
CASES = [pytest.param(e, dt, id=f"{e.func}-{dt}") for e in TABLE.entries for dt in e.dtypes
         if kernel_of(e, LIBRARY)[0] is not None and e.category in GENERIC and e.func not in FAMILY_TESTED]


@pytest.mark.parametrize("entry,dtype_name", CASES)
def test_entry_runs_on_device_bytes(entry, dtype_name):
    dtype = getattr(torch, dtype_name)
    found = forms(entry.func)
    assert "functional" in found or "out" in found, f"no functional or out= form of {entry.func}"
    gen = torch.Generator().manual_seed(0)
    schema = next(s for s in schemas(entry.func.partition(".")[0]) if s.overload_name == entry.func.partition(".")[2])
    cpu_args = arguments(entry, schema, dtype, gen)
    out_dtype = found["functional"](**cpu_args).dtype if "functional" in found else dtype
    ran = []
    for kind, op in found.items():
        cpu = dict(cpu_args)
        if kind == "inplace":
            cpu["self"] = cpu["self"].clone()
        if kind == "out":
            cpu["out"] = torch.empty(0, dtype=out_dtype)
        try:
            expected = op(**cpu)
        except RuntimeError:
            continue  # ATen refuses this form for these dtypes (e.g. an in-place comparison's cast)
        if entry.category == "reduce" and dtype in WIDE and "functional" in found:
            wide = {k: v.to(WIDE[dtype]) if isinstance(v, torch.Tensor) else v for k, v in cpu_args.items()}
            expected = found["functional"](**wide).to(expected.dtype)
        args = {k: device_only(v) if isinstance(v, torch.Tensor) else v for k, v in cpu_args.items()}
        if kind == "out":
            args["out"] = torch.empty(0, dtype=out_dtype, device="fpga")
        aten_fpga.reset_stats()
        actual = op(**args)
        s = aten_fpga.stats().get(entry.func, {"fpga": 0, "cpu_fallback": 0})
        assert s["cpu_fallback"] == 0 and launches() >= 1, (kind, aten_fpga.stats())
        assert_same(entry, actual, expected, cpu_args["self"])
        if kind == "inplace":
            assert actual is args["self"]
        ran.append(kind)
    assert ran, f"no form of {entry.func} ran"
