"""The dynamo backend "aten_fpga": `torch.compile(model, backend="aten_fpga")`.

AOTAutograd traces the model (and, for training, its backward) to aten-level FX graphs; each graph
is partitioned (fuse.partition) and every fusion group replaced by one call of its fused kernel
(runner.FusedGroup); convolutions become calls of the conv kernels (conv.py). Every other node
still runs through eager dispatch on "fpga": the table's kernels or the counted CPU fallback."""
from __future__ import annotations

import contextlib
import operator

import torch
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition

from .conv import fuse_convolutions, kernels_of
from .fuse import partition
from .runner import FusedGroup, prebuild

aten = torch.ops.aten

# Composite ops traced through their decompositions so that their pointwise parts fuse: without
# them each is a host function launching several table kernels that no chain can join.
_DECOMPOSE = [aten._softmax, aten._softmax_backward_data, aten._log_softmax, aten._log_softmax_backward_data,
              aten.native_layer_norm_backward, aten.mse_loss, aten.mse_loss_backward,
              aten.silu, aten.silu_backward,
              aten.var_mean]  # layer_norm's: var and mean are table kernels, var_mean is not


# Ops with table kernels that PyTorch's Python decompositions (`py_impl` at the Autograd and
# CompositeImplicitAutograd keys, which AOTAutograd's tracing runs) would take apart into index,
# clamp and index_put ops: an upsampling becomes ~20 launches forward and backward where the table
# runs it in 1-2. While the backend traces, they stay whole, with their derivative formulas.
_KEEP_WHOLE = [getattr(aten, f"upsample_{mode}2d") for mode in ("nearest", "bilinear", "bicubic")]


@contextlib.contextmanager
def _kept_whole():
    keys = (torch._C.DispatchKey.Autograd, torch._C.DispatchKey.CompositeImplicitAutograd)
    ops = [getattr(packet, name) for packet in _KEEP_WHOLE for name in ("default", "vec")]
    hidden = {op: {k: op.py_kernels.pop(k) for k in keys if k in op.py_kernels} for op in ops}
    for op in ops:
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, kernels in hidden.items():
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()


def decompositions() -> dict:
    from torch._decomp import get_decompositions

    from .loss import decompositions as class_selections

    return {**get_decompositions(_DECOMPOSE), **class_selections()}  # nll_loss: compile/loss.py


# How the graph's code calls these ops: a Tensor method (its name) or a torch function. An aten
# overload called from Python (`torch.ops.aten.view.default(x, size)`) matches its arguments
# against the op's schema, ~5-10 us a call; the method's or function's generated argument parser
# takes ~1 us and dispatches to the same overload (tests/test_compile_fused.py checks each resolves
# to it). Views are most of a graph's nodes.
FAST_CALLS = {aten.view.default: "view", aten.t.default: "t", aten.transpose.int: "transpose",
              aten.expand.default: "expand", aten.permute.default: "permute", aten.unsqueeze.default: "unsqueeze",
              aten.squeeze.dim: "squeeze", aten.squeeze.dims: "squeeze", aten.select.int: "select",
              aten.detach.default: "detach", aten.clone.default: "clone", aten.sum.dim_IntList: "sum",
              aten.mm.default: torch.mm, aten.bmm.default: torch.bmm, aten.cat.default: torch.cat,
              aten.embedding.default: torch.embedding, aten.native_layer_norm.default: torch.native_layer_norm,
              aten.add.Tensor: torch.add, aten.sub.Tensor: torch.sub, aten.mul.Tensor: torch.mul,
              aten.div.Tensor: torch.div, aten.where.self: torch.where, aten.amax.default: torch.amax}


def fuse_graph(gm: fx.GraphModule, example_inputs=None) -> fx.GraphModule:
    """`gm` with every fusion group replaced by a call of its FusedGroup submodule."""
    graph = gm.graph
    _transposed_products(graph)
    convolutions = fuse_convolutions(gm)
    modules = []
    for k, group in enumerate(partition(gm)):
        module = FusedGroup(group, gm)
        modules.append(module)
        name = f"fused_{k}"
        gm.add_submodule(name, module)
        p = module.plan
        members = group.members
        last = max(members, key=_position(graph))
        with graph.inserting_after(last):
            call = graph.call_module(name, tuple(p.inputs))
        with graph.inserting_after(call):
            gets = [graph.call_function(operator.getitem, (call, i)) for i in range(len(p.outputs))]
        for n, get in zip(p.outputs, gets):
            get.meta = dict(n.meta)  # a later group planned from it needs its shape and dtype
            n.replace_all_uses_with(get)
        for n in sorted(members, key=_position(graph), reverse=True):
            graph.erase_node(n)
    _topological_order(graph)
    _fast_calls(graph)
    graph.lint()
    gm.recompile()
    prebuild([m.plan.kernel for m in modules] + kernels_of(convolutions))
    return gm


