"""Every pointwise kernel x dtype x XCL_OPT level against torch on the CPU.

Exactly rounded ops must be bit exact (values, NaN-ness and the sign of zeros); transcendental
ones within the ulp bound docs/kernels.md documents (ULP below). Inputs mix NaN, +-inf, +-0,
denormals and extremes with random values, at lengths 0, 1, one not a multiple of any vector
width and one past the 4096-element tile. Each run must have been counted as an FPGA run.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import aten_fpga

LENGTHS = (0, 1, 37, 4133)  # 37 and 4133: no multiple of 16/32/64 lanes; 4133 > one tile

F32, F16, C64, I32, I64, B = torch.float32, torch.float16, torch.complex64, torch.int32, torch.int64, torch.bool
ARITH = (F32, F16, C64, I32, I64)
REAL = (F32, F16, I32, I64)
CMP = (F32, F16, I32, I64, B)
INTS = (I32, I64, B)
FLOATS = (F32, F16)

# Largest distance, in units in the last place, of a transcendental kernel from torch's CPU result
# (measured with bench/ulp_pointwise.py; see docs/kernels.md). Ops not listed are bit exact.
ULP = {
    "sqrt": 1, "pow_scalar0.5": 1, "pow": 1, "pow_scalar": 1, "atan2": 1,
    "exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 2, "log1p": 1,
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1,
    "sinh": 2, "cosh": 1, "tanh": 1, "atanh": 2, "erf": 1, "erfc": 3, "sigmoid": 2, "silu": 2,
    "elu": 2, "elu_scaled": 2, "elu_backward": 2,
    "softplus": 2, "softplus_backward": 2, "mish": 3,
}
# float16: ATen computes in float and rounds, so a float difference survives as at most 1 ulp; but
# ATen's float16 erf is 0.6% off for |x| < 1e-4, where the result is a float16 subnormal (5 ulp).
ULP16 = {**{op: 1 for op in ULP}, "erf": 5}
# gelu cancels in 1 + erf(x / sqrt 2) for x < -3, and the gradients of gelu and silu change sign,
# where one ulp of erf/tanh/exp is many of the result: their bound is on the error relative to the
# operands, |fpga - cpu| <= bound * scale, with scale = |x| (forward) or |grad| * (1 + |x|)
# (gradients). float16 (forward only): 2^-10.
SCALED = {"gelu": 2.0**-21, "gelu_tanh": 2.0**-21, "gelu_backward": 2.0**-21, "gelu_backward_tanh": 2.0**-21,
          "silu_backward": 2.0**-21, "mish_backward": 2.0**-21}


@dataclass(frozen=True)
class Op:
    name: str  # test id and, for transcendental ops, the ULP key
    funcs: tuple[str, ...]  # the table entries that must have run on the FPGA
    fn: Callable  # (*tensors) -> tensor, the same on "fpga" and the CPU
    arity: int
    dtypes: tuple[torch.dtype, ...]
    zero_sign: bool = True  # whether the sign of a zero result is part of the contract
    skip: Callable | None = None  # (*tensors) -> mask of elements where ATen is not the reference


def alpha(t):
    """An alpha that exercises the fused multiply-add. float16: 0.5, because ATen's scalar tail
    rounds alpha * b to half before adding where its vector loop fuses (docs/kernels.md)."""
    if t.dtype == F16:
        return 0.5
    return 0.37 if t.dtype.is_floating_point or t.dtype.is_complex else 3


def u(name, fn, dtypes=(F32,), funcs=None):
    return Op(name, funcs or (f"{name}.out",), fn, 1, dtypes)


def b(name, fn, dtypes=(F32,), funcs=None, zero_sign=True, skip=None):
    return Op(name, funcs or (f"{name}.out",), fn, 2, dtypes, zero_sign, skip)


def scalar_tail(*xs):
    """The elements ATen's CPU loop leaves to its scalar tail: past the last whole pair of AVX-512
    vectors. Where the tail computes differently from the vector loop (pow with a scalar exponent
    raises to it in double; complex products fuse; float16 rsqrt rounds twice), our kernels follow
    the vector loop."""
    n = xs[0].numel()
    per_iteration = 2 * 64 // xs[0].element_size()
    return torch.arange(n) >= n - n % per_iteration


def nan_in_tail(i):
    """A skip: NaN operand `i` in ATen's scalar tail, which compares it the other way round from
    its vector loop (hardtanh_backward, elu_backward: the vector loop's blend takes the other branch)."""
    return lambda *xs: scalar_tail(*xs) & xs[i].isnan()


def tail_of(*dtypes):
    """A skip: the scalar tail, for operands of these dtypes only (where ATen's tail differs)."""
    return lambda x, *rest: scalar_tail(x) if x.dtype in dtypes else torch.zeros(x.shape, dtype=B)


def huge_quotient(x, y):
    """ATen's vector fmod (Sleef) returns NaN where |x / y| is near or past FLT_MAX (fmod(1, 1e-40));
    its scalar tail and IEEE give the remainder, as our kernel does (docs/kernels.md)."""
    return (x.double() / y.double()).abs() > 2.0**100


OPS = [
    # binary
    b("add", lambda x, y: torch.add(x, y, alpha=alpha(x)), ARITH),
    b("add_default_alpha", lambda x, y: x + y, ARITH, ("add.out",)),
    b("add_complex_alpha", lambda x, y: torch.add(x, y, alpha=0.5 - 0.25j), (C64,), ("add.out",)),
    b("sub", lambda x, y: torch.sub(x, y, alpha=alpha(x)), ARITH),
    b("mul", torch.mul, ARITH, skip=tail_of(C64)),
    b("div", torch.div, FLOATS),
    b("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), FLOATS, ("div.out_mode",)),
    b("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"), FLOATS, ("div.out_mode",)),
    b("remainder", torch.remainder, FLOATS, funcs=("remainder.Tensor_out",), skip=huge_quotient),
    b("fmod", torch.fmod, FLOATS, funcs=("fmod.Tensor_out",), skip=huge_quotient),
    b("pow", torch.pow, FLOATS, funcs=("pow.Tensor_Tensor_out",)),
    b("atan2", torch.atan2, FLOATS),
    b("hypot", torch.hypot, FLOATS),
    b("copysign", torch.copysign, FLOATS),
    b("xlogy", torch.xlogy, FLOATS, funcs=("xlogy.OutTensor",)),
    b("lerp_scalar", lambda x, y: torch.lerp(x, y, 0.3), (F32, F16, C64), funcs=("lerp.Scalar_out",)),
    b("lerp_scalar_large", lambda x, y: torch.lerp(x, y, 0.8), (F32, F16, C64), funcs=("lerp.Scalar_out",)),
    b("lerp_scalar_complex", lambda x, y: torch.lerp(x, y, 0.3 + 0.5j), (C64,), funcs=("lerp.Scalar_out",),
      skip=tail_of(C64)),
    # Of two equal zeros ATen's vector loop returns one, its scalar tail the other: not compared.
    b("maximum", torch.maximum, CMP, zero_sign=False),
    b("minimum", torch.minimum, CMP, zero_sign=False),
    b("fmax", torch.fmax, FLOATS, zero_sign=False),
    b("fmin", torch.fmin, FLOATS, zero_sign=False),
    *(b(f"bitwise_{o}", getattr(torch, f"bitwise_{o}"), INTS, (f"bitwise_{o}.Tensor_out",)) for o in ("and", "or", "xor")),
    *(b(f"logical_{o}", getattr(torch, f"logical_{o}"), CMP) for o in ("and", "or", "xor")),
    *(b(o, getattr(torch, o), (F32, F16, C64, I32, I64, B) if o in ("eq", "ne") else CMP, (f"{o}.Tensor_out",))
      for o in ("eq", "ne", "lt", "le", "gt", "ge")),
    *(u(f"{o}_scalar", lambda x, o=o: getattr(torch, o)(x, 0.5 if x.dtype.is_floating_point else 1), REAL,
        (f"{o}.Scalar_out",)) for o in ("eq", "ne", "lt", "le", "gt", "ge")),
    # unary
    u("abs", torch.abs, REAL),
    u("neg", torch.neg, ARITH),
    u("sign", torch.sign, REAL),
    u("logical_not", torch.logical_not, CMP),
    u("isposinf", torch.isposinf, FLOATS),
    u("isneginf", torch.isneginf, FLOATS),
    Op("sgn", ("sgn.out",), torch.sgn, 1, (F32, F16, C64, I32, I64), skip=tail_of(C64)),
    u("reciprocal", torch.reciprocal, FLOATS),
    u("sqrt", torch.sqrt, FLOATS),
    # float16: ATen's scalar tail rounds sqrt to half before dividing, its vector loop does not.
    Op("rsqrt", ("rsqrt.out",), torch.rsqrt, 1, FLOATS, skip=tail_of(F16)),
    *(u(o, getattr(torch, o), FLOATS) for o in ("floor", "ceil", "round", "trunc", "frac")),
    u("clamp", lambda x: torch.clamp(x, -2, 3), REAL),
    u("clamp_lower", lambda x: torch.clamp(x, min=-2), REAL, ("clamp.out",)),
    u("clamp_upper", lambda x: torch.clamp(x, max=3), REAL, ("clamp.out",)),
    u("clamp_min", lambda x: torch.clamp_min(x, -2), REAL),
    u("clamp_max", lambda x: torch.clamp_max(x, 3), REAL),
    u("nan_to_num", torch.nan_to_num, FLOATS),
    u("nan_to_num_given", lambda x: torch.nan_to_num(x, nan=1.5, posinf=7.0), FLOATS, ("nan_to_num.out",)),
    *(u(f"pow_scalar{e}", lambda x, e=e: torch.pow(x, e), funcs=("pow.Tensor_Scalar_out",))
      for e in (2, 3, 0.5, -0.5, -1, -2)),
    Op("pow_scalar", ("pow.Tensor_Scalar_out",), lambda x: torch.pow(x, 1.7), 1, (F32,), skip=tail_of(F32)),
    *(u(o, getattr(torch, o), FLOATS) for o in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin",
                                                "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                                                "acosh", "atanh", "sigmoid", "erf", "erfc")),
    u("silu", F.silu, FLOATS),
    # ATen's gelu(+inf) is NaN (its vector erf); ours is +inf (docs/kernels.md).
    Op("gelu", ("gelu.out",), F.gelu, 1, FLOATS, skip=lambda x: x == math.inf),
    u("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), FLOATS, ("gelu.out",)),
    # activations and their gradients (g: the incoming gradient; aten's backward ops take it first)
    u("threshold", lambda x: torch.threshold(x, 0.5, -3), REAL),
    b("threshold_backward", lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.5), REAL,
      ("threshold_backward.grad_input",)),
    u("relu", torch.relu, REAL, ("relu",)),
    u("relu_", lambda x: torch.relu_(x.clone()), REAL, ("relu_",)),
    u("hardtanh", lambda x: F.hardtanh(x, -1.5, 2.0), FLOATS, ("hardtanh",)),
    u("hardtanh_", lambda x: F.hardtanh(x.clone(), -1.5, 2.0, inplace=True), FLOATS, ("hardtanh_",)),
    u("hardtanh_out", lambda x: torch.ops.aten.hardtanh.out(x, -1.5, 2.0, out=torch.empty(0, dtype=x.dtype,
      device=x.device)), FLOATS, ("hardtanh.out",)),
    b("hardtanh_backward", lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.5, 2.0), FLOATS,
      ("hardtanh_backward",), skip=nan_in_tail(1)),
    b("hardtanh_backward_out", lambda g, x: torch.ops.aten.hardtanh_backward.grad_input(
      g, x, -1.5, 2.0, grad_input=torch.empty(0, dtype=x.dtype, device=x.device)), FLOATS,
      ("hardtanh_backward.grad_input",), skip=nan_in_tail(1)),
    b("sigmoid_backward", torch.ops.aten.sigmoid_backward, FLOATS, ("sigmoid_backward.grad_input",)),
    b("tanh_backward", torch.ops.aten.tanh_backward, FLOATS, ("tanh_backward.grad_input",)),
    # the functional silu_backward decomposes (CompositeImplicitAutograd); its out= overload is the kernel
    b("silu_backward", lambda g, x: torch.ops.aten.silu_backward.grad_input(
      g, x, grad_input=torch.empty(0, dtype=x.dtype, device=x.device)), (F32,), ("silu_backward.grad_input",)),
    b("gelu_backward", torch.ops.aten.gelu_backward, (F32,), ("gelu_backward.grad_input",)),
    b("gelu_backward_tanh", lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="tanh"), (F32,),
      ("gelu_backward.grad_input",)),
    u("leaky_relu", lambda x: F.leaky_relu(x, 0.2), FLOATS),
    b("leaky_relu_backward", lambda g, x: torch.ops.aten.leaky_relu_backward(x, g, 0.2, False), FLOATS,
      ("leaky_relu_backward.grad_input",)),
    u("elu", lambda x: F.elu(x, 1.3), FLOATS),
    u("elu_scaled", lambda x: torch.ops.aten.elu(x, 1.3, 1.05, 0.7), FLOATS, ("elu.out",)),
    b("elu_backward", lambda g, x: torch.ops.aten.elu_backward(g, 1.3, 1.05, 0.7, False, x), FLOATS,
      ("elu_backward.grad_input",), skip=nan_in_tail(1)),
    b("elu_backward_result", lambda g, y: torch.ops.aten.elu_backward(g, 1.3, 1.05, 0.7, True, y), FLOATS,
      ("elu_backward.grad_input",), skip=nan_in_tail(1)),
    # MobileNetV3's hard activations (bit exact) and the smooth ones (softplus, mish: ULP / SCALED).
    u("hardsigmoid", F.hardsigmoid, FLOATS),
    b("hardsigmoid_backward", torch.ops.aten.hardsigmoid_backward, FLOATS, ("hardsigmoid_backward.grad_input",)),
    u("hardswish", F.hardswish, FLOATS, ("hardswish",)),
    u("hardswish_", lambda x: F.hardswish(x.clone(), inplace=True), FLOATS, ("hardswish_",)),
    u("hardswish_out", lambda x: torch.ops.aten.hardswish.out(x, out=torch.empty(0, dtype=x.dtype, device=x.device)),
      FLOATS, ("hardswish.out",)),
    b("hardswish_backward", torch.ops.aten.hardswish_backward, FLOATS, ("hardswish_backward",), skip=nan_in_tail(1)),
    u("softplus", lambda x: F.softplus(x, 1.5, 10.0), FLOATS),
    b("softplus_backward", lambda g, x: torch.ops.aten.softplus_backward(g, x, 1.5, 10.0), FLOATS,
      ("softplus_backward.grad_input",)),
    u("mish", F.mish, FLOATS),
    b("mish_backward", torch.ops.aten.mish_backward, FLOATS, ("mish_backward",)),
    # mse_loss's elementwise part and its gradient (the reductions: tests/test_kernels_loss.py)
    b("mse", lambda x, y: F.mse_loss(x, y, reduction="none"), FLOATS, ("mse_loss",)),
    b("mse_out", lambda x, y: torch.ops.aten.mse_loss.out(x, y, 0, out=torch.empty(0, dtype=x.dtype, device=x.device)),
      FLOATS, ("mse_loss.out",)),
    Op("mse_backward", ("mse_loss_backward",), lambda g, x, t: torch.ops.aten.mse_loss_backward(g, x, t, 0), 3,
       FLOATS),
    Op("mse_backward_out", ("mse_loss_backward.grad_input",), lambda g, x, t: torch.ops.aten.mse_loss_backward.grad_input(
       g, x, t, 2, grad_input=torch.empty(0, dtype=x.dtype, device=x.device)), 3, FLOATS),
    # ternary
    Op("where", ("where.self",), torch.where, 3,
       (F32, F16, C64, I32, I64, B)),
    Op("where_out", ("where.self_out",),
       lambda c, x, y: torch.where(c, x, y, out=torch.empty(0, dtype=x.dtype, device=x.device)), 3, (F32, I64)),
    Op("addcmul", ("addcmul.out",), lambda x, y, z: torch.addcmul(x, y, z, value=0.37), 3, (F32, F16, C64),
       skip=tail_of(C64)),
    Op("addcmul_complex", ("addcmul.out",), lambda x, y, z: torch.addcmul(x, y, z, value=0.37 - 0.2j), 3, (C64,),
       skip=tail_of(C64)),
    Op("addcdiv", ("addcdiv.out",), lambda x, y, z: torch.addcdiv(x, y, z, value=0.37), 3, FLOATS),
    Op("lerp", ("lerp.Tensor_out",), torch.lerp, 3, FLOATS),
]


