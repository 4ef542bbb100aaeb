"""Every op of the table, over every dtype ATen has: a kernel or the counted fallback, never worse.

For each entry of native_functions_fpga.yaml and each dtype, the sweep builds the op's arguments from
its schema (torchgen's, through the codegen), runs the op on the CPU and on "fpga" (inputs resident
on the device: gathered there by a strided copy, which is a copy kernel where the dtype has one) and
requires the same result -- bit-exact for integer and bool results, `assert_close` with NaNs equal
for floating ones -- or, where the CPU raises, the same exception type. Every fpga run that returns
must be counted for the op: a kernel run (stats()[op]["fpga"]) or a fallback (["cpu_fallback"]).
Runs on the default image only (the routing does not depend on the level).

No entry is exempt. Arguments a schema cannot say (shapes that must agree, index tensors, option
values) come from RULES; the partial exceptions are RANDOM (the device draws other numbers than the
CPU: dtype, shape and exception compared, not values), CPU_EQUIVALENT (the `*_overrideable` hooks
raise on the CPU by design: compared with what they stand for) and ROUNDED_ONCE (addr's float16
reference is the exact product rounded once, as the GEMM kernel computes it).
"""
from __future__ import annotations

import collections
import os

import pytest
import torch

import aten_fpga
from codegen.native import load_native
from codegen.table import load_table

# complex32 is ATen's own experimental dtype; its warning is not what the sweep is about.
pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = load_table(os.path.join(ROOT, "native_functions_fpga.yaml"))
NATIVE = load_native()

# All of ATen's dtypes that hold numbers: ints of every width and sign, every float (the float8
# formats too) and complex. Not swept: the quantized, bits and packed float4 dtypes, which have no
# arithmetic kernels on the CPU but their own quantized ops.
DTYPES = (torch.bool, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
          torch.complex32, torch.complex64, torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2,
          torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu)

SHAPE = (4, 4)  # every generic tensor argument: square, so that mm and the FFTs (2^k) take it too


# ---- argument values ----------------------------------------------------------------------------

class T:
    """A tensor argument: `dtype` (default: the swept dtype) and shape. `kind`: "perm" for an index
    tensor, each row distinct values below `high` (default shape[-1]; unique, so that scatter and
    index_put_ have one order), "below" for int64 values below `high`, "positive" for values in [0.5, 1.5)."""

    def __init__(self, *shape, dtype=None, kind=None, high=None):
        self.shape, self.dtype, self.kind, self.high = shape, dtype, kind, high

    def make(self, dtype, gen):
        dtype = self.dtype or dtype
        if self.kind == "perm":
            n = self.shape[-1]
            rows = torch.stack([torch.randperm(self.high or n, generator=gen)[:n]
                                for _ in range(int(torch.tensor(self.shape[:-1]).prod()))])
            return rows.reshape(self.shape)
        if self.kind == "below":
            return torch.randint(0, self.high, self.shape, generator=gen)
        if self.kind == "positive":
            return (torch.rand(self.shape, generator=gen) + 0.5).to(dtype)
        return values(dtype, self.shape, gen)


