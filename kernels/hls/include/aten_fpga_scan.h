// The scans' steps (kernels/hls/scan): ATen's CPU cumulative kernels (cpu_cum_base_kernel) carry
// the running value in acc_type<T, /*is_cuda=*/false> -- double for float32, float for float16,
// int64 for the integers -- and round each output from it; so do these. The indexed steps
// (cummax, cummin) also carry the index of the element that set the running value.
#pragma once

#include "aten_fpga_hls.h"

namespace afpga {
namespace scan {

template <typename T> struct acc { typedef T type; };
template <> struct acc<float> { typedef double type; };
template <> struct acc<half> { typedef float type; };
template <> struct acc<int32_t> { typedef int64_t type; };
template <typename T> using acc_t = typename acc<T>::type;

template <typename A>
struct Sum {
  static A init() { return A(0); }
  static A step(A acc, A x) { return acc + x; }
};

template <typename A>
struct Prod {
  static A init() { return A(1); }
  static A step(A acc, A x) { return acc * x; }
};

// log(e^acc + e^x) as ATen's _log_add_exp_helper(x, acc): the larger plus log1p(e^(smaller -
// larger)); a NaN running value stays NaN, and two infinities of one sign give x.
template <typename A>
struct LogAddExp {
  static A init() { return -std::numeric_limits<A>::infinity(); }
  static A step(A acc, A x) {
    const bool nan = hls::isnan(acc);
    const A lo = nan ? acc : (acc < x ? acc : x);  // std::min(x, acc)
    const A hi = nan ? acc : (x < acc ? acc : x);  // std::max(x, acc)
    if (lo != hi || !(hls::isinf(lo) || hls::isnan(lo))) return hi + hls::log1p(hls::exp(lo - hi));
    return x;
  }
};

// cummax (largest) / cummin, as ATen's cummax_cummin_helper: element k becomes the running value,
// and k its index, when it is NaN, or when the running value is not NaN and the element is >=
// (cummax) / <= (cummin) it -- so a tie takes the later index, and after a NaN each later NaN's.
// Element 0 is always taken. A holds T's values exactly, so the comparisons are T's.
template <typename A>
struct Extreme {
  static A init() { return A(0); }
  static void step(A& acc, int64_t& at, A x, int64_t k, bool largest) {
    const bool beyond = largest ? x >= acc : x <= acc;
    if (k == 0 || x != x || (acc == acc && beyond)) {
      acc = x;
      at = k;
    }
  }
};

}  // namespace scan
}  // namespace afpga