# --- inputs ----------------------------------------------------------------------------------------

FLOAT_SPECIALS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-40, -1e-45, 1.0, -1.0, 0.5, -2.5, 3.0, 1e30,
                  -3.4e38, 0.75, 2.0]


def specials(dtype: torch.dtype) -> torch.Tensor:
    if dtype == B:
        return torch.tensor([False, True])
    if dtype in (I32, I64):
        info = torch.iinfo(dtype)
        return torch.tensor([0, 1, -1, 2, -7, 3, info.max, info.min], dtype=dtype)
    if dtype == F16:
        return torch.tensor(FLOAT_SPECIALS + [6e-8, 65504.0], dtype=F32).to(F16)  # 6e-8: a float16 denormal
    vals = torch.tensor(FLOAT_SPECIALS, dtype=F32)
    if dtype == C64:
        return torch.complex(vals, vals.roll(3))
    return vals


def randoms(dtype: torch.dtype, n: int, gen: torch.Generator) -> torch.Tensor:
    if dtype == B:
        return torch.randint(0, 2, (n,), generator=gen).bool()
    if dtype in (I32, I64):
        return torch.randint(-50, 50, (n,), generator=gen, dtype=dtype)
    r = torch.randn(n, generator=gen) * 3
    if dtype == C64:
        return torch.complex(r, torch.randn(n, generator=gen))
    return r.to(dtype)


