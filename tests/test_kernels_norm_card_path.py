"""The norm engine computes on the card what it computes in C simulation. On the card
(-D__SYNTHESIS__) its members keep their column vectors -- gamma, affine's beta, grad_stats_cols'
column sums -- in the engine's one set of slots (file-scope raw words, kernels/hls/norm/_kernel.j2
afpga_norm_columns), which every member reuses after the one before; in C simulation, which the
emulated device runs, each member has its own typed arrays. Both are compiled here with g++ (the
card's streams are our shim's, unbounded) and every member of e_norm runs through both, one after
another, on the same inputs: the results must be the same bytes."""
from __future__ import annotations

import ctypes
import json
import os
import re

import numpy as np
import pytest

from codegen import abi
from codegen.engines import engine_name
from codegen.generate import ROOT
from codegen.plan import interface_file, plan
from engine_support import compiled, engine_members, generated

ENGINE = engine_name("norm")
ELEMENTS = {"float": np.float32, "half": np.float16}
ROWS = 3
# The flags each member runs with (ops.yaml): every column vector it reads, and affine's shift.
GAMMA, BETA, SHIFT = 1, 2, 16


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    kernels = plan(os.path.join(ROOT, "native_functions_fpga.yaml"), ("norm",)).kernels
    return generated(tmp_path_factory.mktemp("gen"), kernels, abi.LEVELS)


@pytest.fixture(scope="module")
def libraries(gen):
    """{(level, engine key, synthesis): the engine compiled as a shared library}."""
    return compiled(gen, [(level, "norm", s) for level in abi.LEVELS for s in (False, True)], "-O1")


@pytest.mark.parametrize("level", abi.LEVELS)
def test_the_members_column_vectors_are_the_engines_slots(gen, level):
    """The resource model's view: no member declares arrays of its own; each reports the same shared
    slots, which the engine counts once."""
    doc = json.loads((gen / interface_file(level)).read_text())
    memories = [doc["memories"][m] for m in doc["engines"][ENGINE]]
    shared = [m["shared"] for m in memories if "shared" in m]
    assert len(shared) == len(memories) - 2  # all but the two stats members, which read no columns
    assert all(s == shared[0] for s in shared) and sorted(shared[0]) == ["slot0", "slot1", "slot2"]
    assert all(m[r] == 0 for m in memories for r in ("bram36", "uram", "uram_bram36"))


def element_type(ctype: str):
    m = re.fullmatch(r"hls::vector<(\w+), (\d+)>\*", ctype)
    return ELEMENTS[m.group(1)], int(m.group(2))


def case(own: dict, rng):
    """A member's inputs, sizes and flags: ROWS rows of `segs` segments of `len` elements, a ragged
    last word per segment (layer_norm's one segment a row for grad_stats_cols, whose rows the host
    pads to at least PARTIALS words)."""
    dtype, lanes = element_type(own["in"]["type"])
    length = 3 * lanes + 5
    words = -(-length // lanes)
    segs = 1 if "grad_gamma" in own else 2
    seg_stride = (words + 1) * lanes
    row_stride = max(segs * seg_stride, abi.REDUCE_PARTIALS * lanes)
    sizes = dict(rows=ROWS, segs=segs, len=length, row_stride=row_stride, seg_stride=seg_stride)
    flags = (GAMMA if "gamma" in own else 0) | (BETA | SHIFT if "beta" in own else 0)
    inputs = {}
    for name, a in own.items():
        if not a["pointer"] or name in ("out", "grad_in", "var", "sum_dy", "sum_dy_xmu", "grad_gamma", "grad_beta") \
                or (name in ("mean", "invstd") and "var" in own):
            continue
        if a["type"].startswith("hls::vector"):
            inputs[name] = (rng.standard_normal(ROWS * row_stride) * 4 + 1).astype(dtype)
        else:
            inputs[name] = rng.standard_normal(length if name in ("gamma", "beta") else ROWS).astype(np.float32)
    return dtype, sizes, flags, inputs


def valid(sizes: dict) -> np.ndarray:
    """The indices of a data buffer's elements (the padding lanes past `len` are not results)."""
    r, s, i = np.meshgrid(np.arange(sizes["rows"]), np.arange(sizes["segs"]), np.arange(sizes["len"]), indexing="ij")
    return (r * sizes["row_stride"] + s * sizes["seg_stride"] + i).ravel()


def run_member(lib, top, opcode, own, carried, dtype, sizes, flags, inputs) -> dict:
    """The member's outputs after one run of the engine: {argument: bytes}."""
    owner = {e: m for m, e in carried.items()}
    buffers, args = {}, {}  # by the member's argument; the engine's arguments it does not use: scraps
    for a in top:
        name, member = a["name"], owner.get(a["name"])
        if a["pointer"]:
            if member is None:
                buffer = np.zeros(64, np.uint8)
            elif member in inputs:
                buffer = buffers[member] = inputs[member].copy()
            elif own[member]["type"].startswith("hls::vector"):
                buffer = buffers[member] = np.zeros(ROWS * sizes["row_stride"], dtype)
            else:
                buffer = buffers[member] = np.zeros(sizes["len"] if member.startswith("grad_") else ROWS, np.float32)
            args[name] = buffer.ctypes.data_as(ctypes.c_void_p)
        elif name == "opcode":
            args[name] = ctypes.c_uint32(opcode)
        elif name == "eps":
            args[name] = ctypes.c_double(1e-5)
        else:
            args[name] = ctypes.c_uint64(flags if name == "flags" else sizes[name])
    getattr(lib, ENGINE)(*args.values())
    index = valid(sizes)
    return {m: (b[index] if own[m]["type"].startswith("hls::vector") else b).tobytes()
            for m, b in buffers.items() if m not in inputs}


@pytest.mark.parametrize("level", abi.LEVELS)
def test_the_cards_shared_columns_compute_what_c_simulation_computes(gen, libraries, level):
    doc = json.loads((gen / interface_file(level)).read_text())
    top = doc["kernels"][ENGINE]["args"]
    members = engine_members(gen, level, ENGINE)
    assert len(members) == 10
    libs = [ctypes.CDLL(str(libraries[(level, "norm", s)])) for s in (False, True)]
    rng = np.random.default_rng(level)
    cases = [case({a["name"]: a for a in doc["kernels"][m]["args"]}, rng) for m, _, _ in members]
    # Every member in turn on each library: on the card's, each finds the slots as the one before left them.
    results = [[run_member(lib, top, opcode, {a["name"]: a for a in doc["kernels"][member]["args"]}, carried, *c)
                for (member, opcode, carried), c in zip(members, cases)] for lib in libs]
    for (member, _, _), sim, card in zip(members, *results):
        assert sim.keys() == card.keys() and sim, member
        for name in sim:
            assert sim[name] == card[name], f"{member}: {name} on the card differs from C simulation"
