"""The XCL_OPT 4 GEMM kernel alone, per PE array: the CPU time of one n x n x n float32 product.

    python bench/bench_gemm_kernel.py [--pe 16x32,32x48] [--n 1024] [--repeat 5] [--json PATH]

The kernel (kernels/hls/gemm/opt4.cpp.j2, rendered as codegen renders it) is compiled by g++ with
the emulated image's flags at each `gemm_pe`, and a small driver times it on operands in host
memory: no host runtime, no launch, no torch. Its CPU time (the best of --repeat calls) is what the
emulated device spends in the kernel, and is less disturbed by other processes on a shared machine
than the wall time bench_ops.py measures (which compares with torch in the same run). Every
geometry must print the same checksum: the PE array changes no result.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, machine, print_table, write_json  # noqa: E402

DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include "gemm.cpp"
using namespace v_gemm_float32_opt4;
int main(int argc, char** argv) {
  const uint64_t n = std::strtoull(argv[1], nullptr, 10);
  const int repeat = std::atoi(argv[2]);
  V* m[3];
  for (V*& p : m) p = new V[n * n / LANES];  // -faligned-new: whole 64-byte words
  unsigned seed = 1;
  for (int i = 0; i < 2; ++i)  // integer values: exact sums, so the checksum is the same for any order
    for (uint64_t e = 0; e < n * n; ++e) reinterpret_cast<T*>(m[i])[e] = T(int((seed = seed * 1664525u + 1013904223u) >> 28) - 8);
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    const std::clock_t start = std::clock();
    v_gemm_float32(m[0], m[1], m[2], 1.0f, 0.0f, n, n, n, 1, 0, n, n, n, 0, 0, 0);
    const double s = double(std::clock() - start) / CLOCKS_PER_SEC;
    best = s < best ? s : best;
  }
  double checksum = 0;
  for (uint64_t e = 0; e < n * n; ++e) checksum += reinterpret_cast<T*>(m[2])[e] * double(e % 7 + 1);
  std::printf("%.6f %.0f\n", best, checksum);
}
"""

# The emulated image's flags (site_scons/afpga/emu.py) that bear on the kernel's code.
FLAGS = ["-std=c++14", "-faligned-new", "-O3", "-march=native", "-ffp-contract=off", "-Wno-unknown-pragmas",
         "-Wno-unused-label"]


def render(folder: str) -> None:
    sys.path.insert(0, ROOT)
    from codegen import library as kernel_library
    from codegen.gen_hls import template_env
    from codegen.generate import HLS_ROOT
    from codegen.model import DTYPES, Kernel

    kernel = Kernel(kernel_library.load_library(HLS_ROOT)["gemm"].ops["gemm"], DTYPES["float32"])
    with open(os.path.join(folder, "gemm.cpp"), "w") as f:
        f.write(template_env(HLS_ROOT).get_template("gemm/opt4.cpp.j2").render(
            kernel=kernel, op=kernel.op, dtype=kernel.dtype, level=4))
    with open(os.path.join(folder, "driver.cpp"), "w") as f:
        f.write(DRIVER)


def run(pes: list[tuple[int, int]], n: int, repeat: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        render(folder)
        for pm, pn in pes:
            exe = os.path.join(folder, f"gemm_{pm}x{pn}")
            subprocess.run(["g++", *FLAGS, f"-DAFPGA_GEMM_PE_M={pm}", f"-DAFPGA_GEMM_PE_N={pn}",
                            *(f"-I{ROOT}/kernels/hls/{d}" for d in ("emu/include", "include")), f"-I{folder}",
                            os.path.join(folder, "driver.cpp"), "-o", exe], check=True)
            seconds, checksum = subprocess.run([exe, str(n), str(repeat)], check=True, capture_output=True,
                                               text=True).stdout.split()
            rows.append({"pe": f"{pm}x{pn}", "n": n, "cpu_s": float(seconds), "checksum": checksum,
                         "gflops": 2 * n ** 3 / float(seconds) / 1e9, "load1": os.getloadavg()[0]})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pe", default="16x32,32x48", help="PE arrays PMxPN, comma separated (multiples of 4)")
    p.add_argument("--n", type=int, default=1024, help="the product's size (a multiple of 16)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default=os.path.join(ROOT, "build", "bench", "gemm_kernel.json"))
    args = p.parse_args(argv)
    if args.n % 16:
        raise SystemExit(f"--n {args.n}: give a multiple of 16 (the driver's rows are whole 512-bit words)")
    pes = [tuple(int(x) for x in pe.split("x")) for pe in args.pe.split(",") if pe]
    rows = run(pes, args.n, args.repeat)
    print_table(["gemm_pe", "n", "CPU ms", "GFLOP/s", "checksum", "load"],
                [[r["pe"], r["n"], r["cpu_s"] * 1e3, r["gflops"], r["checksum"], r["load1"]] for r in rows])
    if len({r["checksum"] for r in rows}) > 1:
        raise SystemExit("the PE arrays gave different products")
    write_json(args.json, {"benchmark": "gemm_kernel", "machine": machine(), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
