"""The HLS kernel sources are C++14 that Vitis HLS's front end accepts. Vitis HLS parses kernels
with clang, and `v++ -c` is given no -std (C++14, its documented language level); the emulated
device compiles the same sources with g++. So every kernel the library generates (every op x
dtype of every category, at every XCL_OPT level) and a representative set of the fused kernels
torch.compile generates at run time (chains, reductions, GEMMs with epilogues and prologues,
float16, a class selection, the three convolutions) is compiled by clang++ and by g++, each plain
(C simulation) and with -D__SYNTHESIS__ (what HLS synthesizes), -std=c++14 -pedantic-errors
-fsyntax-only, against our HLS shims, the way the emulated image compiles them (with image.h's
registration). -pedantic-errors matters: without it g++ accepts `if constexpr`, inline variables
and fold expressions in C++14 mode with a mere warning. clang matters: it rejects what g++ lets
through (a constexpr function reading a `const` array, _Float16 on x86).

The kernels are batched as the emulated image batches them (codegen/gen_hls.py emu_units: each
category's engine, codegen/engines.py, which includes its kernels), all of a level in one translation unit, since parsing the headers is most of a unit's time: 16 units of a
few seconds each, two compilers at a time."""
from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from codegen import abi
from codegen import library as kernel_library
from codegen.gen_hls import generate_hls, template_env
from codegen.generate import HLS_ROOT, ROOT, add_engines
from codegen.model import DTYPES, LEVELS, Kernel
from codegen.plan import ABI_HEADER

# The emulated build's include path (site_scons/afpga/emu.py), our shims first; the generated
# directory (afpga_abi.h, the kernel sources) is the test's own.
INCLUDES = ["kernels/hls/emu/include", "kernels/hls/include", "kernels/hls/emu"]
FLAGS = ["-std=c++14", "-pedantic-errors", "-fsyntax-only", "-Wno-unknown-pragmas", "-Wno-unused-label",
         "-DAFPGA_CUS=1", "-DAFPGA_GEMM_PE_M=4", "-DAFPGA_GEMM_PE_N=4"]
COMPILERS = ("clang++", "g++")
MODES = {"C simulation": [], "synthesis": ["-D__SYNTHESIS__"]}


def compiler(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: Vitis HLS's front end is clang, and this test checks every kernel "
                    "with it; run `bash ci/install.sh` (it installs Debian's clang)")
    return path


def library_kernels() -> tuple[Kernel, ...]:
    """Every kernel the library can generate: each op of each category at each of its dtypes."""
    return tuple(Kernel(op, DTYPES[d]) for cat in kernel_library.load_library(HLS_ROOT).values()
                 for op in cat.ops.values() for d in op.dtypes)


