// aten_fpga's own g++ stand-in for Vitis HLS <hls_vector.h>: a fixed-size vector of N lanes that
// maps to one wide bus word (N * bits(T) = 512 for our XCL_OPT 4 ports). Lane-wise operators are
// loops the compiler vectorizes, so the emulated kernel runs at SIMD speed.
#pragma once

#include <cstddef>

namespace hls {

template <typename T, std::size_t N>
class alignas(sizeof(T) * N) vector {
 public:
  vector() = default;
  explicit vector(const T& v) {
    for (std::size_t i = 0; i < N; ++i) data_[i] = v;
  }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  static constexpr std::size_t size() { return N; }

 private:
  T data_[N];
};

}  // namespace hls
