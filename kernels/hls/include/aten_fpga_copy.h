// The strided copy kernels (kernels/hls/copy): element conversions as ATen's casts compute them,
// and the address generators that walk an N-dim strided input and a row-pitched output at one
// element per cycle, with no division in the loop.
#pragma once

#include <cstdint>

#include "aten_fpga_hls.h"

namespace afpga {
namespace copy {

// Dims of the iteration space a kernel walks (the host merges contiguous dims first and splits
// launches over any further ones). Five keeps the top function within 16 arguments.
const int DIMS = 5;

// c10's static_cast semantics per destination: half rounds from float (as c10::Half(float)),
// bool is "nonzero", everything else converts through the source's compute type.
template <typename D>
struct caster {
  template <typename S>
  static D run(S x) { return static_cast<D>(static_cast<opmath_t<S>>(x)); }
};
template <>
struct caster<half> {
  template <typename S>
  static half run(S x) { return half(static_cast<float>(static_cast<opmath_t<S>>(x))); }
};
template <>
struct caster<bool> {
  template <typename S>
  static bool run(S x) { return static_cast<opmath_t<S>>(x) != opmath_t<S>(0); }
};

template <typename D, typename S>
inline D cast(S x) {
#pragma HLS INLINE
  return caster<D>::run(x);
}

// tril / triu: keep the element at (row, col) of each matrix when col - row <= k (>= k).
template <typename T>
inline T tril(T x, uint64_t col, uint64_t row, int64_t k) {
#pragma HLS INLINE
  return static_cast<int64_t>(col) - static_cast<int64_t>(row) <= k ? x : T(0);
}
template <typename T>
inline T triu(T x, uint64_t col, uint64_t row, int64_t k) {
#pragma HLS INLINE
  return static_cast<int64_t>(col) - static_cast<int64_t>(row) >= k ? x : T(0);
}

// The input side: the multi-index of flat element `begin` of the iteration space n[0] (innermost)
// .. n[DIMS-1], and its element offset through strides s[]. step() moves to the next element:
// an odometer whose carries are compares, so a pipelined loop advances it every cycle.
struct Odometer {
  uint64_t idx[DIMS];
  uint64_t back[DIMS];  // n[d] * s[d]: what wrapping dim d takes off the offset
  uint64_t off;

  Odometer(const uint64_t n[DIMS], const uint64_t s[DIMS], uint64_t begin) : off(0) {
#pragma HLS ARRAY_PARTITION variable=idx complete
#pragma HLS ARRAY_PARTITION variable=back complete
    uint64_t rest = begin;
  init:
    for (int d = 0; d < DIMS; ++d) {
#pragma HLS UNROLL
      // once per tile, outside the element loop: the only divisions
      idx[d] = rest % n[d];
      rest /= n[d];
      off += idx[d] * s[d];
      back[d] = n[d] * s[d];
    }
  }

  void step(const uint64_t n[DIMS], const uint64_t s[DIMS]) {
#pragma HLS INLINE
    bool carry = true;
  dims:
    for (int d = 0; d < DIMS; ++d) {
#pragma HLS UNROLL
      if (carry) {
        idx[d] += 1;
        off += s[d];
        carry = idx[d] == n[d];
        if (carry) {
          idx[d] = 0;
          off -= back[d];
        }
      }
    }
  }
};

// The output side: rows of `cols` elements (the innermost dim) starting every `pitch` elements.
struct Rows {
  uint64_t col, off;
  Rows(uint64_t cols, uint64_t pitch, uint64_t begin) : col(begin % cols), off(begin / cols * pitch + begin % cols) {}
  void step(uint64_t cols, uint64_t pitch) {
#pragma HLS INLINE
    col += 1;
    off += 1;
    if (col == cols) {
      col = 0;
      off += pitch - cols;
    }
  }
};

}  // namespace copy
}  // namespace afpga
