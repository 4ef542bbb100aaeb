// aten_fpga's own g++ stand-in for Vitis HLS <hls_half.h>: `half`, an IEEE binary16 value.
//
// It converts implicitly to float and back, so arithmetic on halves happens in float and rounds
// once to binary16 (round to nearest even) when stored -- how Vitis C simulation evaluates half
// expressions, and how ATen computes float16 ops (in float, its opmath type). Storage is the
// compiler's _Float16 where it has one (g++ on x86: the F16C conversions, which the emulated
// device runs); a compiler without it (clang 14 on x86, whose front end is Vitis HLS's) stores the
// bits and converts in software, to the same bits (tests/test_build_cxx14.py compares the two).
#pragma once

#include <cstdint>
#include <cstring>

namespace hls_half_detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float -> binary16, rounded to nearest even; a NaN keeps its sign and top payload bits, quieted.
inline uint16_t to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));  // NaN
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);               // >= 65520: inf
  if (ax >= 0x38800000u) {                                             // >= 2^-14: a normal half
    const uint32_t rebiased = ax - (uint32_t(127 - 15) << 23);
    return uint16_t(sign | ((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13));  // a carry bumps the exponent
  }
  if (ax < 0x33000000u) return uint16_t(sign);  // < 2^-25: rounds to zero (2^-25 itself ties to even 0)
  // A subnormal half: the significand in units of 2^-24, from a float exponent e in 102 .. 112.
  const uint32_t e = ax >> 23, shift = 126 - e;  // 14 .. 24
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1), tie = 1u << (shift - 1);
  return uint16_t(sign | (q + (rest > tie || (rest == tie && (q & 1u)))));  // 0x400: the smallest normal
}

// binary16 -> float, exactly; a NaN keeps its payload, quieted.
inline float from_half(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0) return bits_float(sign | float_bits(float(m) * 5.9604644775390625e-8f));  // m 2^-24, exact
  return bits_float(sign | ((e + 127 - 15) << 23) | (m << 13));
}

}  // namespace hls_half_detail

// AFPGA_HALF_F16: 1 where `half` stores a _Float16 (define AFPGA_SOFT_HALF to use the software
// conversions anyway: the test that compares them does).
#if defined(__FLT16_MANT_DIG__) && !defined(AFPGA_SOFT_HALF)
#define AFPGA_HALF_F16 1
#else
#define AFPGA_HALF_F16 0
#endif

class half {
 public:
  half() = default;
#if AFPGA_HALF_F16
  half(float f) : v_(static_cast<_Float16>(f)) {}  // NOLINT: implicit, like Vitis' half
  operator float() const { return static_cast<float>(v_); }  // NOLINT

 private:
  _Float16 v_;
#else
  half(float f) : v_(hls_half_detail::to_half(f)) {}  // NOLINT
  operator float() const { return hls_half_detail::from_half(v_); }  // NOLINT

 private:
  uint16_t v_;
#endif
};

static_assert(sizeof(half) == 2, "half must be 16 bits: it is a tensor element");
