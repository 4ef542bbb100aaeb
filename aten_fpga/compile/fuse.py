"""Fusion groups: which nodes of an aten-level FX graph become one fused kernel, and the kernel's
model (frozen dataclasses; the codegen renders them, codegen.py).

A group is a maximal set of pointwise nodes of one dtype and one shape (inputs may broadcast: a
trailing row, one value per row, or one value), optionally ending in one reduction over the last
dim; or a GEMM (`mm`, `addmm`, `bmm`) with the pointwise chain that consumes its output (views of it
included) and reductions of that chain (column and whole sums and means, row maxima), which its
write stage applies: a fused GEMM. Every pointwise node maps to an op of the
kernel library (kernels/hls/<category>/ops.yaml) through POINTWISE below, so the fused kernel
computes with the table kernels' own element functions."""
from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.fx as fx

from codegen import library as kernel_library
from codegen.model import DTYPES, DType, KernelOp
from codegen.plan import HLS_ROOT

from .loss import CLASS_SELECT, TARGET_VALID, row_sums_of_selections

aten = torch.ops.aten

# The most arguments a kernel may have (AFPGA_EMU_MAX_ARGS, kernels/hls/emu/image.h).
MAX_ARGS = 24
# The most pointer arguments of a fused pointwise kernel: 16 arguments with its two sizes, as the
# table's kernels at most.
MAX_PORTS = 14
# The epilogue ports of a fused GEMM: the GEMM kernel's own 16 arguments leave these.
MAX_EPILOGUE_PORTS = MAX_ARGS - 16


@dataclass(frozen=True)
class Port:
    """A pointer argument: an input (read by `mode`), an output of the chain, or the reduction's."""

    name: str
    dtype: DType
    mode: str  # inputs: full | row | col | scalar; outputs: out; the reduction's: reduced
    value: str = ""  # outputs: the value stored


@dataclass(frozen=True)
class Step:
    """One op of the chain: value = op(args..., scalars...) with C++ arguments."""

    value: str  # "v3"
    op: KernelOp
    dtype: DType
    args: tuple[str, ...]  # x_<input port>, v<k>, or a constant
    scalars: tuple[str, ...]  # in op.scalars order, as C++ constants


@dataclass(frozen=True)
class Reduction:
    functor: str  # the reduce kernels' functor, afpga::reduce::Sum
    value: str  # the value reduced
    value_port: str  # a port of the value's dtype (its C type in the template)
    port: Port  # one element per row, or per column
    columns: bool = False  # over every dim but the last (a bias gradient): one element per column
    whole: bool = False  # over every element: one element


@dataclass(frozen=True)
class FusedKernel:
    inputs: tuple[Port, ...]
    steps: tuple[Step, ...]
    outputs: tuple[Port, ...]
    reduction: Reduction | None
    # Its streams carry 512-bit words at XCL_OPT 4. A chain whose rows are not whole words (a
    # reduction of rows of 10, a bias of 84) streams elements instead: its own kernel, with no
    # padded copies of its operands (its data is small: rows shorter than a word, or few of them).
    words: bool = True
    # Steps that read `col`, the element's column (a class selection): the kernel counts columns.
    column: bool = False
    # Steps applied to a whole reduction's result `total` before it is stored (a mean loss's negation
    # and division by its count), with scalar inputs (`post_inputs`).
    post: tuple[Step, ...] = ()

    @property
    def ports(self) -> tuple[Port, ...]:
        return self.inputs + self.outputs + ((self.reduction.port,) if self.reduction else ())

    @property
    def post_inputs(self) -> tuple[Port, ...]:
        """The scalar input ports only the post steps read (the reduce stage's, not the compute's)."""
        used = {a for s in self.post for a in s.args}
        return tuple(p for p in self.inputs if f"x_{p.name}" in used)

    @functools.cached_property  # hashing its repr takes ~0.1 ms: once per kernel, not per call
    def name(self) -> str:
        """v_fused_<hash of what it computes>: the same graph gives the same kernel in any process."""
        return "v_fused_" + hashlib.sha256(repr(self).encode()).hexdigest()[:16]

    @property
    def lanes(self) -> int:
        """Elements per 512-bit word of the ports that stream words (an input read once per row or
        once -- a class selection's int64 target -- is an element broadcast over the lanes)."""
        words = [p for p in self.ports if p.mode in ("full", "row", "out")] or self.ports
        return 512 // max(p.dtype.bits for p in words)


@dataclass(frozen=True)
class GemmEpilogue:
    """A fused GEMM: the table's GEMM kernel (kernels/hls/gemm, c = alpha * a @ b + beta * self)
    whose write stage applies `steps` to each element of c, the GEMM's value `gemm` (rounded to the
    dtype as the table kernel stores it). Its ports follow the GEMM's arguments: the epilogue's
    inputs (addmm's self among them: `beta_port`), then its outputs after c."""

    dtype: DType
    beta_port: str  # the input port holding addmm's self, or "" (mm, or beta = 0)
    inputs: tuple[Port, ...]
    steps: tuple[Step, ...]
    c_value: str  # the value c stores: "gemm" or a step's
    outputs: tuple[Port, ...]  # further outputs, in c's layout
    # Sums or means of values over every row (one per column: a bias gradient) or over every
    # element (a loss), accumulated tile by tile in the write stage; their ports follow the outputs.
    reductions: tuple[Reduction, ...] = ()
    # The a operand's prologue (operand_prologues): steps that make each element of a from the
    # stored one, `x_a`, and scalar input ports (a loss gradient's scale), in the read stage; and
    # `a_rows`, a port for the sum over k of each row of op(a) (a bias gradient, cuBLASLt's BGRADA:
    # of an a read transposed), one per row of c, the last port.
    a_steps: tuple[Step, ...] = ()
    a_value: str = "x_a"
    a_rows: Port | None = None

    @property
    def ports(self) -> tuple[Port, ...]:
        return self.inputs + self.outputs + tuple(r.port for r in self.reductions) + ((self.a_rows,) if self.a_rows else ())

    @property
    def a_ports(self) -> tuple[Port, ...]:
        """The scalar input ports the prologue reads."""
        used = {a for s in self.a_steps for a in s.args}
        return tuple(p for p in self.inputs if f"x_{p.name}" in used)

    @property
    def store_inputs(self) -> tuple[Port, ...]:
        """The input ports the write stage reads: those the chain or c's value use (not the
        prologue's own, which the read stage reads)."""
        used = {a for s in self.steps for a in s.args} | {self.c_value, f"x_{self.beta_port}"}
        used |= {p.value for p in self.outputs} | {r.value for r in self.reductions}
        return tuple(p for p in self.inputs if f"x_{p.name}" in used)

    @functools.cached_property
    def name(self) -> str:
        return "v_fused_gemm_" + hashlib.sha256(repr(self).encode()).hexdigest()[:16]

    @property
    def lanes(self) -> int:
        return 512 // self.dtype.bits


