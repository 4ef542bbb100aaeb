"""The cross entropy under torch.compile: nll_loss (forward and backward) traced as class selections
that fuse into the log_softmax chains around them.

Eager, `nll_loss_forward` and `nll_loss_backward` are host functions (host/ps/fpga_loss.cpp) that
make a one-hot mask of the target with table kernels and copies: about 20 launches each. Here they
decompose into two ops a fused kernel computes from its column counter and an int64 target read
once per row:

- `aten_fpga::class_select(self, target, ignore_index, classes)`: `self` (broadcast to
  [N, classes]) where the column is the row's target and the target is not ignored, else 0 -- the
  table's `where` with the condition `j == target[r] != ignore_index`;
- `aten_fpga::target_valid(target, ignore_index, classes, dtype)`: per row ([N, 1]) 1 when the
  target is a class (0 <= t < classes) and not ignored, else 0 -- the rows eager's total weight
  counts.

Only `weight=None` with the mean reduction over [N, C] inputs is decomposed (the cross entropy of a
classifier); other cases stay the eager host ops. Off the target both give 0 where eager's
one-hot product gives a zero of either sign; everywhere else the values are eager's (the selected
element itself, its negation and division by the count as eager rounds them; the loss's sum adds
the same picked values in another order).

`row_sums_of_selections` rewrites the one sum that would split the backward in two: log_softmax's
backward sums the gradient over the classes, and the row sum of a class selection of a per-row (or
one) value is that value where the row's target is valid, else 0 -- exactly, since every other term
is a zero -- so the backward is one fused kernel."""
from __future__ import annotations

import torch
import torch.fx as fx

aten = torch.ops.aten

_MEAN = 1  # at::Reduction::Mean


def _hits(target: torch.Tensor, ignore_index: int, classes: int) -> torch.Tensor:
    """[N, classes] bool: column j is row r's target and that is not ignored (the unfused path: eq
    against the class indices with the ignored one replaced by `classes`, as eager's nll_loss)."""
    index = torch.arange(classes, dtype=torch.int64)
    if 0 <= ignore_index < classes:
        index[ignore_index] = classes
    return torch.eq(target, index.to(target.device))


@torch.library.custom_op("aten_fpga::class_select", mutates_args=())
def class_select(self: torch.Tensor, target: torch.Tensor, ignore_index: int, classes: int) -> torch.Tensor:
    """`self` broadcast to [N, classes] where column j is `target[r]` (an [N, 1] int64) and not
    `ignore_index`, else 0."""
    zero = torch.zeros((), dtype=self.dtype, device=self.device)
    return torch.where(_hits(target, ignore_index, classes), self, zero)


@class_select.register_fake
def _(self, target, ignore_index, classes):
    return self.new_empty(torch.broadcast_shapes(self.shape, (target.shape[0], classes)))


@torch.library.custom_op("aten_fpga::target_valid", mutates_args=())
def target_valid(target: torch.Tensor, ignore_index: int, classes: int, dtype: torch.dtype) -> torch.Tensor:
    """[N, 1] of `dtype`: 1 where `target[r]` (an [N, 1] int64) is a class and not `ignore_index`."""
    ones = torch.ones((), dtype=dtype, device=target.device)
    return class_select(ones, target, ignore_index, classes).sum(-1, keepdim=True)


@target_valid.register_fake
def _(target, ignore_index, classes, dtype):
    return target.new_empty((target.shape[0], 1), dtype=dtype)


CLASS_SELECT = torch.ops.aten_fpga.class_select.default
TARGET_VALID = torch.ops.aten_fpga.target_valid.default


def _decomposable(self, target, weight, reduction) -> bool:
    """A classifier's mean loss without class weights, of a static number of classes."""
    return (weight is None and reduction == _MEAN and self.dim() == 2 and target.dim() == 1
            and target.dtype == torch.int64 and isinstance(self.shape[1], int)
            and self.dtype in (torch.float32, torch.float16))


def _nll_loss_forward(self, target, weight, reduction, ignore_index):
    if not _decomposable(self, target, weight, reduction):
        return NotImplemented
    classes, t = self.shape[1], target.unsqueeze(1)
    total_weight = torch.ops.aten_fpga.target_valid(t, ignore_index, classes, self.dtype).sum()
    picked = torch.ops.aten_fpga.class_select(self, t, ignore_index, classes)
    return torch.div(torch.neg(torch.sum(picked)), total_weight), total_weight  # eager's order


def _nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    if not _decomposable(self, target, weight, reduction):
        return NotImplemented
    scale = torch.neg(torch.div(grad_output, total_weight))  # eager's -(grad / total weight)
    return torch.ops.aten_fpga.class_select(scale, target.unsqueeze(1), ignore_index, self.shape[1])


def decompositions() -> dict:
    return {aten.nll_loss_forward.default: _nll_loss_forward, aten.nll_loss_backward.default: _nll_loss_backward}


def row_sums_of_selections(graph: fx.Graph) -> None:
    """Rewrites `sum(class_select(v, t, ...), [-1], keepdim=True)` with `v` one value per row (or
    one value) to `target_valid(t, ...) * v`: the same values (v + zeros, or zeros), no reduction."""
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.sum.dim_IntList or len(node.args) < 3:
            continue
        sel, dims, keepdim = node.args[:3]
        if not (keepdim is True and isinstance(sel, fx.Node) and sel.target is CLASS_SELECT and node.kwargs == {}):
            continue
        value, target, ignore_index, classes = sel.args
        rank = sel.meta["val"].dim()
        per_row = value.meta["val"].numel() == 1 or tuple(value.meta["val"].shape[-1:]) == (1,)
        if [d % rank for d in dims] != [rank - 1] or rank != 2 or not per_row:
            continue
        with graph.inserting_before(node):
            valid = graph.call_function(TARGET_VALID, (target, ignore_index, classes, node.meta["val"].dtype))
            valid.meta["val"] = node.meta["val"].new_empty(node.meta["val"].shape)
            product = graph.call_function(aten.mul.Tensor, (valid, value))
            product.meta = dict(node.meta)
        node.replace_all_uses_with(product)
        graph.erase_node(node)
