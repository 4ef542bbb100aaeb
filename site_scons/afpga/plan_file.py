"""A workload plan (`scons plan=path.yaml`): the YAML file aten_fpga.record writes, read into the
build's selection -- kernels= (the library ops of the kernels its ops launched), dtypes= (theirs)
and the CUs its `build.cus` gives engines, with the GEMM array `build.gemm_pe` names (aten_fpga.record
writes the CUs and array that serve the recorded workload best within the card). A person may edit the file: `build.kernels` and
`build.dtypes`, when given, replace what the recorded ops imply. No torch is imported."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import yaml
from SCons.Errors import UserError

from . import platforms

HOW = "record one with `python -m aten_fpga.record -o plan.yaml script.py` (docs/workflow.md)"


def stem(path: str) -> str:
    """The plan's name in the image folder (opt4-plan-<stem>)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(os.path.basename(path))[0])


def load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except FileNotFoundError:
        raise UserError(f"plan={path}: no such file; {HOW}") from None
    except yaml.YAMLError as e:
        raise UserError(f"plan={path} is not valid YAML ({e}); {HOW}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ops", {}), dict):
        raise UserError(f"plan={path}: expected a mapping with `ops:` (op -> its kernels) and `build:`; {HOW}")
    return doc


@dataclass(frozen=True)
class Selection:
    """What a plan's image holds: build.kernels/build.dtypes if given, else every library op and
    dtype of the kernels its ops ran on fpga; build.cus; build.gemm_pe ("" for the card's default)."""
    kernels: tuple[str, ...]
    dtypes: tuple[str, ...]
    cus: tuple[tuple[str, int], ...]  # (engine category, CUs)
    gemm_pe: str = ""  # "PMxPN", the GEMM's PE array at XCL_OPT 4 on a card (gemm_pe=)


def selection(path: str) -> Selection:
    """The plan's Selection, validated: an unknown op, dtype or category, a bad CU count or array
    is an error that names the plan and the fix."""
    from codegen.library import load_library
    from codegen.model import DTYPES

    from .variables import MAX_CUS

    doc = load(path)
    build = doc.get("build") or {}
    ran = [k for op in (doc.get("ops") or {}).values() for k in ((op or {}).get("kernels") or {}).values()]
    kernels = tuple(build.get("kernels") or sorted({k["op"] for k in ran}))
    dtypes = tuple(build.get("dtypes") or sorted({k["dtype"] for k in ran}))
    if not kernels:
        raise UserError(f"plan={path}: no op of it ran a kernel on fpga, so the image would hold none; record a "
                        "workload that runs on device=\"fpga\" or list build.kernels")
    library = load_library("kernels/hls")
    valid = set(library) | {op for c in library.values() for op in c.ops}
    for what, names, ok in (("kernels", kernels, valid), ("dtypes", dtypes, set(DTYPES))):
        bad = [n for n in names if n not in ok]
        if bad:
            raise UserError(f"plan={path}: unknown {what} {', '.join(map(str, bad))}; valid: {', '.join(sorted(ok))}")
    cus = build.get("cus") or {}
    for category, n in cus.items():
        if category not in library or not isinstance(n, int) or not 1 <= n <= MAX_CUS:
            raise UserError(f"plan={path}: build.cus {category}: {n!r}; give an engine category of kernels/hls "
                            f"({', '.join(sorted(library))}) and a whole number of CUs from 1 to {MAX_CUS}")
    gemm_pe = str(build.get("gemm_pe") or "")
    if gemm_pe and not platforms.parse_gemm_pe(gemm_pe):
        raise UserError(f"plan={path}: build.gemm_pe {gemm_pe!r}; give PMxPN, each a multiple of 4 from 4 to 64 "
                        "(e.g. 16x16), or drop it for the card's default")
    return Selection(kernels, dtypes, tuple(sorted(cus.items())), gemm_pe)
