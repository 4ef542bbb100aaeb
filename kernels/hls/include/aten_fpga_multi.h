// Shared by the multi-tensor kernels (kernels/hls/multi): the pointwise building blocks, and how a
// table row's scalar is stored.
#pragma once

#include <stdint.h>

#include "aten_fpga_hls.h"

namespace afpga {
namespace multi {

// A row's scalar is a double's bits in an int64 table entry (the table is one int64 array).
inline double from_bits(int64_t bits) {
#pragma HLS INLINE
  union {
    int64_t i;
    double d;
  } u;
  u.i = bits;
  return u.d;
}

}  // namespace multi
}  // namespace afpga