# --- aten ops -> library ops ---------------------------------------------------------------------

@dataclass(frozen=True)
class ElementOp:
    """How an aten overload runs as a library op: its operands (argument names, in the op's a, b, c
    order) and its scalars (op scalar name -> a function of the bound arguments)."""

    kernel: str | Callable[[dict], str]  # category/op, or a function of the bound arguments
    operands: tuple[str, ...]
    scalars: tuple[tuple[str, Callable[[dict], float]], ...] = ()

    def op_for(self, args: dict) -> str:
        return self.kernel(args) if callable(self.kernel) else self.kernel


def _arg(name: str, default=None):
    return lambda a: a.get(name, default)



def _gelu(op: str) -> Callable[[dict], str]:
    """gelu's `approximate` picks the library op: none -> op, tanh -> op_tanh."""
    return lambda a: op + ("_tanh" if a.get("approximate", "none") == "tanh" else "")


POINTWISE: dict = {
    aten.add.Tensor: ElementOp("binary/add", ("self", "other"), (("alpha", _arg("alpha", 1)),)),
    aten.sub.Tensor: ElementOp("binary/sub", ("self", "other"), (("alpha", _arg("alpha", 1)),)),
    aten.mul.Tensor: ElementOp("binary/mul", ("self", "other")),
    aten.div.Tensor: ElementOp("binary/div", ("self", "other")),
    aten.maximum.default: ElementOp("binary/maximum", ("self", "other")),
    aten.minimum.default: ElementOp("binary/minimum", ("self", "other")),
    aten.pow.Tensor_Tensor: ElementOp("binary/pow", ("self", "exponent")),
    aten.pow.Tensor_Scalar: ElementOp("unary/pow_scalar", ("self",), (("exponent", _arg("exponent")),)),
    aten.neg.default: ElementOp("unary/neg", ("self",)),
    aten.abs.default: ElementOp("unary/abs", ("self",)),
    aten.reciprocal.default: ElementOp("unary/reciprocal", ("self",)),
    aten.sqrt.default: ElementOp("unary/sqrt", ("self",)),
    aten.rsqrt.default: ElementOp("unary/rsqrt", ("self",)),
    aten.exp.default: ElementOp("unary/exp", ("self",)),
    aten.log.default: ElementOp("unary/log", ("self",)),
    aten.tanh.default: ElementOp("unary/tanh", ("self",)),
    aten.sigmoid.default: ElementOp("unary/sigmoid", ("self",)),
    aten.erf.default: ElementOp("unary/erf", ("self",)),
    aten.relu.default: ElementOp("unary/clamp_min", ("self",), (("lo", lambda a: 0),)),
    aten.gelu.default: ElementOp(_gelu("unary/gelu"), ("self",)),
    aten.gelu_backward.default: ElementOp(_gelu("binary/gelu_backward"), ("grad_output", "self")),
    aten.threshold_backward.default: ElementOp("binary/threshold", ("self", "grad_output"),
                                               (("threshold", _arg("threshold")), ("value", lambda a: 0))),
    aten.sigmoid_backward.default: ElementOp("binary/sigmoid_backward", ("grad_output", "output")),
    aten.tanh_backward.default: ElementOp("binary/tanh_backward", ("grad_output", "output")),
}

# Class selections (compile/loss.py, the cross entropy): the table's `where` (ternary/where) of a
# condition on the row's int64 target `t` -- the element's column `col` is the target, or the
# target is a class -- the selected value (class_select's self, or 1) and 0.
SELECTIONS: dict = {
    CLASS_SELECT: lambda t, a: f"(col == {t} && {t} != int64_t({a['ignore_index']}))",
    TARGET_VALID: lambda t, a: f"({t} >= 0 && {t} < int64_t({a['classes']}) && {t} != int64_t({a['ignore_index']}))",
}


def selection_ok(node: fx.Node) -> bool:
    """A class selection a fused chain computes: an [N, 1] int64 target, a static class count, and
    for class_select a value of the output's dtype that spans the classes (its column is `col`)."""
    v = _meta(node)
    if node.op != "call_function" or node.target not in SELECTIONS or v is None or v.dtype not in DTYPES_FUSED:
        return False
    args = bind(node)
    t = _meta(args["target"])
    if t is None or t.dtype != torch.int64 or t.dim() != 2 or v.dim() != 2 or not isinstance(args["classes"], int):
        return False
    if node.target is CLASS_SELECT:
        m = _meta(args["self"])
        return m is not None and m.dtype == v.dtype and v.shape[-1] == args["classes"]
    return True


def _selects(nodes) -> bool:
    return any(n.target in SELECTIONS for n in nodes)


# The reductions a fused GEMM's write stage accumulates -- sums and means over every row (per
# column) or every element, maxima over the last dim (per row: softmax's amax) -- and the dtype
# they may run in: the write stage keeps a tile's sums in the accumulator type (float32) and the
# running sums in the output port between tiles, which float16 could not hold exactly.
GEMM_REDUCTIONS = {aten.sum.dim_IntList: "afpga::reduce::Sum", aten.mean.dim: "afpga::reduce::Mean",
                   aten.sum.default: "afpga::reduce::Sum", aten.mean.default: "afpga::reduce::Mean",
                   aten.amax.default: "afpga::reduce::Max"}
GEMM_REDUCTION_DTYPES = (torch.float32,)

