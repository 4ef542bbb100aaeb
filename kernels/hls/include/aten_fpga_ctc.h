// The CTC loss's log-space steps (kernels/hls/ctc), written as ATen's CPU kernel (LossCTC.cpp)
// writes them -- the same operations in the same order, so that the values are its own.
#pragma once

#include <limits>

#include "aten_fpga_hls.h"

namespace afpga {
namespace ctc {

// The passes (ops.yaml expr): the template picks its stages by the op.
struct Alpha {};
struct Beta {};

template <typename T>
inline T neg_inf() { return -std::numeric_limits<T>::infinity(); }

// log(e^x1 + e^x2 + e^x3) + e: shifted by the largest (0 when all are -inf, as ATen: no -inf - -inf).
template <typename T>
inline T log_sum3(T x1, T x2, T x3, T e) {
#pragma HLS INLINE
  T m = x1;
  if (x2 > m) m = x2;
  if (x3 > m) m = x3;
  if (m == neg_inf<T>()) m = T(0);
  return hls::log(hls::exp(x1 - m) + hls::exp(x2 - m) + hls::exp(x3 - m)) + m + e;
}

// acc "log+=" x: ATen's collection of alpha * beta per label (the first term taken as it is).
template <typename T>
inline T log_add(T acc, T x) {
#pragma HLS INLINE
  if (acc == neg_inf<T>()) return x;
  const T m = acc < x ? x : acc;  // std::max(acc, x)
  return hls::log(hls::exp(acc - m) + hls::exp(x - m)) + m;
}

// The negative log likelihood from the last row's final blank (l1) and last label (l2).
template <typename T>
inline T nll_of(T l1, T l2) {
  T m = l1 < l2 ? l2 : l1;  // std::max(l1, l2)
  if (m == neg_inf<T>()) m = T(0);
  return -(hls::log(hls::exp(l1 - m) + hls::exp(l2 - m)) + m);
}

}  // namespace ctc
}  // namespace afpga
