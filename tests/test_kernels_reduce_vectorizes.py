"""The reduce kernels' lane loops over float32 (kernels/hls/reduce: the XCL_OPT 4 fold's `add_into` of a
word's 16 lanes, the drain's `merge_into` of two partials' lanes) are code g++ vectorizes. The emulated
reductions are memory bound only if they do: argmax's compare chain and whole-struct store once kept
its fold scalar at four times the CPU's time. Each loop is compiled on its own line with the emulated
image's flags (site_scons/afpga/emu.py), and each must vectorize."""
from __future__ import annotations

import pytest

from vectorizes import vectorized as vectorized_in

OPS = {  # name: (functor, output type)
    "sum": ("Sum", "float"),
    "amax": ("Max", "float"),
    "amin": ("Min", "float"),
    "argmax": ("ArgMax", "int64_t"),
    "argmin": ("ArgMin", "int64_t"),
    "norm1": ("Norm1", "float"),
    "norm2": ("Norm2", "float"),
    "norm_max": ("NormMax", "float"),
}


def loops(name: str, functor: str, out: str) -> list[tuple[str, str]]:
    op = f"afpga::reduce::{functor}<float, {out}>"
    lane = f"afpga::reduce::LaneOf<{op} >::type"
    make = f"const {op} op{'(2.0)' if functor.startswith('Norm') else ''};"
    return [
        (f"{name}.add", f"void add_{name}({lane}* a, const float* x, uint64_t at) {{ {make} "
                        f"for (int l = 0; l < 16; ++l) afpga::reduce::add_into(op, a[l], x[l], x[0], at + l); }}"),
        (f"{name}.merge", f"void merge_{name}({lane}* a, const {lane}* b) {{ {make} "
                          f"for (int l = 0; l < 16; ++l) afpga::reduce::merge_into(op, a[l], b[l]); }}"),
    ]


@pytest.fixture(scope="module")
def vectorized(tmp_path_factory) -> dict[str, bool]:
    named = [loop for name, (functor, out) in OPS.items() for loop in loops(name, functor, out)]
    done = vectorized_in(tmp_path_factory.mktemp("reduce_lanes"), "aten_fpga_reduce.h", [body for _, body in named])
    return {name: ok for (name, _), ok in zip(named, done)}


@pytest.mark.parametrize("loop", [f"{name}.{step}" for name in OPS for step in ("add", "merge")])
def test_reduce_lane_loop_vectorizes(vectorized, loop):
    assert vectorized[loop], f"g++ left the lane loop of {loop} scalar (a branch, or a whole-struct store?)"
