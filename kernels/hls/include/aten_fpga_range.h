// The range kernels (kernels/hls/range): element `index` of arange, start + step * index,
// computed in ATen's CPU accumulate type (at::acc_type<T, false>) and converted once: double for
// float32 and float64, float for float16. ATen's integer accumulate type is int64; the kernel uses
// double, exact because the host passes integer start and step only with every value within 2^53
// (host/ps/fpga_rng.cpp). No division, one multiply-add.
#pragma once

#include <cstdint>

#include "aten_fpga_hls.h"

namespace afpga {
namespace range {

template <typename T> struct acc { typedef double type; };
template <> struct acc<half> { typedef float type; };

template <typename T>
inline T arange(double start, double step, uint64_t index) {
#pragma HLS INLINE
  typedef typename acc<T>::type A;
  return T(A(start) + A(step) * A(static_cast<int64_t>(index)));
}

}  // namespace range
}  // namespace afpga
