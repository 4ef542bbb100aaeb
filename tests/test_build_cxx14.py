"""The HLS kernel sources are C++14: Vitis HLS's documented language level, and `v++ -c` is given
no -std. A sample of generated kernels -- every category at every XCL_OPT level, each op of a
category once and each of its dtypes once -- is compiled by g++ -std=c++14 -pedantic-errors
-fsyntax-only against our HLS shims, the way the emulated image compiles them (with image.h's
registration). -pedantic-errors matters: without it g++ accepts `if constexpr`, inline variables
and fold expressions in C++14 mode with a mere warning."""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

from codegen import abi
from codegen import library as kernel_library
from codegen.gen_hls import HEADER, emu_units, template_env
from codegen.generate import HLS_ROOT, ROOT
from codegen.model import DTYPES, LEVELS, Kernel
from codegen.plan import ABI_HEADER

# The emulated build's include path (site_scons/afpga/emu.py), our shims first; the generated
# directory (afpga_abi.h, the kernel sources) is the test's own.
INCLUDES = ["kernels/hls/emu/include", "kernels/hls/include", "kernels/hls/emu"]
FLAGS = ["g++", "-std=c++14", "-pedantic-errors", "-fsyntax-only", "-Wno-unknown-pragmas", "-Wno-unused-label",
         "-DAFPGA_OPT_LEVEL=4", "-DAFPGA_CUS=1", "-DAFPGA_GEMM_PE_M=4", "-DAFPGA_GEMM_PE_N=4"]


def sample() -> list[Kernel]:
    """Per category: each op at its first dtype, and each dtype at the first op that has it."""
    kernels = []
    for cat in kernel_library.load_library(HLS_ROOT).values():
        ops, dtypes = set(), set()
        for op in cat.ops.values():
            for d in op.dtypes:
                if op.name not in ops or d not in dtypes:
                    kernels.append(Kernel(op, DTYPES[d]))
                    ops.add(op.name)
                    dtypes.add(d)
    return kernels


def compile_cmd(gen, unit) -> list[str]:
    return FLAGS + [f"-I{ROOT}/{d}" for d in INCLUDES] + [f"-I{gen}", str(unit)]


def test_generated_kernels_are_cxx14(tmp_path):
    kernels = sample()
    env = template_env(HLS_ROOT)
    (tmp_path / ABI_HEADER).write_text(abi.header())
    units = []
    for level in LEVELS:
        for k in kernels:
            template = f"{k.op.category}/opt{level}.cpp.j2"
            path = tmp_path / k.source(level)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(HEADER.format(src=f"kernels/hls/{template}") +
                            env.get_template(template).render(kernel=k, op=k.op, dtype=k.dtype, level=level))
        # One unit per level: every category's emulated-image unit, concatenated (their kernels and
        # top functions have distinct names within a level).
        unit = tmp_path / "emu" / f"opt{level}" / "sample.cpp"
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text("\n".join(emu_units(tuple(kernels), level).values()))
        units.append(unit)
    categories = {k.op.category for k in kernels}
    assert len(categories) >= 15 and len(kernels) > 2 * len(categories)

    def run(unit):
        return unit, subprocess.run(compile_cmd(tmp_path, unit), capture_output=True, text=True)

    with ThreadPoolExecutor(2) as pool:
        for unit, r in pool.map(run, units):
            assert r.returncode == 0, f"{unit.relative_to(tmp_path)} is not C++14:\n{r.stderr[-4000:]}"


def test_flags_reject_cxx17(tmp_path):
    """The check has teeth: a C++17 construct in a kernel fails under the test's flags."""
    src = tmp_path / "k.cpp"
    src.write_text('#include "aten_fpga_hls.h"\n'
                   "template <typename T> T twice(T x) { if constexpr (afpga::is_float<T>::value) return x + x; "
                   "else return 2 * x; }\n"
                   "float f(float x) { return twice(x); }\n")
    r = subprocess.run(compile_cmd(tmp_path, src), capture_output=True, text=True)
    assert r.returncode != 0 and "if constexpr" in r.stderr, r.stderr
