"""The kernel library: kernels/hls/<category>/{ops.yaml, opt<N>.cpp.j2}."""
from __future__ import annotations

import os

from . import yamlsrc
from .model import DTYPES, LEVELS, Category, KernelOp, Location, Scalar, TableError


def _strings(node: yamlsrc.Node, what: str) -> tuple[str, ...]:
    if not isinstance(node.value, list) or not all(isinstance(v.value, str) for v in node.value):
        raise TableError(node.loc, f"'{what}' must be a list of names")
    return tuple(v.value for v in node.value)


def _scalars(node: yamlsrc.Node) -> tuple[Scalar, ...]:
    """`[alpha]` (registers of the element type T) or `[{p: double}]` (a register of its own C type)."""
    if not isinstance(node.value, list):
        raise TableError(node.loc, "'scalars' must be a list of names or {name: C type} mappings")
    out = []
    for v in node.value:
        if isinstance(v.value, str):
            out.append(Scalar(v.value))
        elif (isinstance(v.value, dict) and len(v.value) == 1
              and isinstance(next(iter(v.value.values()))[1].value, str)):
            (sname, (_, ctype)), = v.value.items()
            out.append(Scalar(sname, ctype.value))
        else:
            raise TableError(v.loc, "a scalar is a name (of type T) or one {name: C type} mapping, e.g. {p: double}")
    return tuple(out)


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
        scalars = _scalars(s["scalars"]) if "scalars" in s else ()
        out = s["out"].value if "out" in s else None
        if out is not None and out != "real" and out not in DTYPES:
            raise TableError(s["out"].loc, f"unknown output dtype '{out}' of op '{op_name}'; give 'real' or one "
                                           f"of: {', '.join(DTYPES)}")
        ops[op_name] = KernelOp(name, op_name, str(s["expr"].value), scalars, dtypes, loc, out)
    sizes = _strings(fields["sizes"][1], "sizes") if "sizes" in fields else ("size",)
    return Category(name, _strings(fields["inputs"][1], "inputs"), _strings(fields["outputs"][1], "outputs"), ops,
                    sizes)


def load_library(root: str) -> dict[str, Category]:
    """Every category folder under `root` that has an ops.yaml, by name."""
    return {
        name: load_category(root, name)
        for name in sorted(os.listdir(root))
        if os.path.exists(os.path.join(root, name, "ops.yaml"))
    }