# Products whose write stage may apply a chain (kernels/hls/gemm): 2-D, or batched (bmm; the
# epilogue's ports hold the batch's items one after another, as rows of c).
GEMMS = {aten.mm.default: ("self", "mat2"), aten.addmm.default: ("mat1", "mat2"),  # the a and b operands
         aten.bmm.default: ("self", "mat2")}

# Views a fused GEMM's chain may pass through: a contiguous value keeps its element order.
VIEWS = (aten.view.default, aten._unsafe_view.default)

# Reductions that may end a chain: over the last dim (the kernel's rows), over every element (its
# rows' partials are never reset), or -- sum and mean -- over every dim but the last
# (the kernel's columns: a bias gradient), of a member or of a view of it that keeps its rows.
REDUCTIONS = {
    aten.sum.dim_IntList: "afpga::reduce::Sum",
    aten.mean.dim: "afpga::reduce::Mean",
    aten.amax.default: "afpga::reduce::Max",
    aten.sum.default: "afpga::reduce::Sum",
    aten.mean.default: "afpga::reduce::Mean",
}

# The dtypes fused kernels are generated for: those the element functions are exact or
# ulp-bounded in (float16 computes in float32, its opmath, and rounds at every step as the table
# kernels store); an op is fused in a dtype its library entry lists.
DTYPES_FUSED = (torch.float32, torch.float16)

_library = None


def library_op(kernel: str) -> KernelOp:
    global _library
    if _library is None:
        _library = kernel_library.load_library(HLS_ROOT)
    category, op = kernel.split("/")
    return _library[category].ops[op]


def bind(node: fx.Node) -> dict:
    """The node's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    out = {}
    for i, a in enumerate(schema.arguments):
        if i < len(node.args):
            out[a.name] = node.args[i]
        elif a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
    return out


def _meta(n) -> torch.Tensor | None:
    v = n.meta.get("val") if isinstance(n, fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(torch.fx.experimental.symbolic_shapes.statically_known_true(x == y)
                                    for x, y in zip(a, b))


def input_mode(shape, full) -> str | None:
    """How an input of `shape` is read against the chain's `full` shape, or None (materialize it)."""
    if _same_shape(shape, full):
        return "full"
    dims = [d for d in shape]
    while dims and dims[0] == 1:
        dims.pop(0)
    if not dims or all(d == 1 for d in dims):
        return "scalar"
    if len(full) >= 1 and _same_shape(dims, full[-1:]):
        return "row"
    if len(shape) == len(full) and shape[-1] == 1 and _same_shape(shape[:-1], full[:-1]):
        return "col"
    return None


def pointwise_ok(node: fx.Node) -> bool:
    if node.op == "call_function" and node.target in SELECTIONS:
        return selection_ok(node)
    v = _meta(node)
    if node.op != "call_function" or node.target not in POINTWISE or v is None or v.dtype not in DTYPES_FUSED:
        return False
    args = bind(node)
    op = library_op(POINTWISE[node.target].op_for(args))
    if op.port_dtypes or str(v.dtype).replace("torch.", "") not in op.dtypes:
        return False
    for name in POINTWISE[node.target].operands:
        a = args[name]
        m = _meta(a)
        if isinstance(a, fx.Node) and (m is None or m.dtype != v.dtype):
            return False
        if not isinstance(a, (fx.Node, int, float)) or isinstance(a, bool):
            return False
    return True


def reduces_all(node: fx.Node) -> bool:
    """A reduction over every element of its input."""
    dims = bind(node).get("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    rank = len(_meta(bind(node)["self"]).shape)
    return not dims or sorted(d % rank for d in dims) == list(range(rank))


# A column reduction keeps one accumulator per column and partial (kernels/hls/fused): at most this
# many columns; a chain with wider rows runs its reduction unfused.
MAX_COLUMNS = 4096
COLUMN_REDUCTIONS = (aten.sum.dim_IntList, aten.mean.dim)


def reduces_columns(node: fx.Node) -> bool:
    """A reduction over every dim of its input but the last: one result per column."""
    args = bind(node)
    dims = args.get("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    rank = len(_meta(args["self"]).shape)
    return node.target in COLUMN_REDUCTIONS and rank >= 2 and sorted(d % rank for d in dims) == list(range(rank - 1))


def reduced_member(node: fx.Node, g) -> fx.Node | None:
    """The member of group `g` that reduction `node` reduces: its input, or the input of a view of
    it that keeps the rows (a column reduction only)."""
    src = bind(node)["self"]
    if src in g.nodes or not g.nodes:  # a member, or the input of a column sum on its own
        return src
    if (isinstance(src, fx.Node) and src.op == "call_function" and src.target in VIEWS and bind(src)["self"] in g.nodes
            and reduces_columns(node) and _same_rows(tuple(_meta(src).shape), g.shape)):
        return bind(src)["self"]
    return None


def reduction_ok(node: fx.Node, g) -> bool:
    if node.op != "call_function" or node.target not in REDUCTIONS or g.gemm is not None:
        return False
    args = bind(node)
    member = reduced_member(node, g)
    src, v = _meta(args["self"]), _meta(node)
    if member is None or src is None or v is None or v.dtype != src.dtype or v.dtype != g.dtype or len(g.shape) == 0:
        return False
    if reduces_columns(node):
        return args.get("dtype") is None
    dims = args.get("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    full = g.shape
    return (_same_shape(src.shape, full) and args.get("dtype") is None
            and ([d % len(full) for d in dims] == [len(full) - 1] or reduces_all(node)))


def gemm_ok(node: fx.Node) -> bool:
    """A product a fused GEMM can compute: 2-D (3-D for bmm) float operands of the chain's dtype;
    addmm's self broadcasts as the kernel's epilogue reads it."""
    v = _meta(node)
    if node.op != "call_function" or node.target not in GEMMS or v is None or v.dtype not in DTYPES_FUSED:
        return False
    args = bind(node)
    ab = [_meta(args[o]) for o in GEMMS[node.target]]
    rank = 3 if node.target is aten.bmm.default else 2
    if any(t is None or t.dim() != rank or t.dtype != v.dtype for t in ab):
        return False
    if node.target is aten.addmm.default:
        s = _meta(args["self"])
        if s is None or s.dtype != v.dtype or input_mode(tuple(s.shape), tuple(v.shape)) is None:
            return False
        return not isinstance(args.get("beta", 1), fx.Node) and not isinstance(args.get("alpha", 1), fx.Node)
    return True


def _numel(shape):
    return math.prod(shape) if shape else 1


def _same_rows(shape, rows_shape) -> bool:
    """A contiguous value of `shape` has the layout of one of `rows_shape` (a GEMM's [m, n] output):
    the same last dim and the same number of elements."""
    known = torch.fx.experimental.symbolic_shapes.statically_known_true
    return len(shape) >= 1 and known(shape[-1] == rows_shape[-1]) and known(_numel(shape) == _numel(rows_shape))


def _epilogue_ports(nodes: list, reductions: list) -> int:
    """Ports of a fused GEMM beyond the GEMM's own arguments: the chain's operands, its outputs but
    one (c) and its reductions."""
    members = set(nodes) | set(reductions)
    gemm = nodes[0]
    inputs = {a for n in nodes[1:] for a in n.all_input_nodes if a not in members}
    if gemm.target is aten.addmm.default:
        inputs.add(bind(gemm)["self"])
    outputs = [n for n in nodes if any(u not in members for u in n.users)]
    return len(inputs) + max(0, len(outputs) - 1) + len(reductions)


@dataclass
class Group:
    nodes: list
    shape: tuple
    dtype: torch.dtype
    reduction: fx.Node | None = None
    gemm: fx.Node | None = None  # a fused GEMM: nodes[0], its chain after it
    reductions: list = field(default_factory=list)  # a fused GEMM's sums and means of its chain's values
    # A fused GEMM's a operand made in its read stage (operand_prologues): the pointwise nodes and
    # views from the chain's source to the GEMM's a, in graph order; `a_source`, that source (itself
    # perhaps a view: the chain reads it as it is); `a_operand`, a view of the
    # source laid out as a (the kernel's a port); `a_rows`, a column sum taken as the sums over k of
    # op(a)'s rows (a prologue's, or a value's that a produced: _sums_to_readers).
    prologue: list = field(default_factory=list)
    a_source: fx.Node | None = None
    a_operand: fx.Node | None = None
    a_rows: fx.Node | None = None
    # Pointwise nodes of one value after a whole reduction (FusedKernel.post), in order.
    post: list = field(default_factory=list)

    @property
    def members(self) -> set:
        return (set(self.nodes) | set(self.reductions) | set(self.prologue) | set(self.post)
                | {n for n in (self.reduction, self.a_rows) if n is not None})


def _joins_gemm(node: fx.Node, g: Group) -> bool:
    """Whether `node` extends the chain of fused GEMM `g`: a view of a member in the GEMM's layout,
    or a pointwise op in it whose other operands the epilogue reads in place."""
    v = _meta(node)
    if v is None or not _same_rows(tuple(v.shape), g.shape):
        return False
    members = set(g.nodes)
    if any(a in g.reductions for a in node.all_input_nodes):  # complete only once the kernel is done
        return False
    if node.op == "call_function" and node.target in VIEWS:
        return bind(node)["self"] in members and v.dtype == g.dtype
    if not pointwise_ok(node) or v.dtype != g.dtype or node.target in SELECTIONS:
        return False
    others = [a for a in node.all_input_nodes if a not in members]
    if any(input_mode(tuple(_meta(a).shape), tuple(v.shape)) is None for a in others):
        return False
    return _epilogue_ports(g.nodes + [node], g.reductions) <= MAX_EPILOGUE_PORTS


def _reduces_last(node: fx.Node) -> bool:
    """A reduction over the last dim only: one result per row."""
    dims = bind(node).get("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    rank = len(_meta(bind(node)["self"]).shape)
    return rank >= 1 and [d % rank for d in dims] == [rank - 1]


def _gemm_reduction(node: fx.Node, g: Group) -> bool:
    """Whether fused GEMM `g`'s write stage can take reduction `node`: a sum or mean over every row
    (per column) or every element, of a member or of a view of one that keeps the rows."""
    if node.op != "call_function" or node.target not in GEMM_REDUCTIONS or g.dtype not in GEMM_REDUCTION_DTYPES:
        return False
    args = bind(node)
    src, v = _meta(args["self"]), _meta(node)
    if src is None or v is None or v.dtype != g.dtype or args.get("dtype") is not None:
        return False
    member = args["self"] if args["self"] in g.nodes else reduced_member(node, g)
    if member is None or member not in g.nodes or not _same_rows(tuple(src.shape), g.shape):
        return False
    if node.target is aten.amax.default:
        if not _reduces_last(node):
            return False
    elif not (reduces_all(node) or (reduces_columns(node) and _same_shape(src.shape[-1:], g.shape[-1:]))):
        return False
    return _epilogue_ports(g.nodes, g.reductions + [node]) <= MAX_EPILOGUE_PORTS


def _ports_needed(nodes: list, reduction) -> int:
    members = set(nodes) | ({reduction} if reduction else set())
    inputs = {a for n in members for a in n.all_input_nodes if a not in members}
    outputs = {n for n in nodes if any(u not in members for u in n.users)}
    return len(inputs) + len(outputs) + (1 if reduction else 0)


def partition(gm: fx.GraphModule) -> list[Group]:
    """Groups of fusible nodes in graph order. A node joins the group of one of its inputs when
    shape and dtype match and no other path leads from the group to it (the group runs at its last
    node, so it must not wait for a node that waits for it); a reduction closes its group."""
    row_sums_of_selections(gm.graph)  # the cross entropy's backward in one chain (compile/loss.py)
    group_of: dict[fx.Node, Group] = {}
    # What waits for what. A group runs once, at its last member, so it waits for every group any
    # of its members reads, and that set grows as members join: `needs[id(g)]` holds the groups g
    # reads directly (through its members' inputs, or through nodes outside every group), and
    # `frontier[n]` the groups a node outside every group reads directly. Whether one group waits
    # for another is a walk over `needs` at the time of asking, never a set taken earlier.
    needs: dict[int, set] = {}
    frontier: dict[fx.Node, set] = {}
    groups: list[Group] = []

    def read_by(a: fx.Node) -> set:
        return {id(group_of[a])} if a in group_of else frontier.get(a, set())

    def waits_for(start: set, g: Group) -> bool:
        seen, todo = set(), list(start)
        while todo:
            k = todo.pop()
            if k == id(g):
                return True
            if k not in seen:
                seen.add(k)
                todo.extend(needs.get(k, ()))
        return False

    for node in gm.graph.nodes:
        chosen = None
        v = _meta(node)
        candidates = [group_of[a] for a in node.all_input_nodes if a in group_of]
        view = _viewed_member(node)  # a reduction of a view of a member: the member's group
        if view is not None and view[1] in group_of:
            candidates.append(group_of[view[1]])
        for g in candidates:
            through_other = any(waits_for(read_by(a), g) for a in node.all_input_nodes
                                if group_of.get(a) is not g and (view is None or a is not view[0]))
            if through_other:
                continue
            if g.reduction is not None:
                if _post_ok(node, g):
                    g.post.append(node)
                    group_of[node] = g
                    break
                continue
            if g.gemm is not None:
                if _joins_gemm(node, g):
                    chosen = g
                    break
                if _gemm_reduction(node, g):
                    g.reductions.append(node)
                    group_of[node] = g
                    break
            elif pointwise_ok(node) and _same_shape(v.shape, g.shape) and v.dtype == g.dtype:
                if _ports_needed(g.nodes + [node], None) <= MAX_PORTS:
                    chosen = g
                    break
            elif reduction_ok(node, g):
                if _ports_needed(g.nodes, node) <= MAX_PORTS:
                    g.reduction = node
                    group_of[node] = g
                    break
        if chosen is not None:
            chosen.nodes.append(node)
            group_of[node] = chosen
        elif node not in group_of and (pointwise_ok(node) or gemm_ok(node)):
            g = Group([node], tuple(v.shape), v.dtype, gemm=node if node.target in GEMMS else None)
            groups.append(g)
            group_of[node] = g
        elif node not in group_of and lone_reduction_ok(node):
            g = Group([], tuple(_meta(bind(node)["self"]).shape), v.dtype, reduction=node)
            groups.append(g)
            group_of[node] = g
        reads = set().union(*(read_by(a) for a in node.all_input_nodes))
        if node in group_of:
            own = id(group_of[node])
            needs.setdefault(own, set()).update(reads - {own})
        else:
            frontier[node] = reads
    groups = _absorb_producers(gm, groups)
    groups = operand_prologues(gm, groups)
    groups = _sums_to_readers(groups)
    groups = _merge_into_consumers(gm, groups)
    return [g for g in groups if _gains(g)]


def _post_ok(node: fx.Node, g: Group) -> bool:
    """Whether pointwise `node` applies to the value of `g`'s whole reduction (or of its last post
    step) as a post step: that value is its only use, its result has that value's shape, and its
    other operands are single values the group does not otherwise read (scalar ports of the
    reduce stage)."""
    last = g.post[-1] if g.post else g.reduction
    if (g.gemm is not None or not reduces_all(g.reduction) or not pointwise_ok(node) or node.target in SELECTIONS
            or list(last.users) != [node] or _meta(node).dtype != g.dtype
            or not _same_shape(_meta(node).shape, _meta(last).shape)):
        return False
    members = g.members
    read = {a for n in members for a in n.all_input_nodes if a not in members}
    others = [a for a in node.all_input_nodes if a is not last]
    return (all(_meta(a) is not None and _meta(a).numel() == 1 and a not in read for a in others)
            and _ports_needed(g.nodes + g.post + [node], g.reduction) <= MAX_PORTS)


def _merge_into_consumers(gm: fx.GraphModule, groups: list) -> list:
    """A pointwise group whose values only one other (pointwise) group uses merges into it, its
    steps computed there per element, when its inputs read in place against that group's shape:
    the launch goes and so do its outputs' writes and reads. Such a group is a chain the greedy
    walk left beside its consumer -- a value per row (the log of a row sum), one value (a loss
    gradient's scale), or a sibling whose user joined the other input's group -- and its values
    broadcast into the consumer's elements (a value per row is computed again for every element
    of its row, by the same element functions: the same values)."""
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    merged = True
    while merged:
        merged = False
        for h in groups:
            g = _consumer(h, groups)
            if g is not None:
                g.nodes = sorted(g.nodes + h.nodes, key=position.__getitem__)
                groups = [x for x in groups if x is not h]
                merged = True
                break
    return groups


def _consumer(h: Group, groups: list) -> Group | None:
    """The group `h` can merge into (_merge_into_consumers), or None."""
    if h.gemm is not None or h.reduction is not None or h.prologue or not h.nodes:
        return None
    members = set(h.nodes)
    users = {u for n in h.nodes for u in n.users if u not in members}
    g = next((x for x in groups if x is not h and users and users <= x.members), None)
    if (g is None or g.gemm is not None or g.prologue or g.dtype != h.dtype or users & set(g.post)
            or input_mode(h.shape, g.shape) is None):
        return None
    if any(n.target is CLASS_SELECT and not _same_shape(_meta(n).shape, g.shape) for n in h.nodes):
        return None  # its `col` is the consumer's column only when it spans the consumer's rows
    inputs = {a for n in h.nodes for a in n.all_input_nodes if a not in members}
    if any(a in g.post or input_mode(tuple(_meta(a).shape), g.shape) is None for a in inputs):
        return None
    return g if _ports_needed(g.nodes + h.nodes + g.post, g.reduction) <= MAX_PORTS else None


def _absorb_producers(gm: fx.GraphModule, groups: list) -> list:
    """Pointwise groups whose every value feeds only a fused GEMM's chain (LayerNorm backward's
    normalized input, recomputed from the input and its saved row statistics) join that chain: the
    write stage computes them from their inputs, read in place, and the launch goes. Only groups
    whose inputs all precede the GEMM in the graph, so that none can depend on it."""
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    kept = []
    for h in groups:
        target = None
        if h.gemm is None and h.reduction is None:
            users = {u for n in h.nodes for u in n.users if u not in h.nodes}
            owners = {id(g): g for g in groups if g is not h and users <= g.members}
            target = next((g for g in owners.values() if g.gemm is not None), None)
        if target is not None and _absorbable(h, target, position):
            target.nodes[1:1] = h.nodes  # after the GEMM: the chain's steps follow their operands
        else:
            kept.append(h)
    return kept


def _absorbable(h: Group, g: Group, position: dict) -> bool:
    members = set(h.nodes)
    inputs = {a for n in h.nodes for a in n.all_input_nodes if a not in members}
    if (h.dtype != g.dtype or not _same_rows(h.shape, g.shape) or any(position[a] > position[g.gemm] for a in inputs)
            or _selects(h.nodes) or h.post):
        return False
    if any(input_mode(tuple(_meta(a).shape), tuple(_meta(n).shape)) is None
           for n in h.nodes for a in n.all_input_nodes if a not in members):
        return False
    return _epilogue_ports(g.nodes + h.nodes, g.reductions) <= MAX_EPILOGUE_PORTS


# The views a prologue's value may reach a GEMM's a operand through.
_A_VIEWS = (*VIEWS, aten.t.default, aten.transpose.int)


def operand_prologues(gm: fx.GraphModule, groups: list) -> list:
    """A pointwise group of one full input (and scalars) whose only value is used as the a operand
    of 2-D GEMMs (through views) -- a loss gradient scaled by the backward's seed -- is computed in
    those GEMMs' read stages instead: each GEMM gets its own copy of the chain (a prologue), the
    group's launch and its output's write and reads go. Its column sum, when it has one, is the
    sum over k of the rows of an a that reads it transposed (a weight gradient's a): that GEMM
    computes it in its read stage too (`a_rows`)."""
    by_gemm = {g.gemm: g for g in groups if g.gemm is not None}
    kept = []
    for h in groups:
        taken = _prologue_of(gm, h, by_gemm)
        if taken is None:
            kept.append(h)
            continue
        for g in taken:
            if g.gemm not in by_gemm:  # a bare product, a group of its own now
                by_gemm[g.gemm] = g
                kept.append(g)
    return kept


def _a_uses(value: fx.Node, reduction) -> list | None:
    """(product, views from `value` to its a operand) for every use of `value` through views, or
    None when one is anything else (but `reduction`, of the value or of a view of it)."""
    uses, stack = [], [(value, [])]
    while stack:
        node, path = stack.pop()
        for u in node.users:
            if u is reduction:
                continue
            if u.op == "call_function" and u.target in _A_VIEWS and u.args[0] is node:
                stack.append((u, path + [u]))
            elif (u.op == "call_function" and u.target in (aten.mm.default, aten.addmm.default) and gemm_ok(u)
                  and [x for x in u.all_input_nodes if x is node] == [bind(u)[GEMMS[u.target][0]]]):
                uses.append((u, path))
            else:
                return None
    return uses


def _transposes(path: list) -> int:
    return sum(n.target in (aten.t.default, aten.transpose.int) for n in path)


def _prologue_of(gm: fx.GraphModule, h: Group, by_gemm: dict) -> list | None:
    """The GEMM groups that take `h` as their a operand's prologue (the graph rewired so that each
    has its own copy), or None when `h` does not qualify."""
    if h.gemm is not None or h.dtype != torch.float32 or not h.nodes or _selects(h.nodes) or h.post:
        return None
    members = set(h.nodes)
    inputs = {a for n in h.nodes for a in n.all_input_nodes if a not in members}
    full = [a for a in inputs if input_mode(tuple(_meta(a).shape), h.shape) != "scalar"]
    outs = [n for n in h.nodes if any(u not in members for u in n.users)]
    if len(full) != 1 or len(outs) != 1 or _meta(full[0]).dtype != h.dtype:
        return None
    (src,), (value,) = full, outs
    red = h.reduction
    if red is not None and not (red.target is aten.sum.dim_IntList and reduces_columns(red)
                                and _meta(bind(red)["self"]).dim() == 2):
        return None
    uses = _a_uses(value, red)
    # The kernel's a is the source through the same views: a view of a non-contiguous source would
    # not be one (the chain's value, a fresh tensor, always is).
    if not uses or (any(n.target in VIEWS for _, path in uses for n in path) and not _meta(src).is_contiguous()):
        return None
    for gemm, _ in uses:
        g = by_gemm.get(gemm)
        if g is not None and (g.prologue or _epilogue_ports(g.nodes, g.reductions) + len(inputs) > MAX_EPILOGUE_PORTS):
            return None
    if red is not None:
        # Its column sum goes with a product that reads the value's 2-D view transposed: op(a)'s
        # rows are that view's columns. That product keeps the original chain (first).
        first = next((k for k, (gemm, path) in enumerate(uses)
                      if _transposes(path) == 1 and bind(red)["self"] in [value, *path]
                      and _meta(bind(gemm)[GEMMS[gemm.target][0]]).dim() == 2), None)
        if first is None:
            return None
        uses.insert(0, uses.pop(first))
    taken = []
    for k, (gemm, path) in enumerate(uses):
        chain = h.nodes
        if k > 0:  # a copy of the chain and of its views for this product
            env = {}
            with gm.graph.inserting_before(gemm):
                for n in [*h.nodes, *path]:
                    env[n] = gm.graph.node_copy(n, lambda x: env.get(x, x))
            old = path[-1] if path else value
            gemm.replace_input_with(old, env[old])
            _erase_dead(gm, old)
            chain, path = [env[n] for n in h.nodes], [env[n] for n in path]
        with gm.graph.inserting_before(gemm):  # the kernel's a: the source laid out as a
            operand = src
            for n in path:
                operand = gm.graph.call_function(n.target, (operand, *n.args[1:]), dict(n.kwargs))
                operand.meta["val"] = n.meta["val"]  # the same shape and strides: an elementwise chain's
        g = by_gemm.get(gemm) or Group([gemm], tuple(_meta(gemm).shape), _meta(gemm).dtype, gemm=gemm)
        g.prologue = [*chain, *path]
        g.a_source, g.a_operand = src, operand
        if k == 0 and red is not None:
            g.a_rows = red
            g.prologue += [n for n in [bind(red)["self"]] if n not in g.prologue and n is not value]
        taken.append(g)
    return taken


def _sums_to_readers(groups: list) -> list:
    """A fused GEMM's column sum of a value that a later 2-D product reads transposed as its a
    operand (the hidden bias gradient of gelu_backward's output, which the first layer's weight
    gradient reads as g^T) is taken by that product's read stage instead (`a_rows`): the same
    sum, and the GEMM that made the value no longer sums over its rows, so it runs in bands over
    the compute units."""
    by_gemm = {g.gemm: g for g in groups if g.gemm is not None}
    added = []
    for g in [g for g in groups if g.gemm is not None]:
        for r in list(g.reductions):
            reader = _transposed_reader(r) if r.target is aten.sum.dim_IntList and reduces_columns(r) else None
            if reader is None:
                continue
            h = by_gemm.get(reader)
            if h is None:
                h = by_gemm[reader] = Group([reader], tuple(_meta(reader).shape), _meta(reader).dtype, gemm=reader)
                added.append(h)
            if h.a_rows is not None or h is g:
                continue
            g.reductions.remove(r)
            h.a_rows = r
    return groups + added


def _transposed_reader(r: fx.Node) -> fx.Node | None:
    """The 2-D product whose a operand is the transpose of the 2-D value column sum `r` reduces."""
    src = bind(r)["self"]
    if _meta(src) is None or _meta(src).dim() != 2:
        return None
    for t in src.users:
        if t.op == "call_function" and t.target in (aten.t.default, aten.transpose.int) and len(t.users) == 1:
            (p,) = t.users
            if (p.op == "call_function" and p.target in (aten.mm.default, aten.addmm.default) and gemm_ok(p)
                    and bind(p)[GEMMS[p.target][0]] is t and bind(p)[GEMMS[p.target][1]] is not t):
                return p
    return None


def _erase_dead(gm: fx.GraphModule, node: fx.Node) -> None:
    """Erases `node` and the views below it that nothing uses any more (a product's old a path)."""
    while node.op == "call_function" and node.target in _A_VIEWS and not node.users:
        below = node.args[0]
        gm.graph.erase_node(node)
        node = below


def _viewed_member(node: fx.Node):
    """(the view, the node it views) when `node` is a reduction whose input is a view, else None."""
    if node.op != "call_function" or node.target not in REDUCTIONS:
        return None
    src = bind(node)["self"]
    if isinstance(src, fx.Node) and src.op == "call_function" and src.target in VIEWS:
        return src, bind(src)["self"]
    return None


def lone_reduction_ok(node: fx.Node) -> bool:
    """A reduction of a value no group makes (a GEMM's output, a copy's, a host op's) that the
    reduce driver would copy first -- at XCL_OPT 4, to padded rows where the rows end mid-word --
    is a kernel of its own, one launch: a column reduction (the driver reduces whole-word columns in
    place), or a reduction over the last dim of rows that are statically no whole number of words
    (a cross entropy's 10 classes)."""
    if node.op != "call_function" or node.target not in REDUCTIONS:
        return False
    args = bind(node)
    src, v = _meta(args["self"]), _meta(node)
    if src is None or v is None or v.dtype not in DTYPES_FUSED or src.dtype != v.dtype or args.get("dtype") is not None:
        return False
    if reduces_columns(node):
        return True
    inner = src.shape[-1] if src.dim() >= 1 else None
    return (src.dim() >= 2 and _reduces_last(node) and isinstance(inner, int)
            and inner % (512 // (8 * src.element_size())) != 0)


def _broadcast_inputs(g: Group) -> bool:
    """Whether a pointwise group reads an input broadcast (a row, a value per row, one value):
    the table kernels make such an input dense first, with copy kernels."""
    members = set(g.nodes)
    return any(input_mode(tuple(_meta(a).shape), g.shape) in ("row", "col", "scalar")
               for n in g.nodes for a in n.all_input_nodes if a not in members and _meta(a) is not None)


def _gains(g: Group) -> bool:
    """A group saves launches: two or more ops, an addmm (unfused, its bias is first copied into c),
    a reduction the driver would copy for (lone_reduction_ok), or one op with a broadcast input
    (unfused, a dense copy of it first)."""
    if g.gemm is not None:
        ops = [n for n in g.nodes if n.target not in VIEWS] + g.reductions
        return (len(ops) >= 2 or bool(g.prologue) or g.a_rows is not None
                or (g.gemm.target is aten.addmm.default and bind(g.gemm).get("beta", 1) != 0))
    return (len(g.nodes) + (g.reduction is not None) >= 2 or (g.reduction is not None and not g.nodes)
            or _broadcast_inputs(g))


def _literal(value) -> str:
    """A C++ double constant that round-trips `value` (C++14: no hex floats)."""
    v = float(value)
    if math.isnan(v):
        return "double(NAN)"
    if math.isinf(v):
        return "double(INFINITY)" if v > 0 else "double(-INFINITY)"
    text = repr(v)
    return f"double({text})"


def constant(value, ns: str, i: int) -> str:
    """A number operand of step i of namespace ns, in the step's types: ATen's wrapped scalar."""
    return f"{ns}{i}::M({ns}{i}::T({_literal(value)}))"


def pointwise_step(n: fx.Node, ns: str, i: int, value: str, dtype: DType, operand: Callable) -> Step:
    """Node n, a POINTWISE op, as step i of namespace ns computing `value`: its library op, its
    operands as `operand` names them in C++ (a value, a port, a constant) and its scalars."""
    args = bind(n)
    spec = POINTWISE[n.target]
    op = library_op(spec.op_for(args))
    fns = dict(spec.scalars)
    scalars = tuple(f"{ns}{i}::S_{s.name}({_literal(fns[s.name](args))})" for s in op.scalars)
    return Step(value, op, dtype, tuple(operand(args[o]) for o in spec.operands), scalars)


@dataclass(frozen=True)
class Plan:
    """A group, as the graph and the kernel see it: the graph nodes feeding each input port (a
    fused GEMM's a and b first), the nodes whose values each output port stores (a fused GEMM's c
    first), and the kernel."""

    kernel: FusedKernel | GemmEpilogue
    inputs: tuple  # fx.Node per input port
    outputs: tuple  # fx.Node per output port (the reduction's last)
    shape: tuple  # the chain's full shape, a fused GEMM's [m, n] (symbolic sizes allowed)


def plan(group: Group, modes: dict | None = None, words: bool = True) -> Plan:
    """The kernel of `group`. `modes` overrides an input's mode (the runner materializes inputs
    whose broadcast the kernel cannot read); `words` false: a chain's streams carry elements at
    XCL_OPT 4 (FusedKernel.words)."""
    members = group.members
    dtype = DTYPES[str(group.dtype).replace("torch.", "")]
    gemm = group.gemm
    in_nodes: list = []
    ports_in: list[Port] = []
    values: dict = {}
    steps: list[Step] = []

    def operand(a, shape, ns="f", i=None) -> str:
        """The C++ name of operand `a` of a value of `shape` (a number: in step i of namespace ns)."""
        if isinstance(a, fx.Node):
            if a in values:
                return values[a]
            if a not in in_nodes:
                m = (modes or {}).get(a) or input_mode(tuple(_meta(a).shape), shape) or "full"
                in_nodes.append(a)
                ports_in.append(Port(f"in{len(ports_in)}", DTYPES[str(_meta(a).dtype).replace("torch.", "")], m))
            return f"x_{ports_in[in_nodes.index(a)].name}"
        return constant(a, ns, len(steps) if i is None else i)

    def step(n, ns: str, into: list, name: str) -> None:
        """Node n's step, appended to `into`; its value is called name + its index."""
        args = bind(n)
        i = len(into)
        # A chain's operands are read against its shape (a merged value per row too, _merge_into_consumers)
        shape = group.shape if gemm is None else tuple(_meta(n).shape)
        if n.target in SELECTIONS:  # where(condition on the target, the selected value, 0)
            op = library_op("ternary/where")
            chosen = args["self"] if n.target is CLASS_SELECT else 1
            t = operand(args["target"], shape, ns, i)
            step_args = (SELECTIONS[n.target](t, args), operand(chosen, shape, ns, i), operand(0, shape, ns, i))
            into.append(Step(f"{name}{i}", op, dtype, step_args, ()))
        else:
            into.append(pointwise_step(n, ns, i, f"{name}{i}", dtype, lambda a: operand(a, shape, ns, i)))
        values[n] = f"{name}{i}"

    beta_port = ""
    a_steps: list[Step] = []
    # Inputs only the unfused path reads: a prologue's source, a moved column sum's input. Read
    # from the graph now: a group replaced before this one rewires its users' arguments.
    fallback = []
    if gemm is not None:
        args = bind(gemm)
        gemm_ab = tuple(args[o] for o in GEMMS[gemm.target])
        if group.prologue:  # a is the source laid out as a, made into a's values in the read stage
            gemm_ab = (group.a_operand, *gemm_ab[1:])
            values[group.a_source] = "x_a"
            fallback.append(group.a_source)
            for n in group.prologue:
                if n.target in _A_VIEWS:
                    values[n] = values[n.args[0]]
                else:
                    step(n, "g", a_steps, "a")
        values[gemm] = "gemm"
        if gemm.target is aten.addmm.default and args.get("beta", 1) != 0:
            beta_port = operand(args["self"], group.shape)[len("x_"):]
    for n in group.nodes:
        if n is gemm:
            continue
        if n.target in VIEWS:
            values[n] = values[bind(n)["self"]]
            continue
        step(n, "f", steps, "v")
    out_nodes = [n for n in group.nodes if any(u not in members for u in n.users)]
    if gemm is not None:
        # c is always written: when only the reductions leave the group, it holds the product.
        out_nodes = out_nodes or [gemm]
        reductions = []
        for k, r in enumerate(group.reductions):
            mode = "per_row" if r.target is aten.amax.default else "whole" if reduces_all(r) else "columns"
            reductions.append(Reduction(GEMM_REDUCTIONS[r.target], values[reduced_member(r, group)], f"red{k}",
                                        Port(f"red{k}", dtype, mode), mode == "columns", mode == "whole"))
        a_value = values[bind(gemm)[GEMMS[gemm.target][0]]] if group.prologue else "x_a"
        a_rows = Port("arows", dtype, "a_rows") if group.a_rows is not None else None
        kernel = GemmEpilogue(dtype, beta_port, tuple(ports_in), tuple(steps), values[out_nodes[0]],
                              tuple(Port(f"out{k}", dtype, "out", values[n]) for k, n in enumerate(out_nodes[1:], 1)),
                              tuple(reductions), tuple(a_steps), a_value, a_rows)
        if group.a_rows is not None and bind(group.a_rows)["self"] not in members:  # a moved column sum
            fallback.append(bind(group.a_rows)["self"])
        a_out = [group.a_rows] if group.a_rows is not None else []
        # The unfused path's inputs come last: no ports of the kernel's.
        return Plan(kernel, gemm_ab + tuple(in_nodes) + tuple(fallback), tuple(out_nodes + group.reductions + a_out),
                    group.shape)
    outputs = tuple(Port(f"out{k}", dtype, "out", values[n]) for k, n in enumerate(out_nodes))
    reduction = None
    post: list[Step] = []
    if group.reduction is not None:
        src = reduced_member(group.reduction, group)
        value = values[src] if src in values else operand(src, group.shape)  # a column sum on its own reads its input
        reduction = Reduction(REDUCTIONS[group.reduction.target], value, "red", Port("red", dtype, "reduced"),
                              reduces_columns(group.reduction), reduces_all(group.reduction))
        values[group.reduction] = "total"  # the post steps' source: the reduction's result
        for n in group.post:
            step(n, "p", post, "w")
        out_nodes.append(group.post[-1] if group.post else group.reduction)
    kernel = FusedKernel(tuple(ports_in), tuple(steps), outputs, reduction, words,
                         _selects(group.nodes), tuple(post))
    return Plan(kernel, tuple(in_nodes), tuple(out_nodes), group.shape)
