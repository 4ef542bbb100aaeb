// aten_fpga's own g++ stand-in for Vitis HLS <hls_math.h>: the hls:: math functions our kernels
// call, mapped to the C library for float and double.
//
// The exactly rounded operations (fma, sqrt, fmod, floor, ceil, trunc, nearbyint, copysign,
// fabs) are bit exact under both. For the transcendental functions, C simulation of Vitis'
// hls_math uses its own approximations; here glibc's float functions (<= 1 ulp, most correctly
// rounded) stand in, which is what ATen's scalar loops call too. ATen's vector loops call Sleef
// (within 1 ulp); docs/kernels.md gives the ulp distance measured against torch per op.
#pragma once

#include <cmath>

namespace hls {
using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atan2;
using std::atanh;
using std::ceil;
using std::copysign;
using std::cos;
using std::cosh;
using std::erf;
using std::erfc;
using std::exp;
using std::exp2;
using std::expm1;
using std::fabs;
using std::floor;
using std::fma;
using std::fmod;
using std::hypot;
using std::isinf;
using std::isnan;
using std::log;
using std::log10;
using std::log1p;
using std::log2;
using std::nearbyint;
using std::pow;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;
using std::trunc;
}  // namespace hls
