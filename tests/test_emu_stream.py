"""The emulator's hls::stream (kernels/hls/emu/include/hls_stream.h): FIFO order, storage reused
across regions and released with its thread, an underflow reported (it would hang the card), and a pipelined stage's loop over
streams left to g++ to vectorize -- the levels' scalar streams run at SIMD speed because of it."""
from __future__ import annotations

import subprocess

from codegen.generate import ROOT

SHIMS = f"{ROOT}/kernels/hls/emu/include"

PROGRAM = r"""
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include "hls_stream.h"

// A read -> compute -> write region, as the XCL_OPT 2 kernels are written.
static void read(const float* in, hls::stream<float>& s, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) s.write(in[i]);
}
static void compute(hls::stream<float>& a, hls::stream<float>& b, hls::stream<float>& o, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) o.write(a.read() * 2.0f + b.read());  // STAGE
}
static void write(hls::stream<float>& s, float* out, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) out[i] = s.read();
}
static void region(const float* x, const float* y, float* z, uint64_t n, uint64_t reads) {
  hls::stream<float> a("a"), b("b"), o("o");
  read(x, a, n);
  read(y, b, n);
  compute(a, b, o, n);
  write(o, z, reads);
}

static int mappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) ++n;
  return n;
}

int main(int argc, char**) {
  static float x[5000], y[5000], z[5000];
  for (int i = 0; i < 5000; ++i) x[i] = float(i), y[i] = float(-3 * i);
  for (uint64_t base = 0; base < 5000; base += 1024) {  // regions of up to 1024: storage reused
    const uint64_t n = 5000 - base < 1024 ? 5000 - base : 1024;
    region(x + base, y + base, z + base, n, n);
  }
  for (int i = 0; i < 5000; ++i) {
    if (z[i] != float(-i)) return 1;
  }
  hls::stream<int> s;
  int v = 0;
  if (!s.empty() || s.size() != 0 || s.read_nb(v)) return 2;
  s << 7;
  s.write(8);
  if (s.size() != 2 || !s.read_nb(v) || v != 7 || s.read() != 8 || !s.empty()) return 3;
  // Threads that ran regions release their streams' storage when they end.
  const int before = mappings();
  for (int t = 0; t < 20; ++t) std::thread([] { static float v[64]; region(v, v, v, 64, 64); }).join();
  if (mappings() > before + 4) return 4;
  std::puts("ok");
  std::fflush(stdout);
  if (argc > 1) region(x, y, z, 4, 5);  // one read more than was written
  return 0;
}
"""


def build(tmp_path, *flags) -> tuple[str, subprocess.CompletedProcess]:
    src, exe = tmp_path / "stream.cpp", tmp_path / "stream"
    src.write_text(PROGRAM)
    cc = subprocess.run(["g++", "-std=c++14", "-O3", "-march=native", "-pthread", *flags, f"-I{SHIMS}", str(src), "-o", str(exe)],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    return str(exe), cc


def test_fifo_order_and_reuse(tmp_path):
    exe, _ = build(tmp_path)
    r = subprocess.run([exe], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "ok\n"), r


def test_a_read_from_an_empty_stream_is_reported(tmp_path):
    exe, _ = build(tmp_path)
    r = subprocess.run([exe, "underflow"], capture_output=True, text=True)
    assert r.returncode != 0 and r.stdout == "ok\n"
    assert "1 read(s) from an empty stream (the kernel would hang)" in r.stderr


def test_a_stage_loop_over_streams_vectorizes(tmp_path):
    _, cc = build(tmp_path, "-fopt-info-vec-optimized")
    stage = next(i for i, line in enumerate(PROGRAM.splitlines(), 1) if "// STAGE" in line)
    vectorized = {int(line.split(":")[1]) for line in cc.stderr.splitlines() if "loop vectorized" in line}
    assert {stage - 1, stage} & vectorized, cc.stderr  # the loop (its `for` line or its body)