def values(dtype: torch.dtype, shape, gen) -> torch.Tensor:
    """Random values representable in `dtype`; integers are never 0 (no division by zero)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        low = 1 if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else -9
        v = torch.randint(low, 10, shape, generator=gen)
        return torch.where(v == 0, 1, v).to(dtype)
    r = torch.randn(shape, generator=gen) * 2
    if dtype.is_complex:
        return torch.complex(r, torch.randn(shape, generator=gen)).to(dtype)
    return r.to(dtype)


def scalar(dtype: torch.dtype):
    return True if dtype == torch.bool else 0.75 if dtype.is_floating_point or dtype.is_complex else 2


def generic(arg, dtype: torch.dtype):
    """A value for an argument from its type alone (None: leave it to its default)."""
    t = str(arg.type)
    if arg.default is not None and t not in ("Tensor", "Tensor[]"):
        return None
    if t == "Tensor":
        return T(*SHAPE, dtype=torch.bool if arg.name in ("condition", "mask") else None,
                 kind="perm" if arg.name == "index" else None)
    if t == "Tensor[]":
        return [T(*SHAPE), T(*SHAPE)]
    if t == "Scalar":
        return scalar(dtype)
    if t == "Scalar[]":
        return [scalar(dtype)] * 2
    if t == "ScalarType":
        return dtype
    if t in ("int", "SymInt"):
        return 1
    if t == "float":
        return 0.5
    if t == "bool":
        return False
    if t == "bool[3]":
        return [True, True, True]
    if t.startswith(("int[", "SymInt[")):  # int[1]? dim, int[2] padding, SymInt[] dim
        n = t.split("[", 1)[1].split("]", 1)[0]
        return [1] * (int(n) if n else 1)
    if t.endswith("?"):
        return None
    raise AssertionError(f"no generic value for argument {arg.name}: {t}; give the op a rule in RULES")


def rows(n):
    """n distinct indices below 4 (into a dim of SHAPE)."""
    return T(n, kind="perm", high=4)


NCHW = (1, 2, 4, 4)
# Per op (the base name, for all its overloads): the arguments a schema cannot say -- shapes that
# must agree, index tensors, valid option values. Everything else is generic.
RULES = {
    "div": {"rounding_mode": "floor"},
    "clamp": {"min": -0.5, "max": 0.5},
    "bmm": {"self": T(2, 4, 4), "mat2": T(2, 4, 4)},
    "baddbmm": {"self": T(2, 4, 4), "batch1": T(2, 4, 4), "batch2": T(2, 4, 4)},
    "addmv": {"self": T(4), "vec": T(4)},
    "addr": {"vec1": T(4), "vec2": T(4)},
    "dot": {"self": T(4), "tensor": T(4)},
    "convolution_overrideable": {"input": T(*NCHW), "weight": T(3, 2, 3, 3), "bias": T(3), "stride": [1, 1],
                                 "padding": [1, 1], "dilation": [1, 1], "output_padding": [0, 0]},
    "convolution_backward_overrideable": {"grad_output": T(1, 3, 4, 4), "input": T(*NCHW), "weight": T(3, 2, 3, 3),
                                          "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
                                          "output_padding": [0, 0]},
    "max_pool2d_with_indices": {"self": T(*NCHW), "kernel_size": [2, 2]},
    "max_pool2d_with_indices_backward": {"grad_output": T(1, 2, 2, 2), "self": T(*NCHW), "kernel_size": [2, 2],
                                         "stride": [2, 2], "padding": [0, 0], "dilation": [1, 1],
                                         "indices": T(1, 2, 2, 2, kind="below", high=2)},
    "avg_pool2d": {"self": T(*NCHW), "kernel_size": [2, 2]},
    "avg_pool2d_backward": {"grad_output": T(1, 2, 2, 2), "self": T(*NCHW), "kernel_size": [2, 2],
                            "stride": [2, 2], "padding": [0, 0], "count_include_pad": True},
    "_adaptive_avg_pool2d": {"self": T(*NCHW), "output_size": [2, 2]},
    "_adaptive_avg_pool2d_backward": {"grad_output": T(1, 2, 2, 2), "self": T(*NCHW)},
    "fill_": {"value": T()},
    "index_select": {"index": rows(3)},
    "embedding_dense_backward": {"grad_output": T(5, 4), "indices": T(5, kind="below", high=6), "num_weights": 6,
                                 "padding_idx": -1},
    "masked_fill_": {"value": T()},
    "scatter": {"reduce": "add"},
    "index": {"indices": [rows(3)]},
    "_index_put_impl_": {"indices": [rows(4)], "values": T(4, 4)},
    # dim 1: each input lands in a strided slice, which a copy kernel writes (a slice along dim 0
    # is one device-to-device DMA, which launches no kernel for the stats to count)
    "cat": {"dim": 1},
    "arange": {"start": 0, "end": 6, "step": 1},
    "randperm": {"n": 6},
    "native_dropout": {"train": True},
    "nll_loss_forward": {"self": T(4, 5), "target": T(4, kind="below", high=5), "ignore_index": -100},
    "nll_loss_backward": {"grad_output": T(), "self": T(4, 5), "target": T(4, kind="below", high=5),
                          "ignore_index": -100, "total_weight": T(kind="positive")},
    "nll_loss2d_forward": {"self": T(2, 3, 2, 2), "target": T(2, 2, 2, kind="below", high=3), "ignore_index": -100},
    "nll_loss2d_backward": {"grad_output": T(), "self": T(2, 3, 2, 2), "target": T(2, 2, 2, kind="below", high=3),
                            "ignore_index": -100, "total_weight": T(kind="positive")},
    "native_batch_norm": {"input": T(2, 3, 2, 2), "weight": T(3), "bias": T(3), "running_mean": T(3),
                          "running_var": T(3, kind="positive"), "training": True, "momentum": 0.1, "eps": 1e-5},
    "native_batch_norm_backward": {"grad_out": T(2, 3, 2, 2), "input": T(2, 3, 2, 2), "weight": T(3),
                                   "save_mean": T(3), "save_invstd": T(3, kind="positive"), "train": True,
                                   "eps": 1e-5},
    "native_layer_norm": {"normalized_shape": [4], "weight": T(4), "bias": T(4), "eps": 1e-5},
    "native_layer_norm_backward": {"normalized_shape": [4], "mean": T(4, 1), "rstd": T(4, 1, kind="positive"),
                                   "weight": T(4), "bias": T(4)},
    "native_group_norm": {"input": T(2, 4, 2, 2), "weight": T(4), "bias": T(4), "N": 2, "C": 4, "HxW": 4,
                          "group": 2, "eps": 1e-5},
    "native_group_norm_backward": {"grad_out": T(2, 4, 2, 2), "input": T(2, 4, 2, 2), "mean": T(2, 2),
                                   "rstd": T(2, 2, kind="positive"), "weight": T(4), "N": 2, "C": 4, "HxW": 4,
                                   "group": 2},
    "_fft_c2r": {"last_dim_size": 6},
    "unfold_backward": {"grad_in": T(3, 4, 2), "input_sizes": [4, 4], "dim": 0, "size": 2, "step": 1},
    # amsgrad=False: no max_exp_avg_sqs
    "_fused_adam_": {"max_exp_avg_sqs": [], "state_steps": [T(dtype=torch.float32, kind="positive")] * 2,
                     "lr": 0.01, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.0},
    "_fused_adamw_": {"max_exp_avg_sqs": [], "state_steps": [T(dtype=torch.float32, kind="positive")] * 2,
                      "lr": 0.01, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.01},
    "_fused_sgd_": {"lr": 0.01, "momentum": 0.9, "dampening": 0.0},
    # the norms over every dim but 0: one per row (a g of another shape leaves ATen's CPU norms unset)
    "_weight_norm_interface": {"g": T(4, 1), "dim": 0},
    "_weight_norm_interface_backward": {"saved_g": T(4, 1), "saved_norms": T(4, 1, kind="positive"), "dim": 0},
    "_cummax_helper": {"indices": T(4, 4, dtype=torch.int64), "dim": 1},
    "_cummin_helper": {"indices": T(4, 4, dtype=torch.int64), "dim": 1},
}

# The overrideable hooks raise on the CPU by design (a backend overrides them): the reference is
# their CPU equivalent, which the fallback runs too (host/ps/fallback.cpp).
CPU_EQUIVALENT = {
    "convolution_overrideable": lambda **a: torch.ops.aten.convolution(**a),
    "convolution_backward_overrideable":
        lambda **a: torch.ops.aten.convolution_backward(bias_sizes=[a["weight"].shape[0]], **a),
}

# Random ops draw from the device's generator, not the CPU's: only the dtype, shape and exception
# type are compared.
RANDOM = {"uniform_", "normal_", "exponential_", "bernoulli_", "random_", "randperm", "native_dropout"}


# The GEMM kernel accumulates float16 in float and rounds once; ATen's CPU addr rounds the outer
# product to half first (several half ulps off where the sum cancels): the float16 reference is
# the CPU's float32 result, rounded once.
ROUNDED_ONCE = {"addr"}


def base(func: str) -> str:
    return func.partition(".")[0]


def arguments(func: str, dtype: torch.dtype, gen) -> dict[str, object]:
    """The op's CPU arguments for `dtype` (out= arguments excluded)."""
    f = NATIVE.functions[func].func
    rule = RULES.get(base(func).rstrip("_"), RULES.get(base(func), {}))
    kwargs = {}
    for a in (*f.arguments.flat_positional, *f.arguments.flat_kwarg_only):
        v = rule[a.name] if a.name in rule else generic(a, dtype)
        if v is None:
            continue
        if isinstance(v, T):
            v = v.make(dtype, gen)
        elif isinstance(v, list) and v and isinstance(v[0], T):
            v = [t.make(dtype, gen) for t in v]
        kwargs[a.name] = v
    return kwargs


