"""The XCL_OPT 4 reduce engines compute on the card what they compute in C simulation. The card's
path (-D__SYNTHESIS__) folds a narrow member's lanes COMPUTE_LANES at a time (codegen/model.py
Kernel.compute_lanes; aten_fpga_reduce.h Turns) and streams a whole run in one region, where C
simulation -- which the emulated device runs -- folds every lane in one pass, groups the words
for g++ (fold_groups, fold_row_items), folds the columns in typed tiles of each member's own (the
card: the engine's shared raw words) and cuts the input into 64 KiB regions. Both are compiled
here with g++ (the card's streams are our shim's, unbounded) and every member of e_reduce and
e_reduce_narrow runs through both on the same inputs, in each mode: rows (a ragged last word),
rows into partials and their combine, columns. The results must be the same bytes."""
from __future__ import annotations

import ctypes
import json
import os

import numpy as np
import pytest

from codegen import abi, storage
from codegen.engines import NARROW, READ_BUNDLE, engine_name, engine_source
from codegen.generate import ROOT
from codegen.lint import synthesized
from codegen.plan import interface_file, plan
from engine_support import compiled, engine_members, generated
from test_engine_datapaths import words

LEVEL = 4
ENGINES = ("reduce", "reduce" + NARROW)
MODES = abi.REDUCE_MODES
SCALARS = {"p": (ctypes.c_double, 3.0), "correction": (ctypes.c_double, 1.0), "take_sqrt": (ctypes.c_bool, True)}


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    kernels = plan(os.path.join(ROOT, "native_functions_fpga.yaml"), ("reduce",)).kernels
    return generated(tmp_path_factory.mktemp("gen"), kernels, (LEVEL,))


@pytest.fixture(scope="module")
def libraries(gen):
    """{(level, engine key, synthesis): the engine compiled as a shared library}."""
    return compiled(gen, [(LEVEL, e, s) for e in ENGINES for s in (False, True)], "-O1")


def test_the_narrow_engine_holds_the_members_that_compute_fewer_lanes(gen):
    doc = json.loads((gen / interface_file(LEVEL)).read_text())
    kernels = {k.name: k for k in plan(os.path.join(ROOT, "native_functions_fpga.yaml"), ("reduce",)).kernels}
    for key in ENGINES:
        members = doc["engines"][engine_name(key)]
        assert members and {kernels[m].compute_lanes < kernels[m].lanes for m in members} == {key.endswith(NARROW)}
        text = (gen / engine_source(key, LEVEL)).read_text()
        for m in members:
            assert f"const int COMPUTE_LANES = {kernels[m].compute_lanes};" in (gen / kernels[m].source(LEVEL)).read_text()
        assert text.count('#include "../reduce/') == len(members)


def test_the_resource_model_prices_the_cards_tiles_only(gen):
    """C simulation folds the columns in typed tiles of each member's own (reduce/_kernel.j2 Slot),
    which the card does not have: the arrays the interface file prices for a member (codegen/storage.py)
    are those of its card path, the engine's shared tiles apart."""
    doc = json.loads((gen / interface_file(LEVEL)).read_text())
    for k in plan(os.path.join(ROOT, "native_functions_fpga.yaml"), ("reduce",)).kernels:
        if k.op.category != "reduce":
            continue  # a further kernel of a reduce entry's host function (weight_norm's mul)
        card = storage.memories(synthesized((gen / k.source(LEVEL)).read_text()))
        assert doc["memories"][k.name] == card, f"{k.name}: C simulation's arrays priced for the card"
        assert set(card["shared"]) == {"column_acc", "column_shift"}


FLOATS = {"float": np.float32, "half": np.float16, "double": np.float64, "std::complex<float>": np.float32}


def canonical(out: np.ndarray, ctype: str) -> bytes:
    """A result buffer's bytes, every NaN one NaN: neither C++ nor the card defines a NaN's sign
    (a complex product's NaN took either in the two compilations), and ATen compares NaNs equal."""
    element = FLOATS.get(ctype.rstrip("*"))
    if element is None:
        return out.tobytes()
    values = out.view(element).copy()
    values[np.isnan(values)] = np.nan
    return values.tobytes()


def run(lib, engine, top, opcode, buffers, sizes):
    args = []
    for a in top:
        if a["pointer"]:
            args.append(buffers[a["name"]].ctypes.data_as(ctypes.c_void_p))
        elif a["name"] == "opcode":
            args.append(ctypes.c_uint32(opcode))
        elif a["name"] in sizes:
            args.append(ctypes.c_uint64(sizes[a["name"]]))
        else:
            kind, value = SCALARS[a["name"]]
            args.append(kind(value))
    getattr(lib, engine)(*args)


@pytest.mark.parametrize("key", ENGINES)
def test_the_cards_fold_computes_what_c_simulation_computes(gen, libraries, key):
    doc = json.loads((gen / interface_file(LEVEL)).read_text())
    engine = engine_name(key)
    top = doc["kernels"][engine]["args"]
    members = engine_members(gen, LEVEL, engine)
    libs = [ctypes.CDLL(str(libraries[(LEVEL, key, s)])) for s in (False, True)]
    rng = np.random.default_rng(0)
    checked = 0
    for member, opcode, carried in members:
        own = {a["name"]: a for a in doc["kernels"][member]["args"]}
        lanes = int(own["in"]["type"].split(",")[-1].strip(" >*"))
        # rows: 3 rows of 40 whole words and a ragged one (the C simulation's word groups and the
        # card's passes both); columns: [2, 21, 3 words + 5 elements] in rows of 5 words.
        inner = 40 * lanes + 3
        per_row = -(-inner // lanes)
        cases = [dict(outer=3, inner=inner, cols=0, pitch=0, first=7, length=inner, mode=0),
                 dict(outer=3, inner=inner, cols=0, pitch=0, first=7, length=inner, mode=MODES["PARTIAL"]),
                 dict(outer=2, inner=21, cols=3 * lanes + 5, pitch=5, first=0, length=21, mode=MODES["COLUMNS"])]
        count = max(3 * per_row, 2 * 21 * 5) * lanes
        data = words(own["in"]["type"], count, rng)
        outs = []
        for lib in libs:
            results = []
            for sizes in cases:
                buffers = {a["name"]: (data.copy() if a["bundle"] == READ_BUNDLE else np.zeros(1 << 16, np.uint8))
                           for a in top if a["pointer"]}
                run(lib, engine, top, int(opcode), buffers, sizes)
                results.append(canonical(buffers[carried["out"]], own["out"]["type"]))
                if sizes["mode"] & MODES["PARTIAL"]:
                    # the partials of 3 rows as the pieces of one result: their combine (whose
                    # result the partials' values decide; their raw bytes hold NaNs of either sign)
                    part = buffers[carried["part"]].copy()
                    buffers = {n: np.zeros_like(b) for n, b in buffers.items()}
                    buffers[carried["part"]] = part
                    run(lib, engine, top, int(opcode), buffers,
                        dict(sizes, outer=1, inner=3, mode=MODES["COMBINE"]))
                    results.append(canonical(buffers[carried["out"]], own["out"]["type"]))
            outs.append(results)
        assert outs[0] == outs[1], f"{member}: the card's fold and C simulation's differ"
        checked += 1
    assert checked == len(members) > 0
