// The sort kernels' order (kernels/hls/sort). ATen's CPU sort runs std::stable_sort over (key,
// index) pairs under KeyValueCompAsc (a < b, or b NaN and a not) or KeyValueCompDesc (a > b, or a
// NaN and b not): NaN sorts above every number, -0.0 and 0.0 are equal, and equal keys keep their
// order in either direction. A stable merge that takes the first run's head unless the second's
// goes strictly before it gives the same permutation.
#pragma once

#include "aten_fpga_hls.h"

namespace afpga {
namespace sort {

// The type keys compare in: float16 in float (exact), the others as they are.
template <typename T> struct compared { typedef T type; };
template <> struct compared<half> { typedef float type; };

template <typename T>
struct Item {
  T key;
  int64_t index;
};

template <typename T>
struct Merge {
  typedef typename compared<T>::type C;
  // Does key b go strictly before key a? (x != x: NaN; never for the integers.)
  static bool before(T b, T a, bool descending) {
    const C x = C(b), y = C(a);
    const bool x_nan = x != x, y_nan = y != y;
    return descending ? (x_nan && !y_nan) || x > y : (y_nan && !x_nan) || x < y;
  }
};

}  // namespace sort
}  // namespace afpga
