"""The kernel library: kernels/hls/<category>/{ops.yaml, opt<N>.cpp.j2}."""
from __future__ import annotations

import os

from . import yamlsrc
from .model import DTYPES, LEVELS, Category, KernelOp, Location, Scalar, TableError

SCALAR_KEYS = ("name", "dtype", "default")
# Who runs a category's kernels: fpga_kernel (host/ps/fpga_kernel.cpp), fpga_reduce
# (host/ps/fpga_reduce.cpp), or the table entries' own `host:` functions (through KernelLaunch).
DRIVERS = ("pointwise", "reduce", "host")
# `inputs`/`outputs` on an op override the category's ports: a category whose kernels share a data
# movement (a window over a plane) but not their operands (max pooling also writes indices).
OP_KEYS = ("expr", "word", "scalars", "dtypes", "types", "inputs", "outputs", "row")


def _strings(node: yamlsrc.Node, what: str) -> tuple[str, ...]:
    if not isinstance(node.value, list) or not all(isinstance(v.value, str) for v in node.value):
        raise TableError(node.loc, f"'{what}' must be a list of names")
    return tuple(v.value for v in node.value)


def _dtype(node: yamlsrc.Node, what: str, real: bool = False) -> str:
    """A dtype name; with `real`, also "real": the real type of the kernel's dtype (norm of complex)."""
    if node.value not in DTYPES and not (real and node.value == "real"):
        raise TableError(node.loc, f"unknown dtype {node.value!r} for {what}; known: {', '.join(DTYPES)}"
                                   + (", or real" if real else ""))
    return node.value


def _scalar(node: yamlsrc.Node) -> Scalar:
    """`alpha`, or `{name: is_result, dtype: bool}` / `{name: posinf, default: max}`."""
    if isinstance(node.value, str):
        return Scalar(node.value)
    if not isinstance(node.value, dict) or "name" not in node.value:
        raise TableError(node.loc, "a scalar is a name or a mapping {name: ..., dtype: ..., default: ...}")
    fields = {k: v for k, (_, v) in node.value.items()}
    bad = [k for k in fields if k not in SCALAR_KEYS]
    if bad:
        raise TableError(node.loc, f"unknown scalar key(s) {', '.join(bad)}; allowed: {', '.join(SCALAR_KEYS)}")
    dtype = _dtype(fields["dtype"], f"scalar {fields['name'].value}") if "dtype" in fields else None
    default = str(fields["default"].value) if "default" in fields else None
    return Scalar(str(fields["name"].value), dtype, default)


def load_category(root: str, name: str) -> Category:
    folder = os.path.join(root, name)
    path = os.path.join(folder, "ops.yaml")
    doc = yamlsrc.load(path)
    if not isinstance(doc.value, dict):
        raise TableError(doc.loc, "ops.yaml must be a mapping with 'inputs', 'outputs' and 'ops'")
    fields = doc.value
    for key in ("inputs", "outputs", "ops"):
        if key not in fields:
            raise TableError(doc.loc, f"ops.yaml lacks '{key}'")
    missing = [f"opt{n}.cpp.j2" for n in LEVELS if not os.path.exists(os.path.join(folder, f"opt{n}.cpp.j2"))]
    if missing:
        raise TableError(Location(path, 1), f"category '{name}' lacks templates {', '.join(missing)}")
    inputs, outputs = _strings(fields["inputs"][1], "inputs"), _strings(fields["outputs"][1], "outputs")
    sizes = _strings(fields["sizes"][1], "sizes") if "sizes" in fields else ("size",)
    driver = fields["driver"][1].value if "driver" in fields else "pointwise"
    # Ports whose dtype is fixed for every op of the category (the multi-tensor kernels' int64 table).
    fixed: tuple[tuple[str, str], ...] = ()
    if "types" in fields:
        node = fields["types"][1]
        if not isinstance(node.value, dict):
            raise TableError(node.loc, "'types' maps ports to dtypes, e.g. {table: int64}")
        fixed = tuple((port, _dtype(v, f"port {port}")) for port, (_, v) in node.value.items())
    if driver not in DRIVERS:
        raise TableError(fields["driver"][1].loc, f"unknown driver {driver!r}; known: {', '.join(DRIVERS)}")
    ops: dict[str, KernelOp] = {}
    for op_name, (loc, spec) in fields["ops"][1].value.items():
        if not isinstance(spec.value, dict) or "expr" not in spec.value:
            raise TableError(loc, f"op '{op_name}' needs an 'expr'")
        s = {k: v for k, (_, v) in spec.value.items()}
        bad = [k for k in s if k not in OP_KEYS]
        if bad:
            raise TableError(loc, f"unknown key(s) {', '.join(bad)} in op '{op_name}'; allowed: {', '.join(OP_KEYS)}")
        dtypes = _strings(s["dtypes"], "dtypes") if "dtypes" in s else tuple(DTYPES)
        for d in dtypes:
            if d not in DTYPES:
                raise TableError(s["dtypes"].loc, f"unknown dtype '{d}'; known: {', '.join(DTYPES)}")
        if "scalars" in s and not isinstance(s["scalars"].value, list):
            raise TableError(s["scalars"].loc, f"'scalars' of op '{op_name}' must be a list")
        scalars = tuple(_scalar(n) for n in s["scalars"].value) if "scalars" in s else ()
        # The multi-tensor kernels' per-row scalars (kernels/hls/multi): one value per tensor each.
        row = _strings(s["row"], "row") if "row" in s else ("s",)
        op_inputs = _strings(s["inputs"], "inputs") if "inputs" in s else inputs
        op_outputs = _strings(s["outputs"], "outputs") if "outputs" in s else outputs
        types: tuple[tuple[str, str], ...] = tuple((p, d) for p, d in fixed if p in (*op_inputs, *op_outputs))
        if "types" in s:
            if not isinstance(s["types"].value, dict):
                raise TableError(s["types"].loc, f"'types' of op '{op_name}' maps ports to dtypes, e.g. {{out: bool}}")
            types = types + tuple((port, _dtype(v, f"port {port}", real=True)) for port, (_, v) in s["types"].value.items())
            unknown = [p for p, _ in types if p not in (*op_inputs, *op_outputs)]
            if unknown:
                raise TableError(s["types"].loc, f"op '{op_name}' types unknown port(s) {', '.join(unknown)}; "
                                                 f"the ports are {', '.join((*op_inputs, *op_outputs))}")
        word = str(s["word"].value) if "word" in s else None
        if word is not None and driver != "pointwise":
            raise TableError(s["word"].loc, f"'word' of op '{op_name}': only the pointwise categories' XCL_OPT 4 "
                                            f"template calls a word function; category '{name}' (driver {driver}) "
                                            "would ignore it: remove it")
        ops[op_name] = KernelOp(name, op_name, str(s["expr"].value), scalars, dtypes, loc, op_inputs, op_outputs, types,
                                sizes, driver, row, word)
    return Category(name, ops)


def load_library(root: str) -> dict[str, Category]:
    """Every category folder under `root` that has an ops.yaml, by name."""
    return {
        name: load_category(root, name)
        for name in sorted(os.listdir(root))
        if os.path.exists(os.path.join(root, name, "ops.yaml"))
    }
