"""Convolutions of a compiled graph as kernels of their own (kernels/hls/conv/): eager runs a
convolution as im2col on the device and a GEMM, so its col matrix -- every input element once per
window that covers it -- goes out to device memory and back, in the forward and again in the
backward. A compiled graph's 2-d convolution instead runs direct: the weights and one image's planes
on chip, the windows summed there, in im2col order (channel, window row, window column), as eager's
GEMM sums them.

  convolution           one kernel, with the pointwise chain after it (the ReLU) in its store stage
  convolution_backward  grad_weight and grad_bias in one kernel (the products summed over the batch
                        on chip), grad_input in another: a stride-1 convolution of grad_output with
                        the weights transposed and flipped

A convolution the kernels do not take -- transposed, grouped, strided input gradients, planes larger
than the on-chip buffers, another dtype -- runs its original node, through eager dispatch."""
from __future__ import annotations

import functools
import hashlib
import operator
import types
from dataclasses import dataclass

import torch
import torch.fx as fx

from .. import _C
from .fuse import DTYPES, POINTWISE, DType, Step, _meta, bind, constant, pointwise_ok, pointwise_step

aten = torch.ops.aten

# On-chip buffers of a conv kernel, in elements: one image's input planes with their padding, one
# image's output planes (grad_output's, for the weight gradient), the weights, the output planes'
# biases, and the weight gradient's per-column sums of an output row.
CAPS = {"image": 16384, "out": 16384, "weights": 16384, "outs": 1024, "row": 256}
# The weight gradient sums a window row's taps side by side: its kernel is made for one window
# width, at most MAX_KW, and column stride and dilation 1 (other weight gradients run unfused).
MAX_KW = 8
# Output planes a conv kernel computes side by side: one input pixel meets LANES_O planes' weights
# per cycle (LANES_O multiply-adds); its output planes are held in blocks of LANES_O. The forward
# and input gradient kernels take LANES_X pixels of a row at once besides.
LANES_O = 16
LANES_X = 8
# A kernel adds into a pixel's sum once per tap (LANES_X pixels per cycle), and the weight gradient
# into a column's once per row: planes of fewer pixels, or rows of fewer columns, than that many
# cycles of the float adder's latency (8) would break II=1, so such convolutions run unfused.
MIN_PIXELS = 8 * LANES_X
MIN_ROW = 8
# What this process's conv kernels did: their multiply-adds, and their cycles at II=1 as written
# (the window-summing stage's loops; pipeline fills not counted). bench/perf_model.py --compile
# projects a card's compiled step from them, and eager's convolutions from the multiply-adds on the
# GEMM kernel's PE array.
WORK = {"macs": 0, "cycles": 0}
SIZES = ("batch", "channels", "height", "width", "outs", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "oh", "ow")