def operands(arity: int, dtype: torch.dtype, n: int, seed: int = 0) -> list[torch.Tensor]:
    """`arity` tensors of length n whose first elements pair every special value with every other
    (a cross product), the rest random."""
    gen = torch.Generator().manual_seed(seed)
    s = specials(dtype)
    combos = list(itertools.product(range(len(s)), repeat=arity))
    if arity == 3:  # the ternary ops are tested on special pairs against a random third operand
        combos = [c for c in combos if c[2] == c[0]]
    out = []
    for k in range(arity):
        head = s[torch.tensor([c[k] for c in combos])]
        out.append(torch.cat([head, randoms(dtype, max(0, n - len(head)), gen)])[:n])
    return out


# --- comparison ------------------------------------------------------------------------------------

def ordered(t: torch.Tensor) -> torch.Tensor:
    """float32 / float16 bits as integers in the floats' order, so |a - b| counts ulps."""
    bits = 16 if t.dtype == F16 else 32
    i = t.view(torch.int16 if bits == 16 else torch.int32).to(torch.int64)
    return torch.where(i < 0, -(i & ((1 << (bits - 1)) - 1)), i)


def ulp_distance(actual: torch.Tensor, expected: torch.Tensor) -> tuple[int, int]:
    """(the largest ulp distance where both float32 / float16 results are numbers, how many
    elements are NaN in one result only)."""
    nan_a, nan_e = actual.isnan(), expected.isnan()
    both = ~nan_a & ~nan_e
    worst = int((ordered(actual[both]) - ordered(expected[both])).abs().max()) if both.any() else 0
    return worst, int((nan_a != nan_e).sum())


