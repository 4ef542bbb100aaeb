"""A pointwise engine's shared datapath (codegen/engines.py Datapath, kernels/hls/pointwise/datapath.j2)
computes on the card what each member computes in C simulation. The card's compute stage selects
the member's element function per lane behind the opcode (and builds a costly member's lanes a
group at a time); C simulation, which the emulated device runs, calls the member's own compute
stage. Both are compiled here with g++ -- the card's path with -D__SYNTHESIS__, whose streams our
shim holds unbounded -- and every member of the engine runs through both on the same inputs: the
output words must be the same bytes."""
from __future__ import annotations

import ctypes
import json
import os
import re

import numpy as np
import pytest

from codegen.engines import NARROW, READ_BUNDLE, SHARED_DATAPATH, engine_name
from codegen.generate import ROOT
from codegen.plan import interface_file, plan
from engine_support import compiled, engine_members, generated

# (level, engine key): the full-rate and narrow pointwise engines of XCL_OPT 4, the generating ones,
# and a level of element streams and one of tiles.
CASES = [(4, "unary"), (4, "unary_narrow"), (4, "binary"), (4, "binary_narrow"), (4, "ternary_narrow"),
         (4, "fill"), (4, "rng"), (4, "range"), (2, "binary"), (2, "rng"), (1, "unary"), (1, "rng")]
ELEMENTS = {"float": np.float32, "half": np.float16, "double": np.float64, "int32_t": np.int32,
            "int64_t": np.int64, "bool": np.bool_, "std::complex<float>": np.complex64}
class Complex64(ctypes.Structure):  # std::complex<float> by value: two floats in one SSE register
    _fields_ = [("re", ctypes.c_float), ("im", ctypes.c_float)]


SCALARS = {"std::complex<float>": (lambda v: Complex64(v, -v), 0.75), "float": (ctypes.c_float, 0.75), "double": (ctypes.c_double, 0.75), "int32_t": (ctypes.c_int32, 2),
           "int64_t": (ctypes.c_int64, 2), "bool": (ctypes.c_bool, True), "uint64_t": (ctypes.c_uint64, 0)}


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    kernels = plan(os.path.join(ROOT, "native_functions_fpga.yaml")).kernels
    return generated(tmp_path_factory.mktemp("gen"), kernels, sorted({lv for lv, _ in CASES}))


@pytest.fixture(scope="module")
def libraries(gen):
    """{(level, engine key, synthesis): the engine compiled as a shared library}."""
    return compiled(gen, [(lv, c, s) for lv, c in CASES for s in (False, True)])


def test_every_pointwise_category_is_checked():
    assert {c.removesuffix(NARROW) for _, c in CASES} == set(SHARED_DATAPATH)


def words(ctype: str, count: int, rng) -> np.ndarray:
    """`count` elements of an engine pointer's type, finite and special values mixed."""
    m = re.match(r"(?:hls::vector<(.+), (\d+)>|(.+))\*$", ctype)
    element = m.group(1) or m.group(3)
    dtype = ELEMENTS[element]
    if dtype in (np.int32, np.int64):
        return rng.integers(-1000, 1000, count).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, count).astype(dtype)
    x = rng.standard_normal(count) * 4
    x[::7] = np.resize([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, 0.5], len(x[::7]))
    if dtype == np.complex64:
        return (x + 1j * rng.standard_normal(count)).astype(dtype)
    return x.astype(dtype)


@pytest.mark.parametrize("level,category", CASES)
def test_the_cards_datapath_computes_what_each_member_computes(gen, libraries, level, category):
    doc = json.loads((gen / interface_file(level)).read_text())
    engine = engine_name(category)
    top = doc["kernels"][engine]["args"]
    bundles = {a["name"]: a["bundle"] for a in top}
    members = engine_members(gen, level, engine)
    assert doc["datapaths"][engine], "a pointwise engine shares its datapaths"
    libs = [ctypes.CDLL(str(libraries[(level, category, s)])) for s in (False, True)]
    rng = np.random.default_rng(0)
    checked = 0
    for member, opcode, carried in members:
        own = {a["name"]: a for a in doc["kernels"][member]["args"]}
        size = 4 * 64 + 3  # four whole words of any lane count, and a partial one
        count = size + 64
        inputs = {arg: words(own[m]["type"], count, rng) for m, arg in carried.items()
                  if own[m]["pointer"] and bundles[arg] == READ_BUNDLE}
        outs = []
        for lib in libs:
            buffers = {a["name"]: (inputs[a["name"]].copy() if a["name"] in inputs else
                                   np.zeros(count * 16, np.uint8)) for a in top if a["pointer"]}
            args = []
            for a in top:
                if a["pointer"]:
                    args.append(buffers[a["name"]].ctypes.data_as(ctypes.c_void_p))
                elif a["name"] == "opcode":
                    args.append(ctypes.c_uint32(int(opcode)))
                elif a["name"] == "size":
                    args.append(ctypes.c_uint64(size))
                else:
                    kind, value = SCALARS[a["type"]]
                    args.append(kind(value))
            getattr(lib, engine)(*args)
            written = [carried[m] for m, a in own.items() if a["pointer"] and carried[m] not in inputs]
            outs.append([buffers[w].tobytes() for w in written])
        assert outs[0] == outs[1], f"{member}: the card's datapath and the member's own compute stage differ"
        checked += 1
    assert checked == len(members) > 0