def _transposed_products(graph: fx.Graph) -> None:
    """Rewrites a dense copy of a product's transpose -- `clone(transpose(mm(a, b)))` (through views
    of the product that keep its shape), as autograd makes for a gradient it needs in the other
    layout -- to the product of the transposed operands, `mm(b^T, a^T)`: the GEMM kernel reads
    transposed operands in place, so the copy kernel goes. Each element sums the same products
    (b * a for a * b) in the same k order: the values are bit-identical."""
    for clone in list(graph.nodes):
        if clone.target is not aten.clone.default or clone.kwargs.get("memory_format") is not torch.contiguous_format:
            continue
        t = clone.args[0]
        if not (isinstance(t, fx.Node) and t.target is aten.transpose.int and len(t.users) == 1):
            continue
        product, rank = t.args[0], t.meta["val"].dim()
        if sorted(d % rank for d in t.args[1:3]) != [rank - 2, rank - 1]:
            continue
        while (product.target in (aten.view.default, aten._unsafe_view.default) and len(product.users) == 1
               and product.meta["val"].shape == product.args[0].meta["val"].shape):
            product = product.args[0]
        if (product.target not in (aten.mm.default, aten.bmm.default) or product.meta["val"].dim() != rank
                or len(product.users) != 1):  # else the product would run twice
            continue
        with graph.inserting_before(clone):
            swapped = []
            for operand in reversed(product.args[:2]):
                tr = graph.call_function(aten.transpose.int, (operand, -1, -2))
                tr.meta["val"] = operand.meta["val"].transpose(-1, -2)
                swapped.append(tr)
            new = graph.call_function(product.target, tuple(swapped))
            new.meta = dict(clone.meta)
        clone.replace_all_uses_with(new)
        dead = clone
        while isinstance(dead, fx.Node) and not dead.users:  # the clone, the transpose, the views, the product
            below = dead.args[0]
            graph.erase_node(dead)
            dead = below


def _fast_calls(graph: fx.Graph) -> None:
    """Calls of the ops in FAST_CALLS become calls of their Tensor methods or torch functions."""
    for n in list(graph.nodes):
        fast = FAST_CALLS.get(n.target) if n.op == "call_function" else None
        if fast is None or not isinstance(n.args[0], (fx.Node, list)):
            continue
        with graph.inserting_before(n):
            m = (graph.call_method if isinstance(fast, str) else graph.call_function)(fast, n.args, n.kwargs)
        m.meta = n.meta
        n.replace_all_uses_with(m)
        graph.erase_node(n)


def _position(graph: fx.Graph):
    order = {n: i for i, n in enumerate(graph.nodes)}
    return lambda n: order[n]


def _topological_order(graph: fx.Graph) -> None:
    """Reorders the nodes so each follows its inputs (a group's call sits at its last node, which
    may come after a user of one of its earlier values), keeping the original order otherwise."""
    placed, order = set(), []
    for root in list(graph.nodes):
        stack = [(root, False)]
        while stack:  # depth first, inputs before users; iterative: graphs run thousands of nodes deep
            n, inputs_done = stack.pop()
            if inputs_done:
                order.append(n)
            elif n not in placed:
                placed.add(n)
                stack.append((n, True))
                stack.extend((a, False) for a in reversed(n.all_input_nodes) if a not in placed)
    prev = None
    for n in order:
        if prev is not None and prev.next is not n:
            prev.append(n)
        prev = n


def _compiler(gm: fx.GraphModule, example_inputs):
    return make_boxed_func(fuse_graph(gm))  # AOTAutograd passes arguments boxed (a list it may free)


def aten_fpga_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The dynamo backend: AOTAutograd with fused forward and backward graphs. The forward saves
    for the backward what the min-cut partitioner (Inductor's) picks: the fewest bytes, with
    pointwise values recomputed in the backward where that is cheaper -- the MLP's loss saves one
    tensor, the scaled difference, instead of the output and the target."""
    with _kept_whole():  # the forward and the joint graph are traced here; the backward's compile comes later
        return aot_autograd(fw_compiler=_compiler, bw_compiler=_compiler, decompositions=decompositions(),
                            partition_fn=min_cut_rematerialization_partition,
                            **kwargs)(gm, example_inputs)