def fused_kernels() -> list:
    """Fused kernels of every kind torch.compile generates, traced from small graphs."""
    import torch
    import torch.nn.functional as F
    from torch.fx.experimental.proxy_tensor import make_fx

    from aten_fpga.compile import loss  # noqa: F401  (registers aten_fpga::class_select)
    from aten_fpga.compile.conv import ConvKernel, fuse_convolutions
    from aten_fpga.compile.fuse import DTYPES as FUSE_DTYPES
    from aten_fpga.compile.fuse import partition, plan

    def traced(f, *args, dtype=torch.float32):
        gm = make_fx(f, tracing_mode="fake")(*(torch.randn(a, dtype=dtype) if isinstance(a, tuple) else a
                                               for a in args))
        return [plan(g).kernel for g in partition(gm)]

    def linear(x, b, w, s, r):  # a chain with a broadcast bias; addmm with row, per-row and full operands
        return torch.tanh(F.gelu(x + b) * 0.5), F.gelu(torch.addmm(b, x, w.t()).view(2, 2, 32)) * s + r

    def gemm_reductions(x, w, t):  # a product's column, row and whole reductions in its write stage
        y = torch.mm(x, w)
        d = y - t
        return y, (d * d).mean(), y.sum(0), d.mean(0, keepdim=True), y.amax(1)

    def chain_reductions(x, b):  # a chain's column sum and whole mean
        y = x * b
        return y, y.view(-1, 32).sum(0), (x - b).pow(2).mean()

    def prologue(d, s, h, w):  # products whose a operand is made in their read stage, and its row sums
        g = d * s
        return torch.mm(g.t(), h), torch.mm(g, w), g.sum(0, keepdim=True)

    def selection(x, t):  # a cross entropy's class selection, summed
        return (torch.ops.aten_fpga.class_select(x, t, -100, 10) * 2).sum()

    kernels = (traced(linear, (4, 32), (32,), (32, 32), (2, 2, 1), (2, 2, 32))
               + traced(gemm_reductions, (30, 32), (32, 40), (30, 40))
               + traced(chain_reductions, (2, 4, 32), (32,))
               + traced(prologue, (30, 16), (), (30, 8), (16, 8))
               + traced(lambda x, b, w: (torch.sigmoid(x * b + 1), torch.relu(torch.mm(x, w))), (8, 32), (32,),
                        (32, 32), dtype=torch.float16)
               + traced(selection, (8, 10), torch.zeros(8, 1, dtype=torch.int64)))
    (conv,) = fuse_convolutions(make_fx(lambda x, w, b: F.conv2d(x, w, b).relu(), tracing_mode="fake")(
        torch.randn(2, 3, 12, 12), torch.randn(4, 3, 3, 3), torch.randn(4)))
    f32 = FUSE_DTYPES["float32"]
    return kernels + [conv.kernel, ConvKernel(f32, "input_grad"), ConvKernel(f32, "weight_grad", bias=True, kw=3)]


@pytest.fixture(scope="module")
def units(tmp_path_factory):
    """{level: the translation unit of every library kernel and every sampled fused kernel}."""
    from aten_fpga.compile import codegen as fused_codegen

    gen = tmp_path_factory.mktemp("gen")
    kernels = library_kernels()
    files = {ABI_HEADER: abi.header(), **generate_hls(kernels, template_env(HLS_ROOT))}
    for level in LEVELS:
        add_engines(kernels, files, level)  # each category's engine, and the image's units of them
    fused = fused_kernels()
    kinds = {type(k).__name__ for k in fused}
    assert kinds == {"FusedKernel", "GemmEpilogue", "ConvKernel"} and len(fused) >= 12, kinds
    out = {}
    for level in LEVELS:
        parts = [text for rel, text in sorted(files.items()) if rel.startswith(f"emu/opt{level}/")]
        for k in fused:
            files[f"fused/opt{level}/{k.name}.cpp"] = fused_codegen.render(k, level)
            parts.append(fused_codegen.emu_unit(k, f"../../fused/opt{level}/{k.name}.cpp"))
        files[f"emu/opt{level}/all.cpp"] = "\n".join(parts)
        out[level] = gen / f"emu/opt{level}/all.cpp"
    for rel, text in files.items():
        (gen / rel).parent.mkdir(parents=True, exist_ok=True)
        (gen / rel).write_text(text)
    return out


def compile_cmd(cxx: str, gen, source, extra=()) -> list[str]:
    return [cxx, *FLAGS, *extra, *(f"-I{ROOT}/{d}" for d in INCLUDES), f"-I{gen}", str(source)]


@pytest.mark.parametrize("name", COMPILERS)
def test_every_kernel_compiles(name, units):
    cxx = compiler(name)
    gen = units[LEVELS[0]].parents[2]
    jobs = [(level, mode, compile_cmd(cxx, gen, unit, [f"-DAFPGA_OPT_LEVEL={level}", *flags]))
            for level, unit in units.items() for mode, flags in MODES.items()]

    def run(job):
        return job, subprocess.run(job[2], capture_output=True, text=True)

    with ThreadPoolExecutor(2) as pool:
        failed = [(level, mode, r.stderr) for (level, mode, _), r in pool.map(run, jobs) if r.returncode != 0]
    assert not failed, "\n".join(f"{name} rejects the XCL_OPT {level} kernels ({mode}):\n{err[-3000:]}"
                                 for level, mode, err in failed)


