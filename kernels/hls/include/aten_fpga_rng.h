// The random number kernels (kernels/hls/rng): Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11) as a pure function of (seed, offset, element index), and
// the distributions over it. Element i of a launch takes the four words of philox(key = seed,
// counter = (i, offset)), so every element's value depends only on the generator state and its
// index: the same for any number of compute units, tile size or XCL_OPT level.
#pragma once

#include <cstdint>

#include "aten_fpga_hls.h"

namespace afpga {
namespace rng {

struct Words {
  uint32_t w[4];
};

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
#pragma HLS INLINE
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// Ten rounds, unrolled: a pipelined loop issues one element per cycle.
inline Words philox(uint64_t seed, uint64_t offset, uint64_t index) {
#pragma HLS INLINE
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32);
  uint32_t c2 = static_cast<uint32_t>(offset), c3 = static_cast<uint32_t>(offset >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
rounds:
  for (int r = 0; r < 10; ++r) {
#pragma HLS UNROLL
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  Words out = {{c0, c1, c2, c3}};
  return out;
}

// Element `index`'s words for the generator state (seed, offset), as the kernels' int64 registers.
inline Words draw(int64_t seed, int64_t offset, uint64_t index) {
#pragma HLS INLINE
  return philox(static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), index);
}

// Uniform in [0, 1) with the compute type's precision: 24 bits for float, 53 for double. The
// scales 2^-24 and 2^-53 are written as their exact decimal values (hexadecimal floating literals
// are C++17).
const float TWO_POW_M24 = 5.9604644775390625e-08f;
const double TWO_POW_M53 = 1.1102230246251565404236316680908203125e-16;
template <typename M> struct unit;
template <> struct unit<float> {
  static float first(const Words& r) { return static_cast<float>(r.w[0] >> 8) * TWO_POW_M24; }
  static float second(const Words& r) { return static_cast<float>(r.w[1] >> 8) * TWO_POW_M24; }
};
template <> struct unit<double> {
  static double first(const Words& r) {
    return static_cast<double>(((static_cast<uint64_t>(r.w[0]) << 32) | r.w[1]) >> 11) * TWO_POW_M53;
  }
  static double second(const Words& r) {
    return static_cast<double>(((static_cast<uint64_t>(r.w[2]) << 32) | r.w[3]) >> 11) * TWO_POW_M53;
  }
};

inline uint64_t bits64(const Words& r) { return (static_cast<uint64_t>(r.w[0]) << 32) | r.w[1]; }

// The high 64 bits of a * b, from 32-bit limbs (no 128-bit type in the datapath).
inline uint64_t mulhi64(uint64_t a, uint64_t b) {
#pragma HLS INLINE
  const uint64_t al = a & 0xFFFFFFFFu, ah = a >> 32, bl = b & 0xFFFFFFFFu, bh = b >> 32;
  const uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
  const uint64_t mid = (ll >> 32) + (lh & 0xFFFFFFFFu) + (hl & 0xFFFFFFFFu);
  return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

// The distributions, computed in M (float for float16 and float32, double for float64); the
// kernel converts the result to its dtype.
template <typename M>
inline M uniform(const Words& r, double from, double to) {
  const M u = unit<M>::first(r);
  return u * (static_cast<M>(to) - static_cast<M>(from)) + static_cast<M>(from);
}

// Box-Muller: u1 in (0, 1] keeps the logarithm finite.
template <typename M>
inline M normal(const Words& r, double mean, double std) {
  const M u1 = M(1) - unit<M>::first(r);
  const M u2 = unit<M>::second(r);
  const M radius = hls::sqrt(M(-2) * hls::log(u1));
  return radius * hls::cos(M(2 * 3.14159265358979323846) * u2) * static_cast<M>(std) + static_cast<M>(mean);
}

// 1 with probability p: a 53-bit uniform against p, in double whatever the dtype.
inline bool bernoulli(const Words& r, double p) { return unit<double>::first(r) < p; }

// -log(1 - u) / lambda, with 1 - u in (0, 1].
template <typename M>
inline M exponential(const Words& r, double lambd) {
  return -hls::log(M(1) - unit<M>::first(r)) / static_cast<M>(lambd);
}

// An integer in [from, from + range) (range 0: the whole 64-bit range), by multiply-high of 64
// random bits (bias below range / 2^64: no division in the datapath).
inline int64_t integer(const Words& r, int64_t from, int64_t range) {
  const uint64_t x = bits64(r);
  const uint64_t v = range == 0 ? x : mulhi64(x, static_cast<uint64_t>(range));
  return static_cast<int64_t>(static_cast<uint64_t>(from) + v);
}

}  // namespace rng
}  // namespace afpga
