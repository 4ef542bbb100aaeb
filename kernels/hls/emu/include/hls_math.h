// aten_fpga's own g++ stand-in for Vitis HLS <hls_math.h>: the hls:: math functions our templates
// call, mapped to the C library. Vitis' C simulation uses these same IEEE-754 semantics for the
// exactly rounded operations (fma, sqrt, min/max...).
#pragma once

#include <cmath>

namespace hls {
using std::fma;
}  // namespace hls
