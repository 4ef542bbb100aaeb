"""Running a fusion group: its fused kernel (a fused pointwise chain, or a fused GEMM) when the
device can run it, else its nodes one by one (unfused eager execution, the table kernels)."""
from __future__ import annotations

import functools
import math
import os
import re
import warnings

import torch
import torch.fx as fx

from .. import _C
from . import cache
from .fuse import MAX_COLUMNS, GemmEpilogue, Group, Plan, bind, input_mode, plan, reduces_all, reduces_columns

# Every fused kernel this process ran, by name: what `export` writes for a card's build.
RECORDED: dict = {}
_loaded: dict = {}  # kernel name -> the image level its loaded object was built for
_warned: set = set()


def image_level() -> int:
    """The XCL_OPT level of the loaded image (fused kernels are generated at the same level)."""
    m = re.search(r"opt(\d)", _C.image_path(_C.current_device()))
    return int(m.group(1)) if m else 4


def available(kernel, device: torch.device) -> bool:
    """Whether `kernel` can run on `device`: compiled and loaded on demand on the emulated device;
    on a card, part of the loaded xclbin."""
    index = device.index or 0
    if _C.device_kind() == "emu":
        level = image_level()
        if _loaded.get(kernel.name) != level:  # not loaded, or built for the image loaded before
            _C.fused_load(cache.build(kernel, level))
            _loaded[kernel.name] = level
        return True
    if _C.fused_available(kernel.name, index):
        return True
    if kernel.name not in _warned:
        _warned.add(kernel.name)
        warnings.warn(f"fused kernel {kernel.name} is not in the loaded image {_C.image_path(index)!r}: running its "
                      f"{len(kernel.steps)} ops unfused. Build it in: run the model under torch.compile once, then "
                      f"`python -m aten_fpga.compile export <dir>` (or aten_fpga.compile.export) and "
                      f"`scons target=hw fused=<dir> ...`", stacklevel=3)
    return False


def prebuild(kernels: list) -> None:
    """Compiles a graph's kernels (as planned from its shapes) for the emulated device side by side,
    one g++ per core, before the first call needs them one at a time."""
    kernels = list({k.name: k for k in kernels}.values())  # one build of a kernel two groups share
    if _C.device_kind() != "emu" or not kernels:
        return
    from concurrent.futures import ThreadPoolExecutor

    level = image_level()
    with ThreadPoolExecutor(max_workers=max(1, min(len(kernels), os.cpu_count() or 1))) as pool:
        list(pool.map(lambda k: cache.build(k, level), kernels))