def test_flags_reject_cxx17(tmp_path):
    """The check has teeth: a C++17 construct in a kernel fails under the test's flags."""
    src = tmp_path / "k.cpp"
    src.write_text('#include "aten_fpga_hls.h"\n'
                   "template <typename T> T twice(T x) { if constexpr (afpga::is_float<T>::value) return x + x; "
                   "else return 2 * x; }\n"
                   "float f(float x) { return twice(x); }\n")
    for name in COMPILERS:
        r = subprocess.run(compile_cmd(compiler(name), tmp_path, src), capture_output=True, text=True)
        assert r.returncode != 0 and "constexpr" in r.stderr, (name, r.stderr)


def test_clang_rejects_what_gxx_accepts(tmp_path):
    """Why clang: a constexpr function that reads a `const` (not constexpr) array -- the sin window
    table's bits once did -- passes g++ -pedantic-errors and fails clang, as it fails Vitis HLS."""
    src = tmp_path / "k.cpp"
    src.write_text("#include <cstdint>\nconst uint64_t BITS[2] = {1, 2};\nstruct Twice { uint64_t bits[2]; };\n"
                   "constexpr Twice twice() {\n  Twice t{};\n  for (int i = 0; i < 2; ++i) t.bits[i] = 2 * BITS[i];\n"
                   "  return t;\n}\nconstexpr Twice TWICE = twice();\n")
    assert subprocess.run(compile_cmd(compiler("g++"), tmp_path, src), capture_output=True).returncode == 0
    r = subprocess.run(compile_cmd(compiler("clang++"), tmp_path, src), capture_output=True, text=True)
    assert r.returncode != 0 and "constant expression" in r.stderr, r.stderr


HALF_CHECK = r"""
#include <cmath>
#include <cstdio>
#include "hls_half.h"

// A hash of `half`'s conversions: every binary16 value to float and back, the floats about each
// midpoint between neighbours (the ties, and one ulp either side), and a sweep of all float bit
// patterns (NaNs, infinities, subnormals of both types).
static uint64_t hash = 1469598103934665603ull;
static void mix(uint32_t v) { hash = (hash ^ v) * 1099511628211ull; }
static void to_half(uint32_t bits) {
  const volatile float f = hls_half_detail::bits_float(bits);  // g++ would fold half -> float -> half
  const half h(f);
  uint16_t out;
  std::memcpy(&out, &h, 2);
  mix(out);
}
static float value(uint32_t bits) {
  const uint16_t b = uint16_t(bits);
  half h;
  std::memcpy(&h, &b, 2);
  return h;
}
int main() {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float v = value(b);
    mix(hls_half_detail::float_bits(v));
    to_half(hls_half_detail::float_bits(v));
    if ((b & 0x7fffu) < 0x7c00u) {  // finite: the tie with the next value up in magnitude
      const float next = ((b + 1) & 0x7fffu) == 0x7c00u ? std::copysign(65536.0f, v) : value(b + 1);
      const uint32_t mid = hls_half_detail::float_bits((v + next) * 0.5f);  // exact
      for (uint32_t d = 0; d < 3; ++d) to_half(mid - 1 + d);
    }
  }
  for (uint64_t x = 0; x < (1ull << 32); x += 1021) to_half(uint32_t(x));
  std::printf("%d %016llx\n", AFPGA_HALF_F16, (unsigned long long)hash);
}
"""


def test_software_half_converts_as_float16(tmp_path):
    """clang 14 on x86 has no _Float16, so the `half` shim converts in software there: to the same bits
    as g++'s _Float16 (the emulated device's), round to nearest even, NaNs quieted alike."""
    src = tmp_path / "half.cpp"
    src.write_text(HALF_CHECK)
    results = {}
    for name, extra in (("g++", []), ("g++", ["-DAFPGA_SOFT_HALF"]), ("clang++", [])):
        exe = tmp_path / f"half_{name}{len(extra)}"
        subprocess.run([compiler(name), "-std=c++14", "-O2", *extra, f"-I{ROOT}/kernels/hls/emu/include", str(src),
                        "-o", str(exe)], check=True)
        results[(name, *extra)] = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert results[("g++",)][0] == "1", "g++'s half should store a _Float16 (the reference)"
    assert results[("g++", "-DAFPGA_SOFT_HALF")][0] == "0"
    assert len({r[1] for r in results.values()}) == 1, results