# ---- running -------------------------------------------------------------------------------------

SIBLINGS = collections.defaultdict(list)  # a signature's overloads: functional, in-place, out=
for _name, _fn in NATIVE.functions.items():
    SIBLINGS[_fn.func.signature()].append(_fn.func)


def packet(f):
    return getattr(getattr(torch.ops.aten, str(f.name.name)), f.name.overload_name or "default")


def out_dtypes(func: str, cpu_args, dtype: torch.dtype) -> list[torch.dtype]:
    """The dtype of each out= argument: what the op's functional sibling returns on the CPU (the
    swept dtype where it has none or it raises)."""
    f = NATIVE.functions[func].func
    outs = f.arguments.out
    functional = next((s for s in SIBLINGS[f.signature()] if s.kind().name == "functional"), None)
    if functional is not None:
        try:
            r = packet(functional)(**clone(cpu_args))
            r = r if isinstance(r, (tuple, list)) else (r,)
            if len(r) == len(outs):
                return [t.dtype for t in r]
        except Exception:  # noqa: BLE001 -- the out= overload then raises, or not, on its own
            pass
    return [dtype] * len(outs)


def clone(args):
    """A copy of the arguments (in-place ops write their `self`)."""
    def one(v):
        if isinstance(v, torch.Tensor):
            return v.clone()
        return [one(x) for x in v] if isinstance(v, list) else v
    return {k: one(v) for k, v in args.items()}


