"""The kernel ABI, written down once: the dtypes, the XCL_OPT levels, the C types a kernel
interface may use and how the host encodes each in its 64-bit argument slot, and the constants the
templates and the host share.

Everything else reads it from here: the codegen and the lint import it, the build imports it
(pure Python, no torch: SCons loads it on every run), and `header()` renders it as
build/gen/afpga_abi.h for the host runtime, the emulated image and the HLS kernels.
"""
from __future__ import annotations

from dataclasses import dataclass

WORD_BITS = 512  # one beat of an XCL_OPT 4 port
# The XCL_OPT 1 (buffered) kernels' tile, in elements: a float32 array of it is one BRAM18, and it
# is two whole 256-beat AXI bursts of a 32-bit port.
BUFFERED_TILE = 512
# Interleaved accumulators of a reduction: each is updated every PARTIALS cycles, longer than a
# double adder's latency, so the accumulation loop runs at II=1 (aten_fpga_reduce.h, reduce/).
REDUCE_PARTIALS = 16
# The XCL_OPT 4 rows fold's accumulators per lane where a lane's step is one float32 add or
# compare-select (4-5 cycles at 300 MHz): fewer registers on the card, a shorter drain, and on the
# emulator partials that fit the CPU's vector registers (aten_fpga_reduce.h FoldPartials).
REDUCE_LANE_PARTIALS = 8
# A reduction's partial accumulator (an op's Acc: up to complex var's 48 bytes) travels as one
# 512-bit word of the reduce kernels' `part` port, so that one row can be split over the compute
# units and its partials combined (kernels/hls/reduce, host/ps/fpga_reduce.cpp).
REDUCE_PARTIAL_BYTES = 64
# The reduce kernels' `mode` register, bit by bit: PARTIAL writes each result's accumulator to
# `part` instead of its finished value to `out`; COLUMNS reduces the middle dim of [outer, inner,
# cols] (a column reduction) instead of the rows; COMBINE merges `inner` partials per output.
REDUCE_MODES = {"PARTIAL": 1, "COLUMNS": 2, "COMBINE": 4}
# The COLUMNS mode's tile: port items (words at XCL_OPT 4) of a row whose columns are reduced
# together. A row of at most this many items is one tile, so the host can give each CU a block of
# whole rows -- one contiguous stretch of memory -- instead of a block of columns of every row.
REDUCE_COLUMN_TILE = 256

LEVELS = (1, 2, 3, 4)
LEVEL_NAMES = {1: "buffered", 2: "dataflow", 3: "multi-CU", 4: "vectorized"}

# How the host encodes a value in an argument slot (and what a port's elements are).
KINDS = {"f": "FLOAT", "i": "SIGNED", "u": "UNSIGNED", "c": "COMPLEX", "b": "BOOL"}


@dataclass(frozen=True)
class DType:
    """A tensor dtype the kernel library knows: its torch name, ATen ScalarType and HLS C type."""

    name: str  # torch name: "float32"
    scalar_type: str  # c10::ScalarType enumerator: "Float"
    ctype: str  # C type in HLS kernels: "float"
    bits: int
    kind: str  # a KINDS key

    @property
    def lanes(self) -> int:
        """Elements per 512-bit word (XCL_OPT 4 ports)."""
        return WORD_BITS // self.bits


# Order matters only for determinism of generated output.
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", "Float", "float", 32, "f"),
        DType("float64", "Double", "double", 64, "f"),
        DType("float16", "Half", "half", 16, "f"),
        DType("complex64", "ComplexFloat", "std::complex<float>", 64, "c"),
        DType("int32", "Int", "int32_t", 32, "i"),
        DType("int64", "Long", "int64_t", 64, "i"),
        DType("bool", "Bool", "bool", 8, "b"),
    )
}

# The real dtype of each complex dtype (torch's toRealValueType).
REAL_DTYPES = {"complex64": "float32"}


@dataclass(frozen=True)
class CType:
    """A C type a kernel argument may have (a port's element, or a scalar register)."""

    name: str  # as the kernel spells it
    bits: int
    kind: str  # a KINDS key


# The dtypes' own types, then the ones only sizes and enum scalars use.
CTYPES: dict[str, CType] = {
    t.name: t
    for t in (
        *(CType(d.ctype, d.bits, d.kind) for d in DTYPES.values()),
        CType("char", 8, "i"), CType("int8_t", 8, "i"), CType("uint8_t", 8, "u"),
        CType("int16_t", 16, "i"), CType("uint16_t", 16, "u"),
        CType("int", 32, "i"), CType("unsigned", 32, "u"), CType("uint32_t", 32, "u"),
        CType("uint64_t", 64, "u"), CType("std::complex<double>", 128, "c"),
        # how v++'s kernel metadata spells the 64-bit sizes (uint64_t on x86_64 Linux)
        CType("unsigned long", 64, "u"), CType("unsigned long long", 64, "u"),
        CType("long", 64, "i"), CType("long long", 64, "i"),
    )
}
# afpga::opmath_t<T> (aten_fpga_hls.h): the type an op computes in; ATen widens half to float.
OPMATH = {"half": "float"}


def ctype(name: str) -> CType | None:
    """The C type spelled `name` (any spacing), or None."""
    key = name.replace(" ", "")
    return next((t for t in CTYPES.values() if t.name.replace(" ", "") == key), None)


def header() -> str:
    """build/gen/afpga_abi.h: the table as C preprocessor lists (X macros), which C++14 HLS
    sources, the C ABI of the emulated image and the C++20 host can all expand."""
    q = '"'
    levels = " \\\n  ".join(f"X({n}, {q}{LEVEL_NAMES[n]}{q})" for n in LEVELS)
    dtypes = " \\\n  ".join(f"X({q}{d.name}{q}, {d.scalar_type}, '{d.kind}', {d.bits // 8})" for d in DTYPES.values())
    ctypes = " \\\n  ".join(f"X({q}{t.name}{q}, '{t.kind}', {t.bits // 8})" for t in CTYPES.values())
    modes = "\n".join(f"#define AFPGA_REDUCE_{k} {v}" for k, v in REDUCE_MODES.items())
    kinds = "\n".join(f"#define AFPGA_KIND_{v} '{k}'" for k, v in KINDS.items())
    return f"""// Generated by aten_fpga codegen from codegen/abi.py. Do not edit.
// The kernel ABI shared by the host runtime, the emulated image and the HLS kernels.
#pragma once

#define AFPGA_WORD_BITS {WORD_BITS}
#define AFPGA_REDUCE_PARTIALS {REDUCE_PARTIALS}
#define AFPGA_REDUCE_PARTIAL_BYTES {REDUCE_PARTIAL_BYTES}
#define AFPGA_REDUCE_COLUMN_TILE {REDUCE_COLUMN_TILE}
{modes}

// How the host encodes a value in a kernel's 64-bit argument slot (a port: its elements).
{kinds}

// X(level, name): the XCL_OPT levels.
#define AFPGA_LEVELS(X) \\
  {levels}

// X(torch name, c10::ScalarType enumerator, kind, element bytes): the dtypes kernels run on. A
// port's (kind, bytes) names its dtype.
#define AFPGA_DTYPES(X) \\
  {dtypes}

// X(C spelling, kind, bytes): every C type a kernel argument may have.
#define AFPGA_CTYPES(X) \\
  {ctypes}
"""
