"""The kernel library: kernels/hls/<category>/{ops.yaml, opt<N>.cpp.j2}."""
from __future__ import annotations

import os

from . import yamlsrc
from .model import DTYPES, LEVELS, Category, KernelOp, Location, Scalar, TableError


def _strings(node: yamlsrc.Node, what: str) -> tuple[str, ...]:
    if not isinstance(node.value, list) or not all(isinstance(v.value, str) for v in node.value):
        raise TableError(node.loc, f"'{what}' must be a list of names")
    return tuple(v.value for v in node.value)


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
    ops: dict[str, KernelOp] = {}
    for op_name, (loc, spec) in fields["ops"][1].value.items():
        if not isinstance(spec.value, dict) or "expr" not in spec.value:
            raise TableError(loc, f"op '{op_name}' needs an 'expr'")
        s = {k: v for k, (_, v) in spec.value.items()}
        dtypes = _strings(s["dtypes"], "dtypes") if "dtypes" in s else tuple(DTYPES)
        for d in dtypes:
            if d not in DTYPES:
                raise TableError(s["dtypes"].loc, f"unknown dtype '{d}'; known: {', '.join(DTYPES)}")
        scalars = tuple(Scalar(n) for n in _strings(s["scalars"], "scalars")) if "scalars" in s else ()
        ops[op_name] = KernelOp(name, op_name, str(s["expr"].value), scalars, dtypes, loc)
    return Category(name, _strings(fields["inputs"][1], "inputs"), _strings(fields["outputs"][1], "outputs"), ops)


def load_library(root: str) -> dict[str, Category]:
    """Every category folder under `root` that has an ops.yaml, by name."""
    return {
        name: load_category(root, name)
        for name in sorted(os.listdir(root))
        if os.path.exists(os.path.join(root, name, "ops.yaml"))
    }