def on_device(v):
    """`v` on the device, written there by a kernel where one exists: a strided gather of a wider
    tensor (a copy kernel for the dtypes that have one, else the counted fallback)."""
    if isinstance(v, list):
        return [on_device(x) for x in v]
    if not isinstance(v, torch.Tensor):
        return v
    wide = torch.stack([v, v], dim=-1).to("fpga")
    return wide[..., 0].contiguous()


def call(func: str, args, outs, device: str):
    f = NATIVE.functions[func].func
    kwargs = {k: on_device(v) if device == "fpga" else v for k, v in clone(args).items()}
    for a, dt in zip(f.arguments.out, outs):
        kwargs[a.name] = torch.empty(0, dtype=dt, device=device)
    run = CPU_EQUIVALENT[func] if device == "cpu" and func in CPU_EQUIVALENT else packet(f)
    try:
        result = run(**kwargs)
    except Exception as e:  # noqa: BLE001 -- the exception is the result to compare
        return e, kwargs
    # In-place ops that return nothing (the _foreach_ and fused ones): what they wrote.
    return (result if result is not None else kwargs["self"]), kwargs


NO_CLOSE = {torch.complex32: torch.complex64, **{t: torch.float32 for t in DTYPES if "float8" in str(t)}}


def compare(actual, expected, values: bool, where: str):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, values, f"{where}[{i}]")
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected, (where, actual, expected)
        return
    assert actual.device.type == "fpga", (where, actual.device)
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), (where, actual.dtype, actual.shape)
    if not values:
        return
    a, e = actual.cpu(), expected
    if a.dtype in NO_CLOSE:  # assert_close has no tolerances for these: compared widened, exactly
        a, e = a.to(NO_CLOSE[a.dtype]), e.to(NO_CLOSE[a.dtype])
        torch.testing.assert_close(a, e, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{where}: {m}")
    elif a.dtype.is_floating_point or a.dtype.is_complex:
        torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m: f"{where}: {m}")
    else:
        assert torch.equal(a, e), (where, a, e)


CASES = [pytest.param(e, id=e.func) for e in TABLE.entries]


@pytest.mark.parametrize("entry", CASES)
def test_every_dtype_runs_or_falls_back(entry):
    failures = []
    for dtype in DTYPES:
        gen = torch.Generator().manual_seed(0)
        args = arguments(entry.func, dtype, gen)
        outs = out_dtypes(entry.func, args, dtype)
        expected, _ = call(entry.func, args, outs, "cpu")
        if base(entry.func) in ROUNDED_ONCE and dtype == torch.float16:
            wide = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
            expected = call(entry.func, wide, [torch.float32] * len(outs), "cpu")[0].half()
        aten_fpga.reset_stats()
        actual, _ = call(entry.func, args, outs, "fpga")
        where = f"{entry.func} {dtype}"
        try:
            if isinstance(expected, Exception) or isinstance(actual, Exception):
                assert type(actual) is type(expected), f"cpu: {expected!r}, fpga: {actual!r}"
                continue
            s = aten_fpga.stats().get(entry.func, {"fpga": 0, "cpu_fallback": 0})
            assert s["fpga"] + s["cpu_fallback"] >= 1, f"not counted: {aten_fpga.stats()}"
            compare(actual, expected, base(entry.func).rstrip("_") not in RANDOM and base(entry.func) not in RANDOM,
                    where)
        except AssertionError as e:
            failures.append(f"{where}: {str(e)[:300]}")
    assert not failures, "\n".join(failures)
