"""The on-chip memory a rendered kernel declares: its local arrays, as Vitis HLS maps them.

The build's resource model (site_scons/afpga/resources.py) prices a kernel's BRAM from this rather
than from a rule of thumb, so a template that shrinks or partitions a buffer changes the estimate.
Read from the same text v++ compiles, like codegen/interface.py.

HLS puts an array in block RAM unless it is partitioned into registers or is small: each bank (a
partition) of more than SMALL_BITS bits takes BRAM18s of 18 Kbit (two to a BRAM36); smaller banks
go to LUTRAM or registers. An array declared in a function counts once (our kernels call each stage
once per dataflow region). An array declared `static AFPGA_ENGINE_MEMORY` (file scope) is one that
every member of an engine uses, one memory per CU: it is reported apart ("shared", by name), for the
engine to count once. The card's arrays only: C-simulation-only code (`#ifndef __SYNTHESIS__`) is
left out, as the pragma lint leaves it (a norm member's own typed arrays and a reduce member's
typed column tiles, where the card has the engine's).
"""
from __future__ import annotations

import math
import re
from functools import lru_cache

from . import interface, lint

SMALL_BITS = 2048  # banks up to this size: LUTRAM or registers (an assumption; HLS decides per array)
BRAM18_BITS = 18 * 1024
URAM_BITS = 288 * 1024  # an UltraRAM block: 4K x 72 bits
UNKNOWN_BITS = 64  # an element of a type the ABI table lacks (a struct accumulator): assumed 64 bits

# `T a[N][M];`, `T a[N], b[N];`, `static const T ROM[N] = {...}` (one declarator then)
_ONE = r"\w+(?:\[[^\]\n]+\])+"
_DECL = re.compile(rf"^[ \t]*(?:static\s+)?((?:AFPGA_ENGINE_MEMORY\s+)?)(?:const\s+)?([A-Za-z_][\w:<>, ]*?)\s+"
                   rf"({_ONE}(?:\s*,\s*{_ONE})*)\s*[;=]", re.M)
_CONST = re.compile(interface.word("const")
                    + r"\s+(?:int|unsigned|uint32_t|int32_t|uint64_t|int64_t|size_t)\s+(\w+)\s*=\s*([^;]+);")
_PARTITION = re.compile(r"#pragma\s+HLS\s+ARRAY_PARTITION\s+([^\n]*)")
# An array the kernel binds to UltraRAM where the card has it (under `#ifdef AFPGA_URAM`).
_URAM = re.compile(r"#pragma\s+HLS\s+BIND_STORAGE\s+[^\n]*\bvariable=(\w+)[^\n]*\bimpl=uram\b")
_DECLARATOR = re.compile(r"(\w+)((?:\[[^\]\n]+\])+)")
_DIM = re.compile(r"\[([^\]]+)\]")
_ARITHMETIC = re.compile(r"[\d\s+\-*/()<]+")
_SUFFIX = re.compile(r"\b(\d+)[uUlL]+\b")  # 1u, 16ull
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def _constants(code: str):
    """The file's integer constants, as a function of a name: each evaluated when first asked."""
    raw = dict(_CONST.findall(code))
    known: dict[str, int | None] = {}

    def value(name: str) -> int | None:
        if name not in known:
            known[name] = None  # a constant defined from itself stays unknown
            known[name] = _evaluate(raw[name], value) if name in raw else None
        return known[name]

    return value


@lru_cache(maxsize=None)
def _literal(text: str) -> int | None:
    if not _ARITHMETIC.fullmatch(text):
        return None
    return int(eval(text.replace("/", "//"), {"__builtins__": {}}))  # digits and arithmetic only (checked above)


def _evaluate(expr: str, value) -> int | None:
    text = _SUFFIX.sub(r"\1", expr)
    unknown = False

    def substitute(m):
        nonlocal unknown
        v = value(m.group(0))
        unknown = unknown or v is None
        return str(v)

    text = _IDENTIFIER.sub(substitute, text)
    return None if unknown else _literal(text)


def memories(code: str, resolve=None) -> dict[str, float]:
    """The local arrays of `code`: "bram36" on a card without UltraRAM; "uram" and "uram_bram36" (the
    rest, in BRAM) on one with it, where the arrays bound to URAM go there; "shared": the same of each
    array the engine's members share, by name, not in those sums. `resolve`: the file's type
    resolver (codegen/interface.py resolver), if the caller has built it."""
    code = lint.synthesized(code)
    names = _constants(code)
    resolve = resolve or interface.resolver(code)
    partitions: dict[str, list[tuple[int, str, int]]] = {}
    for args in _PARTITION.findall(code):
        fields = dict(interface.FIELDS.findall(args))
        kind = "complete" if "complete" in args.split() else fields.get("type", "cyclic")
        factor = _evaluate(fields.get("factor", "0"), names) or 0
        partitions.setdefault(fields.get("variable", ""), []).append((int(fields.get("dim", 1)), kind, factor))
    in_uram = set(_URAM.findall(code))
    total = {"bram36": 0.0, "uram_bram36": 0.0, "uram": 0.0}
    shared: dict[str, dict[str, float]] = {}
    lines = "\n".join(line for line in code.splitlines() if "[" in line and "(" not in line)  # declarations only
    arrays = [(bool(engine), ctype, m.group(1), m.group(2)) for engine, ctype, declarators in _DECL.findall(lines)
              for m in _DECLARATOR.finditer(declarators)]
    for engine, ctype, name, dims_text in arrays:
        dims = [_evaluate(d, names) for d in _DIM.findall(dims_text)]
        if None in dims:
            continue  # a size the file does not state as a constant: not priced
        bits = interface.bits(resolve(ctype)) or UNKNOWN_BITS
        banks = 1
        for dim, kind, factor in partitions.get(name, ()):
            if dim == 0:
                banks = math.prod(dims)  # every element its own register
            elif 1 <= dim <= len(dims):
                banks *= dims[dim - 1] if kind == "complete" else max(1, factor)
        bank_bits = bits * math.prod(dims) / banks
        if bank_bits <= SMALL_BITS:
            continue
        bram = banks * math.ceil(bank_bits / BRAM18_BITS) / 2
        into = shared.setdefault(name, {"bram36": 0.0, "uram_bram36": 0.0, "uram": 0.0}) if engine else total
        into["bram36"] += bram
        if name in in_uram:
            into["uram"] += banks * math.ceil(bank_bits / URAM_BITS)
        else:
            into["uram_bram36"] += bram
    return {**total, "shared": shared} if shared else total
