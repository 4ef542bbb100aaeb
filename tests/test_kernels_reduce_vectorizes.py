"""The reduce kernels' lane loops over float32 (kernels/hls/reduce: the XCL_OPT 4 fold's `add_into` of a
word's 16 lanes, the drain's `merge_into` of two partials' lanes) are code g++ vectorizes. The emulated
reductions are memory bound only if they do: argmax's compare chain and whole-struct store once kept
its fold scalar at four times the CPU's time. Each loop is compiled on its own line with the emulated
image's flags (site_scons/afpga/emu.py), and each must vectorize."""
from __future__ import annotations

import subprocess

import pytest

from codegen.generate import ROOT

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
# -fno-ipa-icf: g++ would fold loops of identical code (sum's and norm1's merge) into one and report it
# on the first one's line only.
FLAGS = ["-std=c++14", "-faligned-new", "-O3", "-march=native", "-ffp-contract=off", "-Wno-unknown-pragmas",
         "-fno-ipa-icf"]


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
    src = tmp_path_factory.mktemp("reduce_lanes") / "lanes.cpp"
    lines = ['#include "aten_fpga_reduce.h"']
    first = len(lines) + 1
    named = [loop for name, (functor, out) in OPS.items() for loop in loops(name, functor, out)]
    lines += [body for _, body in named]
    src.write_text("\n".join(lines) + "\n")
    cc = subprocess.run(["g++", *FLAGS, f"-I{ROOT}/kernels/hls/emu/include", f"-I{ROOT}/kernels/hls/include", "-c",
                         str(src), "-o", str(src.with_suffix(".o")), "-fopt-info-vec-optimized"],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    done = {int(line.split(":")[1]) for line in cc.stderr.splitlines()
            if line.startswith(str(src)) and "loop vectorized" in line}
    return {name: first + k in done for k, (name, _) in enumerate(named)}


@pytest.mark.parametrize("loop", [f"{name}.{step}" for name in OPS for step in ("add", "merge")])
def test_reduce_lane_loop_vectorizes(vectorized, loop):
    assert vectorized[loop], f"g++ left the lane loop of {loop} scalar (a branch, or a whole-struct store?)"