@dataclass(frozen=True)
class ConvKernel:
    """A direct convolution kernel (kernels/hls/conv). `role`: forward (ports image, weight[, bias]
    -> one output per value of `values`: `conv`, the sum plus the bias rounded to the dtype, or a
    value of `steps`, the chain after it), input_grad (grad_output as the image, the weights read
    transposed and flipped -> grad_input), weight_grad (image, grad -> grad_weight[, grad_bias])."""

    dtype: DType
    role: str
    bias: bool = False
    steps: tuple[Step, ...] = ()
    values: tuple[str, ...] = ("conv",)
    kw: int = 0  # weight_grad: the window's width (its taps of a row are summed side by side)

    @property
    def inputs(self) -> tuple[str, ...]:
        if self.role == "weight_grad":
            return ("image", "grad")
        return ("image", "weight", "bias") if self.bias else ("image", "weight")

    @property
    def outputs(self) -> tuple[str, ...]:
        if self.role == "weight_grad":
            return ("grad_weight", "grad_bias") if self.bias else ("grad_weight",)
        return tuple(f"out{k}" for k in range(len(self.values)))

    @functools.cached_property
    def name(self) -> str:
        return "v_fused_conv_" + hashlib.sha256(repr(self).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Geometry:
    """A 2-d convolution's static arguments."""

    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]

    def sizes(self, image: torch.Size, outs: int, kernel: tuple[int, int], plane: tuple[int, int]) -> list[int]:
        """The kernel's size arguments for `image` [N, C, H, W] making `outs` planes of `plane`."""
        n, c, h, w = image
        return [n, c, h, w, outs, *kernel, *self.stride, *self.padding, *self.dilation, *plane]

    def out_plane(self, h: int, w: int, kh: int, kw: int) -> tuple[int, int]:
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.padding, self.dilation
        return (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1

    def flipped(self, kh: int, kw: int) -> Geometry | None:
        """The geometry of the input gradient as a convolution of grad_output (stride 1 only)."""
        (ph, pw), (dh, dw) = self.padding, self.dilation
        pad = (dh * (kh - 1) - ph, dw * (kw - 1) - pw)
        if self.stride != (1, 1) or min(pad) < 0:
            return None
        return Geometry((1, 1), pad, self.dilation)


def _geometry(args: dict) -> Geometry | None:
    """The convolution's geometry when the kernels take it: 2-d, not transposed, one group."""
    pair = lambda v: tuple(v) * 2 if len(v) == 1 else tuple(v)  # noqa: E731
    if args.get("transposed") or args.get("groups", 1) != 1 or any(p != 0 for p in args.get("output_padding") or ()):
        return None
    if any(isinstance(x, fx.Node) or any(isinstance(e, fx.Node) for e in x)
           for x in (args["stride"], args["padding"], args["dilation"])):
        return None
    geometry = Geometry(pair(args["stride"]), pair(args["padding"]), pair(args["dilation"]))
    return geometry if all(len(v) == 2 for v in (geometry.stride, geometry.padding, geometry.dilation)) else None


def _float32_4d(*nodes) -> bool:
    return all(_meta(n) is not None and _meta(n).dtype == torch.float32 and _meta(n).dim() == 4 for n in nodes)


def _chain(conv: fx.Node) -> list:
    """The pointwise ops after `conv` that its store stage applies: each the only user of the one
    before, of the same shape, whose other operands are numbers (a ReLU's 0)."""
    chain, value = [], conv
    while len(value.users) == 1:
        (u,) = value.users
        if not pointwise_ok(u) or _meta(u).shape != _meta(conv).shape:
            break
        args = bind(u)
        operands = [args[o] for o in POINTWISE[u.target].operands]
        if [a for a in operands if isinstance(a, fx.Node)] != [value]:
            break
        chain.append(u)
        value = u
    return chain


def _steps(chain: list, dtype: DType) -> tuple[dict, tuple[Step, ...]]:
    """The chain's steps over the value `conv`, and each node's value."""
    values: dict = {}
    steps = []
    for i, n in enumerate(chain):
        name = lambda a, i=i: values.get(a, "conv") if isinstance(a, fx.Node) else constant(a, "f", i)  # noqa: E731
        steps.append(pointwise_step(n, "f", i, f"v{i}", dtype, name))
        values[n] = f"v{i}"
    return values, tuple(steps)


class ConvForward(torch.nn.Module):
    """A convolution and its chain as one kernel; called with (input, weight[, bias]), returns the
    chain's values that leave it."""

    def __init__(self, kernel: ConvKernel, geometry: Geometry, unfused: fx.GraphModule):
        super().__init__()
        self.kernel, self.geometry, self.unfused = kernel, geometry, unfused

    def forward(self, x, weight, bias=None):
        kh, kw = weight.shape[2:]
        plane = self.geometry.out_plane(x.shape[2], x.shape[3], kh, kw)
        sizes = self.geometry.sizes(x.shape, weight.shape[0], (kh, kw), plane)
        operands = [x, weight] + ([bias] if self.kernel.bias else [])
        out_shape = (x.shape[0], weight.shape[0], *plane)
        if not _runs(self.kernel, operands, sizes):
            return self.unfused(*operands)
        outs = [torch.empty(out_shape, dtype=x.dtype, device=x.device) for _ in self.kernel.values]
        _run(self.kernel, operands, outs, sizes)
        return tuple(outs)

    __call__ = forward  # called every step from the graph's code: no Module hooks to check


class ConvBackward(torch.nn.Module):
    """convolution_backward as its two kernels: returns (grad_input, grad_weight, grad_bias) as
    the node does, None where its output_mask is false."""

    def __init__(self, geometry: Geometry, mask: tuple, args: tuple, kw):
        super().__init__()
        f32 = DTYPES["float32"]
        self.geometry, self.mask, self.args = geometry, mask, args  # args: the node's static arguments
        rows_ok = (isinstance(kw, int) and kw <= MAX_KW and geometry.stride[1] == 1 and geometry.dilation[1] == 1)
        self.weight_grad = ConvKernel(f32, "weight_grad", bias=mask[2], kw=kw) if mask[1] and rows_ok else None
        self.input_grad = ConvKernel(f32, "input_grad") if mask[0] else None

    @property
    def kernels(self) -> list:
        return [k for k in (self.weight_grad, self.input_grad) if k is not None]

    def forward(self, grad, x, weight):
        from .runner import _port

        kh, kw = weight.shape[2:]
        plane = tuple(grad.shape[2:])
        if grad.device.type == "fpga":
            grad = _port(grad)  # once for both kernels (autograd's gradient of a sum is an expanded 1)
        grad_input = grad_weight = grad_bias = None
        undone = list(self.mask)
        if self.weight_grad is not None:
            sizes = self.geometry.sizes(x.shape, weight.shape[0], (kh, kw), plane)
            if _runs(self.weight_grad, [x, grad], sizes):
                grad_weight = torch.empty_like(weight, memory_format=torch.contiguous_format)
                outs = [grad_weight]
                if self.mask[2]:
                    grad_bias = torch.empty(weight.shape[0], dtype=weight.dtype, device=weight.device)
                    outs.append(grad_bias)
                _run(self.weight_grad, [x, grad], outs, sizes)
                undone[1] = undone[2] = False
        flipped = self.geometry.flipped(kh, kw)
        if self.input_grad is not None and flipped is not None:
            sizes = flipped.sizes(grad.shape, x.shape[1], (kh, kw), tuple(x.shape[2:]))
            if _runs(self.input_grad, [grad, weight], sizes):
                grad_input = torch.empty(x.shape, dtype=x.dtype, device=x.device)
                _run(self.input_grad, [grad, weight], [grad_input], sizes)
                undone[0] = False
        if any(undone):  # the rest through eager dispatch: the table's im2col and GEMM
            rest = aten.convolution_backward.default(grad, x, weight, *self.args, undone)
            grad_input, grad_weight, grad_bias = (r if u else mine for r, u, mine in
                                                  zip(rest, undone, (grad_input, grad_weight, grad_bias)))
        return grad_input, grad_weight, grad_bias

    __call__ = forward


def _runs(kernel: ConvKernel, operands: list, sizes: list) -> bool:
    """Whether `kernel` takes this call: fpga float32 operands, planes that fit on chip, and the
    kernel on the device."""
    from .runner import RECORDED, available

    n, c, h, w, outs, kh, kw, _, _, ph, pw = sizes[:11]
    oh, ow = sizes[-2:]
    image, out = c * (h + 2 * ph) * (w + 2 * pw), -(-outs // LANES_O) * LANES_O * oh * ow  # whole blocks
    if (any(t.device.type != "fpga" or t.dtype != torch.float32 for t in operands) or min(n, c * h * w, out) <= 0
            or image > CAPS["image"] or out > CAPS["out"] or -(-outs // LANES_O) * LANES_O * c * kh * kw > CAPS["weights"]
            or outs > CAPS["outs"] or ow > CAPS["row"]
            or (oh * ow < MIN_PIXELS if kernel.role != "weight_grad" else ow < MIN_ROW or kw != kernel.kw)):
        return False
    RECORDED[kernel.name] = kernel
    return available(kernel, operands[0].device)


def _run(kernel: ConvKernel, operands: list, outs: list, sizes: list) -> None:
    from .runner import _port

    _C.fused_run(kernel.name, [_port(t) for t in operands], outs, sizes)
    macs, cycles = work(kernel, sizes)
    WORK["macs"] += macs
    WORK["cycles"] += cycles


def work(kernel: ConvKernel, sizes: list) -> tuple[int, int]:
    """(multiply-adds, cycles) of one call of `kernel` with `sizes`: the weights loaded once (the
    gradients stored once); per image its planes loaded, then per tap and block of LANES_O planes a
    pass over the output plane (LANES_X pixels of a row per cycle in the forward, which then stores
    its planes; in the weight gradient, a window row's taps per pass, after grad_output's planes
    are loaded, and each tap's columns summed: two passes over a row, the partials' tree, LANES_O
    adds)."""
    n, c, h, w, outs, kh, kw = sizes[:7]
    oh, ow = sizes[-2:]
    taps, blocks, pixels = c * kh * kw, -(-outs // LANES_O), oh * ow
    per_image = c * h * w + outs * pixels
    if kernel.role == "weight_grad":
        sums = 2 * ow + LANES_O + 4
        per_image += (c * kh * (pixels + kw * sums) + kernel.bias * (pixels + sums)) * blocks
    else:
        per_image += taps * blocks * (1 + oh * -(-ow // LANES_X)) + blocks * pixels
    return n * taps * outs * pixels, outs * taps + n * per_image


def fuse_convolutions(gm: fx.GraphModule) -> list:
    """Replaces each convolution (with its chain) and convolution_backward of `gm` that the conv
    kernels may take by a call of its module; returns the modules."""
    from .runner import _subgraph

    graph, modules = gm.graph, []
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (aten.convolution.default, aten.convolution_backward.default):
            continue
        args = bind(node)
        geometry = _geometry(args)
        if geometry is None:
            continue
        name = f"conv_{len(modules)}"
        if node.target is aten.convolution.default:
            if not _float32_4d(node, args["input"], args["weight"]):
                continue
            chain = _chain(node)
            members = [node, *chain]
            outputs = [n for n in members if any(u not in members for u in n.users)]
            values, steps = _steps(chain, DTYPES["float32"])
            kernel = ConvKernel(DTYPES["float32"], "forward", args["bias"] is not None, steps,
                                tuple(values.get(n, "conv") for n in outputs))
            inputs = tuple(a for a in (args["input"], args["weight"], args["bias"]) if a is not None)
            unfused, _ = _subgraph(gm, types.SimpleNamespace(inputs=inputs, outputs=tuple(outputs)))
            module = ConvForward(kernel, geometry, unfused)
            gm.add_submodule(name, module)
            with graph.inserting_after(members[-1]):
                call = graph.call_module(name, inputs)
            with graph.inserting_after(call):
                gets = [graph.call_function(operator.getitem, (call, k)) for k in range(len(outputs))]
            for n, get in zip(outputs, gets):
                get.meta = dict(n.meta)
                n.replace_all_uses_with(get)
            for n in reversed(members):
                graph.erase_node(n)
        else:
            if not _float32_4d(args["grad_output"], args["input"], args["weight"]):
                continue
            static = tuple(args[a] for a in ("bias_sizes", "stride", "padding", "dilation", "transposed",
                                              "output_padding", "groups"))
            module = ConvBackward(geometry, tuple(args["output_mask"]), static, _meta(args["weight"]).shape[3])
            gm.add_submodule(name, module)
            with graph.inserting_after(node):
                call = graph.call_module(name, (args["grad_output"], args["input"], args["weight"]))
            call.meta = dict(node.meta)
            node.replace_all_uses_with(call)
            graph.erase_node(node)
        modules.append(module)
    return modules


def kernels_of(modules: list) -> list:
    """The conv kernels `modules` may run (for prebuilding)."""
    return [k for m in modules for k in ([m.kernel] if isinstance(m, ConvForward) else m.kernels)]