def scaled_error(actual: torch.Tensor, expected: torch.Tensor, *args: torch.Tensor) -> float:
    """The largest |actual - expected| / scale (see SCALED; 0 where both are equal, NaN included)."""
    same = (actual == expected) | (actual.isnan() & expected.isnan())
    if same.all():
        return 0.0
    scale = args[0].abs() if len(args) == 1 else args[0].abs() * (1 + args[1].abs())
    scale = scale.clamp_min(torch.finfo(actual.dtype).tiny)  # subnormal results: one subnormal ulp is fine
    return float(((actual - expected).abs()[~same] / scale[~same]).max())


def assert_matches(op: Op, actual: torch.Tensor, expected: torch.Tensor, *args: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if op.name in SCALED:
        bound = SCALED[op.name] if expected.dtype == F32 else 2.0**-10
        error = scaled_error(actual.float(), expected.float(), *(a.float() for a in args))
        assert error <= bound, f"{op.name}: error {error} beyond its bound {bound}"
        return
    bound = (ULP if expected.dtype == F32 else ULP16 if expected.dtype == F16 else {}).get(op.name)
    if bound is not None:
        worst, nan_mismatches = ulp_distance(actual, expected)
        assert nan_mismatches == 0, f"{op.name}: NaN in one result only"
        assert worst <= bound, f"{op.name}: {worst} ulp, beyond the bound of {bound}"
        return
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    if op.zero_sign and (expected.is_floating_point() or expected.is_complex()):
        parts = (torch.view_as_real(actual), torch.view_as_real(expected)) if expected.is_complex() else (actual, expected)
        zeros = parts[1] == 0
        assert torch.equal(parts[0][zeros].signbit(), parts[1][zeros].signbit()), f"{op.name}: sign of a zero differs"


# --- tests -----------------------------------------------------------------------------------------

CASES = [pytest.param(op, dt, id=f"{op.name}-{str(dt).split('.')[1]}") for op in OPS for dt in op.dtypes]


@pytest.mark.parametrize("op,dtype", CASES)
def test_op(level, op, dtype):
    aten_fpga.reset_stats()
    for n in LENGTHS:
        args = operands(op.arity, dtype, n, seed=n)
        if op.name.startswith("where"):  # a bool condition
            args[0] = args[0] != 0 if dtype != C64 else args[0].real != 0
        expected = op.fn(*args)
        actual = op.fn(*(a.to("fpga") for a in args))
        assert actual.device.type == "fpga"
        actual = actual.cpu()
        if op.skip is not None:
            keep = ~op.skip(*args)
            assert keep.sum() >= n // 2 or n < 128  # a long tensor is mostly compared
            actual, expected, args = actual[keep], expected[keep], [a[keep] for a in args]
        assert_matches(op, actual, expected, *args)
    stats = aten_fpga.stats()
    for func in op.funcs:
        s = stats.get(func, {"fpga": 0, "cpu_fallback": 0})
        # one FPGA run per non-empty length (an empty tensor launches no kernel: no FPGA run)
        assert s["fpga"] >= sum(1 for n in LENGTHS if n) and s["cpu_fallback"] == 0, (func, s)


def test_every_table_entry_is_tested():
    """Each pointwise entry of the table is exercised above (so a new entry needs a test)."""
    import yaml

    with open(aten_fpga.__file__.rsplit("/", 2)[0] + "/native_functions_fpga.yaml") as f:
        table = yaml.safe_load(f)
    # (host: entries that only borrow a pointwise kernel -- equal, masked_fill_, dropout's backward --
    # are tested with their family)
    pointwise = {func for func, e in table.items()
                 if e["kernel"].split("/")[0] in ("unary", "binary", "ternary") and "host" not in e}
    tested = {func for op in OPS for func in op.funcs}
    assert pointwise - tested == set()


def test_broadcast_strided_and_mixed_dtypes(level):
    """Ports of other dtypes or layouts than the kernel's are made on the device, then cast back."""
    aten_fpga.reset_stats()
    x, y = torch.randn(33, 1), torch.randint(-3, 3, (1, 17))
    X, Y = x.to("fpga"), y.to("fpga")
    assert_matches(OPS[0], torch.eq(X, Y).cpu(), torch.eq(x, y))  # float vs int64 -> bool
    assert_matches(OPS[0], torch.where(X > 0, X.t().contiguous().t(), Y).cpu(), torch.where(x > 0, x, y))
    out = torch.empty(33, 17, device="fpga")  # a float out for a bool-valued op
    torch.logical_and(X, Y, out=out)
    assert_matches(OPS[0], out.cpu(), torch.logical_and(x, y).float())
    s = aten_fpga.stats()
    assert s["eq.Tensor_out"]["fpga"] == 1 and s["logical_and.out"]["fpga"] == 1 and s["where.self"]["fpga"] == 1


@pytest.mark.parametrize("case", ["channel", "row", "value"])
def test_repeating_broadcast_reads_one_block(level, case):
    """A broadcast input that repeats along the outer dims (a per-channel weight over NCHW, a row
    added to every row, a 0-dim tensor) is made dense once per block of periods, and the kernel runs
    once per block-sized chunk of the range (host/ps/fpga_kernel.cpp): bit exact, on inputs that
    are other kernels' outputs, and more than one launch."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 64, 33, 33, generator=gen) if case == "channel" else torch.randn(2049, 100, generator=gen)
    w = {"channel": torch.randn(1, 64, 1, 1, generator=gen), "row": torch.randn(100, generator=gen),
         "value": torch.randn((), generator=gen)}[case]
    X, W = (x.to("fpga") * 1), (w.to("fpga") * 1)  # device-resident: the host shadows are stale
    aten_fpga.reset_stats()
    got = torch.addcmul(X * W, X, W, value=0.5).cpu()
    torch.testing.assert_close(got, torch.addcmul(x * w, x, w, value=0.5), rtol=0, atol=0)
    report = aten_fpga.report()
    assert report["mul.out"]["fpga"] == 1 and report["mul.out"]["launches"] > 1, report["mul.out"]
    assert report["addcmul.out"]["fpga"] == 1 and report["addcmul.out"]["launches"] > 1, report["addcmul.out"]


# Each float function's edges: exp's overflow (88.7228...) and underflow (subnormal results from -87.34,
# 0 below -103.97), subnormal and signed-zero inputs, log of subnormals, tanh at its polynomial's end
# (0.55) and where it rounds to 1 (9.01), sigmoid and silu where e^-x overflows.
EDGES = [88.72283172607421875, 88.7228317260742188 + 2**-17, 88.72283935546875, 88.7228470, 89.0, 100.0,
         -87.33654022216797, -87.3365478515625, -95.0, -103.27892303466797, -103.97207641601562, -103.9721, -104.0,
         -150.0, 1e-40, -1e-40, 1.4e-45, -1.4e-45, 1e-38, 1.17549435e-38, 0.5499999523, 0.55, 0.5500000715,
         -0.55, 9.0, 9.01, 9.02, 10.0, 20.0, -20.0, 17.0, -17.0, 16.64914, -16.64914, 0.0, -0.0, math.inf,
         -math.inf, math.nan, 3.4e38, -3.4e38]


# Edges where ATen's answer depends on the host's vector ISA: the test checks the card's answer
# (docs/kernels.md, "Where ATen disagrees with itself"). ATen's AVX-512 gelu gives NaN at +inf
# (its vector erf) and overflows to inf at 3.4e38; its AVX2 and scalar loops give x at both.
CARD_ANSWERS = {"gelu": {math.inf: math.inf, 3.4e38: 3.4e38}}


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh"])
def test_float_functions_at_their_edges(level, name):
    """The afpga::math functions at their thresholds match ATen: inf, NaN and signed zeros exactly, the
    rest within the op's bound; the input is the output of another kernel (device-resident), and the
    op's kernel ran."""
    op = next(o for o in OPS if o.name == name)
    x = torch.tensor(EDGES + [-v for v in EDGES], dtype=F32)
    if name == "log":
        x = x.abs()
    aten_fpga.reset_stats()
    dev = torch.neg(torch.neg(x.to("fpga")))  # device-resident: the neg kernel's output
    actual = op.fn(dev).cpu()
    expected = op.fn(x)
    for edge, answer in CARD_ANSWERS.get(name, {}).items():
        expected[x == edge] = answer
    for special in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(special(actual), special(expected)), (name, x[special(actual) != special(expected)])
    if not name.startswith("gelu"):  # gelu's zeros (x < -9) are -0 here and +0 in ATen: not reproduced
        zeros = expected == 0
        assert torch.equal(actual[zeros].signbit(), expected[zeros].signbit()), name
    assert_matches(op, actual, expected, x)
    stats = aten_fpga.stats()
    assert stats["neg.out"]["fpga"] >= 2 and all(stats[f]["fpga"] >= 1 for f in op.funcs), stats


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_in_every_binade(level, name):
    """sin/cos read one row of their 2/pi window ROM per binade of |x| (afpga::math::sin_cos_core):
    16 random significands in every binade of both signs, subnormals to the largest float, each row
    against ATen within the op's bound; the input is another kernel's output (device-resident)."""
    op = next(o for o in OPS if o.name == name)
    gen = torch.Generator().manual_seed(7)
    exponents = torch.arange(0, 255, dtype=torch.int32).repeat_interleave(16)  # biased; 0: subnormals
    significands = torch.randint(0, 1 << 23, exponents.shape, generator=gen, dtype=torch.int32)
    bits = (exponents << 23) | significands
    x = torch.cat([bits, bits | torch.tensor(-(1 << 31), dtype=torch.int32)]).view(F32)
    aten_fpga.reset_stats()
    dev = torch.neg(torch.neg(x.to("fpga")))  # device-resident: the neg kernel's output
    assert_matches(op, op.fn(dev).cpu(), op.fn(x), x)
    stats = aten_fpga.stats()
    assert stats["neg.out"]["fpga"] >= 2 and all(stats[f]["fpga"] >= 1 for f in op.funcs), stats


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_words_of_both_kinds(level, name):
    """At XCL_OPT 4 the emulator computes a word (16 float lanes) whose lanes are all below 2^25 with
    the window row a constant, and any other word with each lane's row from the ROM
    (afpga::math::sin_cos_lanes); a lane's result must not depend on which: each word again with
    one lane replaced by a large float (2^25 and up) gives the same values in the other lanes, bit
    for bit, and within the bound."""
    op = next(o for o in OPS if o.name == name)
    gen = torch.Generator().manual_seed(11)
    words = (torch.rand(64, 16, generator=gen) - 0.5) * 2.0 ** torch.randint(-30, 25, (64, 16), generator=gen)
    words[:, 15] = 2.0**24 * (1 + 3 * torch.rand(64, generator=gen))  # [2^24, 2^26): either kind of word
    mixed = words.clone()
    mixed[:, 14] = 2.0 ** torch.arange(25, 89).float()  # each word: the rows from the ROM
    aten_fpga.reset_stats()
    alone, together = (op.fn(torch.neg(torch.neg(x.flatten().to("fpga")))).cpu().view(64, 16) for x in (words, mixed))
    others = torch.arange(16) != 14
    assert torch.equal(alone[:, others].view(torch.int32), together[:, others].view(torch.int32))
    assert_matches(op, together.flatten(), op.fn(mixed.flatten()), mixed.flatten())
    stats = aten_fpga.stats()
    assert stats[op.funcs[0]]["fpga"] >= 2
    assert stats["neg.out"]["fpga"] >= 4, stats  # both inputs were the neg kernel's output
