// Integer division as ATen's CPU kernels round it (kernels/hls/idiv): truncation (C's a / b) and
// floor (c10::div_floor_integer: truncation minus one where the signs differ and the remainder is
// not zero). The magnitudes divide one quotient bit a step (restoring division), so the hardware is
// one W-bit subtractor, not a divider array.
#pragma once

#include <cstdint>
#include <type_traits>

#include "aten_fpga_hls.h"

namespace afpga {
namespace idiv {

struct Trunc { static const bool kFloor = false; };
struct Floor { static const bool kFloor = true; };

// |x| on the unsigned type (|INT_MIN| included).
template <typename T>
inline typename std::make_unsigned<T>::type magnitude(T x) {
  typedef typename std::make_unsigned<T>::type U;
  return x < 0 ? U(U(0) - U(x)) : U(x);
}

// One step of restoring division of |a| by |b|: the next bit of |a| (its top bit, shifted out)
// into the remainder, |b| subtracted where it fits, the quotient's next bit. W steps leave
// q = |a| / |b| and r = |a| % |b|.
template <typename U>
inline void divide_step(U& a, U& r, U& q, U b) {
#pragma HLS INLINE
  const int W = int(sizeof(U) * 8);
  r = U(U(r << 1) | U(a >> (W - 1)));
  a = U(a << 1);
  const bool fits = r >= b;
  if (fits) r = U(r - b);
  q = U(U(q << 1) | U(fits));
}

// The signed quotient of a / b from the magnitudes' q and r, rounded as Mode. INT_MIN / -1 wraps
// to INT_MIN (ATen's CPU kernel traps there); a zero divisor's value is unspecified (the host raises).
template <typename Mode, typename T>
inline T quotient(T a, T b, typename std::make_unsigned<T>::type q, typename std::make_unsigned<T>::type r) {
  typedef typename std::make_unsigned<T>::type U;
  const bool differ = (a < 0) != (b < 0);
  U s = differ ? U(U(0) - q) : q;
  if (Mode::kFloor && differ && r != 0) s = U(s - 1);
  return T(s);
}

}  // namespace idiv
}  // namespace afpga
