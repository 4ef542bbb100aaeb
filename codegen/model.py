"""The data model of the FPGA dispatch table and the kernel library.

Everything here is a frozen dataclass: parsed once, validated at the edge (table.py, library.py),
then handed to the pure generators.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from .abi import DTYPES, LEVEL_NAMES, LEVELS, REAL_DTYPES, WORD_BITS, DType  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class Location:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class TableError(Exception):
    """A mistake in a table or template file, reported as `file:line: message`."""

    def __init__(self, loc: Location | None, message: str):
        self.loc = loc
        self.message = message
        super().__init__(f"{loc}: {message}" if loc else message)


# The ABI table (dtypes, levels) lives in abi.py; the model names them from there.

# Ops whose element function is costly in area: transcendental functions and divisions, each a
# large float operator (a float exp is ~7 DSPs against an add's 2). Kernel.compute_lanes builds
# fewer lanes of them; the build's resource model (site_scons/afpga/resources.py) prices them so.
COSTLY_OPS = frozenset("""exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh
    tanh asinh acosh atanh erf erfc erfinv sigmoid silu gelu gelu_tanh gelu_backward gelu_backward_tanh
    silu_backward sigmoid_backward tanh_backward elu elu_scaled elu_backward pow pow_scalar rsqrt sqrt
    lgamma digamma softplus softplus_backward mish mish_backward hardswish_backward logit xlogy reciprocal
    div log_softmax softmax
    normal exponential""".split())
# Reductions whose float32 lanes fold in double (aten_fpga_reduce.h Wide: the product, the count,
# the general p-norm's pow, var's sums), not in float as the sums and extrema do (SumLane): a double
# step a lane, priced so (site_scons/afpga/resources.py). Kernel.compute_lanes builds fewer lanes
# of them, as of COSTLY_OPS -- but var's: a training step's statistic, streamed at memory speed.
WIDE_FOLDS = frozenset("prod norm norm0 std_var".split())
COSTLY_REDUCTIONS = WIDE_FOLDS - {"std_var"}


@dataclass(frozen=True)
class Scalar:
    """A scalar argument of a kernel (an s_axilite register), e.g. add's `alpha`.

    Its register holds the kernel dtype's opmath type (float for float16, as ATen passes it)
    unless `dtype` names another (elu_backward's `is_result` is a bool)."""

    name: str
    dtype: str | None = None
    # What the host passes when the stub's optional argument is empty: a number, or "max" /
    # "lowest" of the kernel dtype (nan_to_num's posinf / neginf, as ATen resolves them).
    default: str | None = None

    @property
    def ctype(self) -> str | None:
        """Its C type, or None: the template's default (the opmath type, or the element type)."""
        return DTYPES[self.dtype].ctype if self.dtype else None


@dataclass(frozen=True)
class Port:
    """A pointer argument of a kernel (an m_axi port) and the element type it carries."""

    name: str
    dtype: DType
    is_output: bool


@dataclass(frozen=True)
class KernelOp:
    """One op of a template category, from kernels/hls/<category>/ops.yaml."""

    category: str
    name: str
    expr: str  # C++ expression over the category's operands (a, b, ...) and scalars
    scalars: tuple[Scalar, ...]
    dtypes: tuple[str, ...]  # dtypes the expression is written for
    loc: Location
    inputs: tuple[str, ...] = ()  # the category's pointer arguments, read
    outputs: tuple[str, ...] = ()  # and written
    port_dtypes: tuple[tuple[str, str], ...] = ()  # ports whose dtype is fixed: a dtype, or "real" (norm of complex)
    sizes: tuple[str, ...] = ("size",)  # the category's trailing size arguments
    driver: str = "pointwise"  # the host driver of its kernels: "pointwise" (fpga_kernel) or "reduce"
    row: tuple[str, ...] = ("s",)  # multi-tensor kernels: the scalars each table row carries, in order
    word: str | None = None  # XCL_OPT 4 pointwise: a function computing the op on a whole word, if any

    @property
    def id(self) -> str:
        return f"{self.category}/{self.name}"


@dataclass(frozen=True)
class Category:
    """A template folder: kernels/hls/<name>/ with opt<N>.cpp.j2 per level and ops.yaml."""

    name: str
    ops: dict[str, KernelOp] = field(hash=False)


@dataclass(frozen=True)
class Entry:
    """One line of native_functions_fpga.yaml: an ATen overload and the kernel that runs it."""

    func: str  # ATen overload name: "add.out"
    kernel: str  # "category/name"
    dtypes: tuple[str, ...]
    stub: str | None  # DispatchStub override; default "<op>_stub"
    loc: Location
    host: str | None = None  # a hand-written function aten_fpga::<host> (host/ps) that runs the op and its kernel
    # When the op's CPU impl picks one of several stubs (div's rounding modes, clamp's bounds):
    # every (stub, kernel) it may call. `kernel` is one of them; `stub` is then None.
    stubs: tuple[tuple[str, str], ...] = ()
    # Further kernels a host function runs (`kernels:`), built for the same dtypes.
    more_kernels: tuple[str, ...] = ()

    @property
    def category(self) -> str:
        return self.kernel.split("/", 1)[0]

    @property
    def kernel_names(self) -> tuple[str, ...]:
        """Every kernel the entry runs ("category/name"), `kernel` first."""
        return tuple(dict.fromkeys((self.kernel, *(k for _, k in self.stubs), *self.more_kernels)))


@dataclass(frozen=True)
class Table:
    path: str
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Kernel:
    """One HLS top function: a kernel op instantiated for one dtype. Its name is the same at every
    level (each level is its own image), so the host finds `v_add_float32` in any image."""

    op: KernelOp
    dtype: DType

    @property
    def name(self) -> str:
        return f"v_{self.op.name}_{self.dtype.name}"

    def _port_dtype(self, rule: str | None) -> DType:
        if rule is None:
            return self.dtype
        if rule == "real":
            return DTYPES[REAL_DTYPES.get(self.dtype.name, self.dtype.name)]
        return DTYPES[rule]

    @property
    def out(self) -> DType:
        """The dtype of the (first) output's elements."""
        return next(p.dtype for p in self.ports if p.is_output)

    def source(self, level: int) -> str:
        """Path of the generated HLS source, relative to the generation root."""
        return f"hls/{self.op.category}/{self.name}_opt{level}.cpp"

    @functools.cached_property  # the templates ask for it tens of thousands of times a run
    def ports(self) -> tuple[Port, ...]:
        """The pointer arguments in ABI order (inputs, then outputs), each with its element dtype:
        the kernel's, unless the op fixes it."""
        fixed = dict(self.op.port_dtypes)
        return tuple(Port(n, self._port_dtype(fixed.get(n)), n in self.op.outputs)
                     for n in (*self.op.inputs, *self.op.outputs))

    @property
    def lanes(self) -> int:
        """Elements per port word at XCL_OPT 4: the widest port moves one 512-bit word. A
        reduction's are its input's: its outputs carry results and partial words, not lanes."""
        lane_ports = [p for p in self.ports if not (p.is_output and self.op.driver == "reduce")]
        return WORD_BITS // max(p.dtype.bits for p in lane_ports)

    @property
    def compute_lanes(self) -> int:
        """Elements the XCL_OPT 4 pointwise (and rng) element function, or reduction's fold step,
        computes per cycle. Every engine CU builds each member's datapath, and a table has hundreds
        of members: only the float32 ops that are cheap (the arithmetic a training step streams at
        memory speed) are built for every lane of the word; the rest -- costly functions, and every
        other dtype -- are built for an eighth of the lanes and take 8 cycles a word, trading speed
        on rare ops for the room that lets every op of the table fit on the card."""
        costly = COSTLY_REDUCTIONS if self.op.driver == "reduce" else COSTLY_OPS
        full = self.dtype.name == "float32" and self.op.name not in costly
        scaled = self.op.driver in ("pointwise", "reduce") or self.op.category == "rng"  # templates with COMPUTE_LANES
        if full or not scaled:
            return self.lanes
        return max(1, self.lanes // 8)


@dataclass(frozen=True)
class ResolvedEntry:
    """A validated table entry joined with what PyTorch's table says about its op."""

    entry: Entry
    op: KernelOp
    kernels: tuple[Kernel, ...]
    # What ATen provides for this overload (from torchgen):
    schema: str  # the full schema, e.g. "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"
    structured_class: str  # "structured_ufunc_add_CPU": the CPU impl class whose meta and impl we reuse
    native_header: str  # "ATen/ops/add_native.h"
    stub: str | None  # "add_stub"; None for a `host:` entry, whose host function runs the kernel
    stub_header: str | None  # "ATen/native/BinaryOps.h"
    function: Any = field(compare=False, hash=False, repr=False)  # torchgen NativeFunction
    # Every stub the op's CPU impl may call, bound to its kernel: ((stub, header, KernelOp), ...).
    bindings: tuple[tuple[str, str, KernelOp], ...] = ()
    # For an op that is not structured: the CPU kernel the wrapper forwards to ("where_self_out").
    cpu_kernel: str | None = None
    # A structured out= entry's functional and in-place overloads (torchgen NativeFunctions), given
    # wrappers of their own so that they dispatch once (host/ps/structured.h).
    variants: tuple[Any, ...] = field(default=(), compare=False, hash=False, repr=False)


def kernels_of(groups) -> tuple[Kernel, ...]:
    """Every distinct kernel of `groups` (each entry's kernels), in order: two ops may share one."""
    seen: dict[str, Kernel] = {}
    for group in groups:
        for k in group:
            seen.setdefault(k.name, k)
    return tuple(seen.values())