class FusedGroup(torch.nn.Module):
    """One fusion group of a compiled graph: called with the group's inputs, returns its outputs."""

    def __init__(self, group: Group, gm: fx.GraphModule):
        super().__init__()
        self.plan: Plan = plan(group)  # in terms of gm's nodes: where the call goes
        self.unfused, copy = _subgraph(gm, self.plan)
        # The group again over the subgraph's copies of its nodes, which outlive gm's (erased once
        # the call replaces them): the kernels of other input modes are planned from it.
        maybe = lambda n: copy[n] if n is not None else None  # noqa: E731
        self.group = Group([copy[n] for n in group.nodes], group.shape, group.dtype, maybe(group.reduction),
                           maybe(group.gemm), [copy[r] for r in group.reductions], [copy[n] for n in group.prologue],
                           a_source=maybe(group.a_source), a_operand=maybe(group.a_operand),
                           a_rows=maybe(group.a_rows), post=[copy[n] for n in group.post])
        self._variants: dict = {}  # input modes -> Plan
        self._calls: dict = {}  # the inputs' layouts -> the prepared call (None: unfused)
        # The chain's static sizes take part in its shape: a class selection is as wide as its
        # classes, which no input of it need be (compile/loss.py). Once here, not per call.
        self._static_shape = tuple(d if isinstance(d, int) else 1 for d in group.shape)
        if group.gemm is not None:
            args = bind(group.gemm)
            addmm = group.gemm.target is torch.ops.aten.addmm.default
            self.alpha = float(args.get("alpha", 1)) if addmm else 1.0
            self.beta = float(args.get("beta", 1)) if addmm else 0.0
            # Each output's shape: a view of c (the GEMM's layout); the runner allocates them.
            self.out_shapes = [tuple(n.meta["val"].shape) for n in self.plan.outputs]

    def _variant(self, modes: tuple, words: bool) -> Plan:
        if (modes, words) not in self._variants:
            placeholders = [n for n in self.unfused.graph.nodes if n.op == "placeholder"]
            self._variants[modes, words] = plan(self.group, dict(zip(placeholders, modes)), words)
        return self._variants[modes, words]

    def forward(self, *inputs):
        # A call's work is decided once per layout of its inputs (and per loaded image): which
        # kernel, how each input becomes a port, the outputs' shapes. A repeated call -- every step
        # of a training loop -- only makes its ports and outputs and launches.
        key = (_C.image_path(_C.current_device()), *map(_layout, inputs))
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = (self._prepare_gemm if self.group.gemm is not None else self._prepare)(inputs)
        if call is None:
            return self.unfused(*inputs)
        return call(inputs)

    # The graph's code calls the group every step: straight to forward, without Module.__call__'s
    # hook checks (a group has no hooks).
    __call__ = forward

    def _prepare(self, inputs):
        """The fused chain's call for inputs laid out as `inputs`, or None for the unfused path."""
        shape = torch.broadcast_shapes(*(t.shape for t in inputs), self._static_shape)
        device = next(t.device for t in inputs)
        numel = shape.numel()
        whole = self.group.reduction is not None and reduces_all(self.group.reduction)
        inner = shape[-1] if len(shape) else 1
        columns = self.group.reduction is not None and reduces_columns(self.group.reduction)
        red_shape = tuple(self.group.reduction.meta["val"].shape) if columns else ()  # one result per column
        columns_fit = all(isinstance(d, int) for d in red_shape) and math.prod(red_shape) == inner <= MAX_COLUMNS
        if numel == 0 or device.type != "fpga" or (columns and not columns_fit):
            return None
        modes, ports = [], []  # a port None: the input as it is
        for t in inputs:
            mode = input_mode(tuple(t.shape), tuple(shape))
            if mode is None:  # made dense on the device
                mode, port = "full", lambda t: _port(t.expand(shape))
            elif mode == "full" and not t.is_contiguous() and _padded_rows(t) is not None:
                mode, port = "pitched", _padded_rows  # a fused GEMM's output: read in place
            else:
                port = None if _in_place(t) else _port
            modes.append(mode)
            ports.append(port)
        # Rows (reduced, or read by a broadcast input) that are not whole words: the element form.
        rows_matter = self.group.reduction is not None or any(m in ("row", "col", "pitched") for m in modes)
        kernel = self._variant(tuple(modes), not rows_matter or inner % self.plan.kernel.lanes == 0).kernel
        if not available(kernel, device):
            RECORDED[kernel.name] = kernel
            return None
        out_shapes = [shape] * len(kernel.outputs)
        if kernel.reduction is not None:
            red = self.group.reduction.meta["val"]
            keep = red.dim() == len(shape)
            kept = (1,) * len(shape) if whole else (*shape[:-1], 1)
            reduced = () if whole else shape[:-1]
            out_shapes.append(red_shape if columns else kept if keep else reduced)
        return _launcher(kernel, ports, [_allocation(s, self.group.dtype, device) for s in out_shapes], [numel, inner])

    def _prepare_gemm(self, inputs):
        """The fused GEMM's call: c = alpha * a @ b + beta * self with its epilogue, when the
        kernel can address every port (else None: the table's GEMM, then the chain). With a
        prologue, `a` is its source laid out as a, and the source itself comes last (the unfused
        path's)."""
        a, b, *rest = inputs
        kernel = self.plan.kernel
        operands = rest[:len(kernel.inputs)]
        rank = 3 if self.group.gemm.target is torch.ops.aten.bmm.default else 2
        batch = a.shape[0] if rank == 3 else 1
        m, n = (batch * a.shape[-2], b.shape[-1]) if a.dim() == rank and b.dim() == rank else (0, 0)  # c's rows
        level = image_level() if _C.device_kind() == "emu" else 4
        expected = {"full": m * n, "row": n, "col": m, "scalar": 1}
        static = all(isinstance(d, int) for s in self.out_shapes for d in s)
        # The rows' sums of op(a) are taken as a streams in transposed (its rows are stored columns),
        # which the GEMM driver does in place when a's lines start whole words at level 4 (else it
        # would pack a copy, not transposed: host/ps/fpga_gemm.cpp, operand).
        words = kernel.lanes if level == 4 else 1
        a_rows_ok = kernel.a_rows is None or (a.dim() == 2 and a.stride(0) == 1 and a.stride(1) >= a.shape[0]
                                              and a.stride(1) % words == 0 and a.storage_offset() % words == 0)
        if (m * n == 0 or a.device.type != "fpga" or not static or not a_rows_ok
                or any(t.numel() != expected[p.mode] for t, p in zip(operands, kernel.inputs))
                or math.prod(self.out_shapes[0]) != m * n):
            return None
        if not available(kernel, a.device):
            RECORDED[kernel.name] = kernel
            return None
        # At level 4 the write stage stores whole words: rows of c and of the ports laid out as c
        # are padded to whole words (`pitch`) when n is not, and the outputs are views of them.
        lanes = kernel.lanes if level == 4 else 1
        pitch = -(-n // lanes) * lanes
        port_modes = [p.mode for p in kernel.inputs]
        out_modes = ["out", *(p.mode for p in kernel.ports[len(kernel.inputs):])]  # c, then its further ports
        # Bands of rows on several compute units when each port's band is its own rows: one batch
        # item, and no sum over rows (its running sums would race); a row maximum is per row.
        bands = batch == 1 and all(r.port.mode == "per_row" for r in kernel.reductions)
        row_elements = {"full": pitch, "out": pitch, "col": 1, "per_row": 1, "a_rows": 1}
        strides = [row_elements.get(p.mode, 0) for p in kernel.ports] if bands else []
        ports = [None, None] + [None if _gemm_in_place(t, mode, n, pitch) else
                                functools.partial(_gemm_port, mode=mode, m=m, n=n, pitch=pitch)
                                for t, mode in zip(rest, port_modes)]
        allocations = [_allocation(shape, self.group.dtype, a.device, (m, pitch) if mode == "out" else
                                   (pitch,) if mode == "columns" else None, n)
                       for shape, mode in zip(self.out_shapes, out_modes)]
        return _launcher(kernel, ports, allocations, strides, gemm=(self.alpha, self.beta))


def _allocation(shape, dtype, device, padded=None, n=None):
    """A function making an output of `shape`: a new tensor, or a view of new rows padded to
    whole words (`padded`: their shape; the view keeps the first `n` elements of each row)."""
    if padded is None:
        return lambda: torch.empty(shape, dtype=dtype, device=device)
    stride = torch.empty(padded, dtype=dtype, device="meta")[..., :n].view(shape).stride()
    size = math.prod(padded)
    return lambda: torch.empty(size, dtype=dtype, device=device).as_strided(shape, stride)


def _launcher(kernel, ports: list, allocations: list, sizes: list, gemm: tuple | None = None):
    """A prepared call, kept to the few Python steps every step pays for: the inputs that need it
    made ports (`ports`: a function per input, None for an input passed as it is -- decided from
    the first call's inputs, it holds for every call with their layouts), the outputs allocated,
    one launch. A fused GEMM (`gemm`: alpha, beta) takes a and b first, `sizes` its bands' strides."""
    conversions = [(i, port) for i, port in enumerate(ports) if port is not None]
    name, end = kernel.name, len(ports)  # a GEMM's inputs after its ports: the prologue's source (unfused path)

    def call(inputs):
        RECORDED[name] = kernel
        if conversions:
            inputs = list(inputs)
            for i, port in conversions:
                inputs[i] = port(inputs[i])
        outs = [make() for make in allocations]
        if gemm is None:
            _C.fused_run(name, inputs, outs, sizes)
        else:
            _C.fused_gemm_run(name, inputs[0], inputs[1], *gemm, inputs[2:end], outs, sizes)
        return tuple(outs)
    return call


def _layout(t) -> tuple:
    """What a fused kernel's call depends on of one input: its place, type and layout in memory
    (its storage's size decides whether padded rows, or a bias's last word, are read in place)."""
    if not isinstance(t, torch.Tensor):
        return (t,)
    return (t.device, t.dtype, t.shape, t.stride(), t.storage_offset(), t.untyped_storage().nbytes())


def _gemm_port(t: torch.Tensor, mode: str, m: int, n: int, pitch: int) -> torch.Tensor:
    """Input `t` of a fused GEMM, not laid out as its port reads it (`_gemm_in_place`: the prepared
    call decides once per layout), as a padded copy on the device: a full operand as rows of
    `pitch`, a row (bias) with a readable last word."""
    if mode == "full" and pitch != n:
        padded = torch.empty((m, pitch), dtype=t.dtype, device=t.device)
        padded[:, :n].copy_(t.reshape(m, n))
        return padded
    if mode == "row" and pitch != n:
        padded = torch.empty(pitch, dtype=t.dtype, device=t.device)
        padded[:n].copy_(t.reshape(n))
        return padded
    return _port(t)


def _gemm_in_place(t: torch.Tensor, mode: str, n: int, pitch: int) -> bool:
    """Whether a fused GEMM's port reads `t` in place: a full operand laid out as rows of `pitch`
    (an output of another fused GEMM), a row that ends its allocation (its last word readable: a
    parameter), else what any port reads in place."""
    aligned = (t.storage_offset() * t.element_size()) % 64 == 0
    if mode == "full" and pitch != n:
        return aligned and t.stride(-1) == 1 and all(
            size == 1 or stride == pitch * math.prod(t.shape[i + 1:-1]) for i, (size, stride) in
            enumerate(zip(t.shape[:-1], t.stride()[:-1])))
    if mode == "row" and pitch != n:
        return aligned and t.is_contiguous() and t.storage_offset() + n == t.untyped_storage().nbytes() // t.element_size()
    return _in_place(t)


def _padded_rows(t: torch.Tensor) -> torch.Tensor | None:
    """The rows of `t` with their padding, as one contiguous tensor, when `t` is rows padded to
    whole 512-bit words (a fused GEMM's output at XCL_OPT 4, runner._gemm): a fused chain reads it
    in place (mode "pitched") instead of a dense copy."""
    if t.dim() < 2 or t.stride(-1) != 1:
        return None
    words = 64 // t.element_size()
    n = t.shape[-1]
    pitch = -(-n // words) * words
    rows = t.numel() // n
    row_major = all(size == 1 or stride == pitch * math.prod(t.shape[i + 1:-1])
                    for i, (size, stride) in enumerate(zip(t.shape[:-1], t.stride()[:-1])))
    fits = t.storage_offset() + rows * pitch <= t.untyped_storage().nbytes() // t.element_size()
    if not (row_major and fits and (t.storage_offset() * t.element_size()) % 64 == 0):
        return None
    return t.as_strided((rows, pitch), (pitch, 1))


def _port(t: torch.Tensor) -> torch.Tensor:
    """`t` as a kernel port reads it: contiguous, from a port word (a device copy when not)."""
    if _in_place(t):
        return t
    return t.contiguous() if t.storage_offset() == 0 else t.clone(memory_format=torch.contiguous_format)


def _in_place(t: torch.Tensor) -> bool:
    return t.is_contiguous() and (t.storage_offset() * t.element_size()) % 64 == 0


def _subgraph(gm: fx.GraphModule, p: Plan) -> tuple[fx.GraphModule, dict]:
    """The group's nodes as a graph of their own (the unfused path), and each node's copy."""
    g = fx.Graph()
    env = {}
    for i, n in enumerate(p.inputs):
        env[n] = g.placeholder(f"in{i}")
        env[n].meta = dict(n.meta)  # shapes and dtypes: the other modes' kernels are planned from them
    members = [n for n in gm.graph.nodes if n in set(p.outputs) | _members(p)]
    for n in members:
        env[n] = g.node_copy(n, lambda a: env[a])
    g.output(tuple(env[n] for n in p.outputs))
    return fx.GraphModule(gm, g), env


def _members(p: Plan) -> set:
    """The group's nodes: everything between its inputs and its outputs."""
    seen, stack = set(), list(p.outputs)
    while stack:
        n = stack.pop()
        if n in seen or n in p.inputs:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen
