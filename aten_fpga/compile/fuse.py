"""Fusion groups: which nodes of an aten-level FX graph become one fused kernel, and the kernel's
model (frozen dataclasses; the codegen renders them, codegen.py).

A group is a maximal set of pointwise nodes of one dtype and one shape (inputs may broadcast: a
trailing row, one value per row, or one value), optionally ending in one reduction over the last
dim. Every pointwise node maps to an op of the kernel library (kernels/hls/<category>/ops.yaml)
through POINTWISE below, so the fused kernel computes with the table kernels' own element
functions."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx as fx

from codegen import library as kernel_library
from codegen.model import DTYPES, DType, KernelOp
from codegen.plan import HLS_ROOT

aten = torch.ops.aten

# The most pointer arguments a kernel may have (kernels/hls/emu/image.h), less its two sizes.
MAX_PORTS = 14


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
    port: Port  # one element per row


@dataclass(frozen=True)
class FusedKernel:
    inputs: tuple[Port, ...]
    steps: tuple[Step, ...]
    outputs: tuple[Port, ...]
    reduction: Reduction | None

    @property
    def ports(self) -> tuple[Port, ...]:
        return self.inputs + self.outputs + ((self.reduction.port,) if self.reduction else ())

    @property
    def name(self) -> str:
        """v_fused_<hash of what it computes>: the same graph gives the same kernel in any process."""
        return "v_fused_" + hashlib.sha256(repr(self).encode()).hexdigest()[:16]

    @property
    def lanes(self) -> int:
        return 512 // max(p.dtype.bits for p in self.ports)


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

# Reductions that may end a chain: over the last dim only (the kernel's rows).
REDUCTIONS = {
    aten.sum.dim_IntList: "afpga::reduce::Sum",
    aten.mean.dim: "afpga::reduce::Mean",
    aten.amax.default: "afpga::reduce::Max",
}

# The dtypes fused kernels are generated for: those the element functions are exact or
# ulp-bounded in for every op above.
DTYPES_FUSED = (torch.float32,)

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
    v = _meta(node)
    if node.op != "call_function" or node.target not in POINTWISE or v is None or v.dtype not in DTYPES_FUSED:
        return False
    args = bind(node)
    if library_op(POINTWISE[node.target].op_for(args)).port_dtypes:
        return False
    for name in POINTWISE[node.target].operands:
        a = args[name]
        m = _meta(a)
        if isinstance(a, fx.Node) and (m is None or m.dtype != v.dtype):
            return False
        if not isinstance(a, (fx.Node, int, float)) or isinstance(a, bool):
            return False
    return True


def reduction_ok(node: fx.Node, full) -> bool:
    if node.op != "call_function" or node.target not in REDUCTIONS:
        return False
    args = bind(node)
    src, v = _meta(args["self"]), _meta(node)
    if src is None or v is None or v.dtype != src.dtype or not _same_shape(src.shape, full) or len(full) == 0:
        return False
    dims = args.get("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return args.get("dtype") is None and [d % len(full) for d in dims] == [len(full) - 1]


@dataclass
class Group:
    nodes: list
    shape: tuple
    dtype: torch.dtype
    reduction: fx.Node | None = None


def _ports_needed(nodes: list, reduction) -> int:
    members = set(nodes) | ({reduction} if reduction else set())
    inputs = {a for n in members for a in n.all_input_nodes if a not in members}
    outputs = {n for n in nodes if any(u not in members for u in n.users)}
    return len(inputs) + len(outputs) + (1 if reduction else 0)


def partition(gm: fx.GraphModule) -> list[Group]:
    """Groups of fusible nodes in graph order. A node joins the group of one of its inputs when
    shape and dtype match and no other path leads from the group to it (the group runs at its last
    node, so it must not wait for a node that waits for it); a reduction closes its group."""
    group_of: dict[fx.Node, Group] = {}
    after: dict[fx.Node, set] = {}  # the groups a node depends on through nodes outside them
    groups: list[Group] = []
    for node in gm.graph.nodes:
        deps = set()
        for a in node.all_input_nodes:
            deps |= after.get(a, set())
            if a in group_of:
                deps.add(id(group_of[a]))
        chosen = None
        v = _meta(node)
        candidates = [group_of[a] for a in node.all_input_nodes if a in group_of]
        for g in candidates:
            if g.reduction is not None:
                continue
            through_other = any(id(g) in after.get(a, set()) for a in node.all_input_nodes if group_of.get(a) is not g)
            if through_other:
                continue
            if pointwise_ok(node) and _same_shape(v.shape, g.shape) and v.dtype == g.dtype:
                if _ports_needed(g.nodes + [node], None) <= MAX_PORTS:
                    chosen = g
                    break
            elif reduction_ok(node, g.shape) and bind(node)["self"] in g.nodes and _meta(node).dtype == g.dtype:
                if _ports_needed(g.nodes, node) <= MAX_PORTS:
                    g.reduction = node
                    group_of[node] = g
                    break
        if chosen is not None:
            chosen.nodes.append(node)
            group_of[node] = chosen
        elif node not in group_of and pointwise_ok(node):
            g = Group([node], tuple(v.shape), v.dtype)
            groups.append(g)
            group_of[node] = g
        own = id(group_of[node]) if node in group_of else None
        after[node] = {d for d in deps if d != own} if own is not None else deps
    return [g for g in groups if len(g.nodes) + (g.reduction is not None) >= 2]


def _literal(value) -> str:
    """A C++ double constant that round-trips `value` (C++14: no hex floats)."""
    v = float(value)
    if math.isnan(v):
        return "double(NAN)"
    if math.isinf(v):
        return "double(INFINITY)" if v > 0 else "double(-INFINITY)"
    text = repr(v)
    return f"double({text})"


@dataclass(frozen=True)
class Plan:
    """A group, as the graph and the kernel see it: the graph nodes feeding each input port, the
    nodes whose values each output port stores, and the kernel."""

    kernel: FusedKernel
    inputs: tuple  # fx.Node per input port
    outputs: tuple  # fx.Node per output port (the reduction's last)
    shape: tuple  # the chain's full shape (symbolic sizes allowed)


def plan(group: Group, modes: dict | None = None) -> Plan:
    """The kernel of `group`. `modes` overrides an input's mode (the runner materializes inputs
    whose broadcast the kernel cannot read)."""
    members = set(group.nodes) | ({group.reduction} if group.reduction else set())
    dtype = DTYPES[str(group.dtype).replace("torch.", "")]
    in_nodes: list = []
    ports_in: list[Port] = []
    values: dict = {}

    def operand(a, step_ix: int) -> str:
        if isinstance(a, fx.Node):
            if a in values:
                return values[a]
            if a not in in_nodes:
                m = (modes or {}).get(a) or input_mode(tuple(_meta(a).shape), group.shape) or "full"
                in_nodes.append(a)
                ports_in.append(Port(f"in{len(ports_in)}", DTYPES[str(_meta(a).dtype).replace("torch.", "")], m))
            return f"x_{ports_in[in_nodes.index(a)].name}"
        return f"f{step_ix}::M(f{step_ix}::T({_literal(a)}))"  # a number operand: ATen's wrapped scalar

    steps = []
    for i, n in enumerate(group.nodes):
        spec = POINTWISE[n.target]
        args = bind(n)
        op = library_op(spec.op_for(args))
        fns = dict(spec.scalars)
        scalars = tuple(f"f{i}::S_{s.name}({_literal(fns[s.name](args))})" for s in op.scalars)
        steps.append(Step(f"v{i}", op, dtype, tuple(operand(args[o], i) for o in spec.operands), scalars))
        values[n] = f"v{i}"
    out_nodes = [n for n in group.nodes if any(u not in members for u in n.users)]
    outputs = tuple(Port(f"out{k}", dtype, "out", values[n]) for k, n in enumerate(out_nodes))
    reduction = None
    if group.reduction is not None:
        src = bind(group.reduction)["self"]
        reduction = Reduction(REDUCTIONS[group.reduction.target], values[src], "red", Port("red", dtype, "reduced"))
        out_nodes.append(group.reduction)
    kernel = FusedKernel(tuple(ports_in), tuple(steps), outputs, reduction)
    return Plan(kernel, tuple(in_nodes), tuple(out_nodes), group.shape)
