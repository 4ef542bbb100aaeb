// Shared by every aten_fpga HLS kernel: the HLS headers our templates use and the ATen-exact
// building blocks their op expressions call. Compiled by v++ (Vitis headers) or, for the emulated
// device, by g++ with kernels/hls/emu/include first on the include path.
//
// Each function reproduces what ATen's CPU kernel computes for one element -- the same operations
// in the same order, fused exactly where ATen fuses -- so that exactly rounded ops are bit exact.
// The semantics were read off torch on the CPU by experiment (tests/test_kernels_pointwise.py
// asserts them); docs/kernels.md lists the few places where ATen itself is not uniform.
#pragma once

#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <hls_half.h>
#include <hls_math.h>
#include <hls_stream.h>
#include <hls_vector.h>

namespace afpga {

// The type an op computes in: ATen widens float16 to float32 (its "opmath" type), rounds once
// at the end; every other dtype computes in itself.
template <typename T> struct opmath { typedef T type; };
template <> struct opmath<half> { typedef float type; };
template <typename T> using opmath_t = typename opmath<T>::type;

template <typename T> struct is_complex : std::false_type {};
template <typename T> struct is_complex<std::complex<T>> : std::true_type {};

// The per-type variants below are chosen at compile time by overloading on these traits' tags
// (std::true_type / std::false_type): HLS's language level is C++14, without `if constexpr`.
template <typename T> struct is_float : std::is_floating_point<T> {};

// hls::isnan for types that have NaN, false for those that have none (integers), so a template
// can test any dtype.
template <typename T> inline bool has_nan(T a, std::true_type) { return hls::isnan(a); }
template <typename T> inline bool has_nan(T, std::false_type) { return false; }
template <typename T> inline bool has_nan(T a) { return has_nan(a, is_float<T>()); }

// --- arithmetic ---------------------------------------------------------------------------------

// A value rounded to its type before the next operation. HLS always rounds so; the barrier keeps
// g++ (12) from recognizing products added and subtracted in pairs (a complex product) in
// vectorized loops, which it computes with fused vfmaddsub even under -ffp-contract=off.
template <typename F>
inline F rounded(F x) {
#ifndef __SYNTHESIS__
  asm("" : "+x"(x));
#endif
  return x;
}

// Complex product as ATen's Vectorized<c10::complex<float>> forms it: (ac - bd) + (ad + bc)i with
// no fused operations and no C99 Annex G NaN recovery (std::complex's operator* has it).
template <typename T>
inline T mul(T a, T b, std::true_type /* complex */) {
  return T(rounded(a.real() * b.real()) - rounded(a.imag() * b.imag()),
           rounded(a.real() * b.imag()) + rounded(a.imag() * b.real()));
}
template <typename T>
inline T mul(T a, T b, std::false_type) { return a * b; }
template <typename T>
inline T mul(T a, T b) { return mul(a, b, is_complex<T>()); }

// a + alpha * b as ATen's CPU kernel rounds it: its vectorized loop uses one fused multiply-add
// (vec::fmadd) for floating types, so we do too; with alpha == 1 this is the correctly rounded
// a + b. sub is add with -alpha (ATen's sub_kernel calls add_kernel so).
template <typename T>
inline T add_alpha(T a, T b, T alpha, std::true_type /* floating point */) { return hls::fma(b, alpha, a); }
template <typename T>
inline T add_alpha(T a, T b, T alpha, std::false_type) {
  return a + mul(b, alpha);  // integers wrap; complex: ATen's fmadd multiplies, then adds
}
template <typename T>
inline T add_alpha(T a, T b, T alpha) { return add_alpha(a, b, alpha, is_float<T>()); }

// -a; for complex ATen's vector loop computes 0 - a, so -0 parts become +0.
template <typename T>
inline T neg(T a, std::true_type /* complex */) { return T(0) - a; }
template <typename T>
inline T neg(T a, std::false_type) { return -a; }
template <typename T>
inline T neg(T a) { return neg(a, is_complex<T>()); }

// Python-style floor division, as ATen's div_floor_floating: from the exact remainder, so that
// floor(a / b) is not spoiled by the rounding of a / b.
template <typename T>
inline T div_floor(T a, T b) {
  if (b == T(0)) return a / b;  // IEEE: +-inf or NaN
  const T mod = hls::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
  if (div == T(0)) return hls::copysign(T(0), a / b);
  T floordiv = hls::floor(div);
  if (div - floordiv > T(0.5)) floordiv += T(1);
  return floordiv;
}

// Python-style remainder: the sign of the divisor.
template <typename T>
inline T remainder(T a, T b) {
  T mod = hls::fmod(a, b);
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) mod += b;
  return mod;
}

// pow(base, exp) for a scalar exponent: ATen's pow_tensor_scalar kernel replaces these exponents
// by exactly rounded arithmetic; any other goes to pow with the exponent in T, as its vector loop
// does (its scalar tail raises to the double exponent: see docs/kernels.md).
template <typename T>
inline T pow_scalar(T a, T e) {
  if (e == T(2)) return a * a;
  if (e == T(3)) return a * a * a;
  if (e == T(0.5)) return hls::sqrt(a);
  if (e == T(-0.5)) return T(1) / hls::sqrt(a);
  if (e == T(-1)) return T(1) / a;
  if (e == T(-2)) return T(1) / (a * a);
  return hls::pow(a, e);
}

// x * log(y), with 0 * log(y) = 0 unless y is NaN. ATen's (scalar) kernel computes in the
// tensor dtype T, so for float16 log(y) is rounded to half before the product.
template <typename T, typename M>
inline M xlogy(M x, M y) {
  if (hls::isnan(y)) return y;
  if (x == M(0)) return M(0);
  return x * M(T(hls::log(y)));
}

// --- comparisons that propagate NaN -------------------------------------------------------------

// maximum/minimum propagate NaN. Of two equal zeros ATen's vector loop (x86 max/min) returns the
// second operand, its scalar tail the first; we follow the vector loop, which runs the bulk.
template <typename T>
inline T maximum(T a, T b) {
  if (has_nan(a) || has_nan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}

template <typename T>
inline T minimum(T a, T b) {
  if (has_nan(a) || has_nan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a < b ? a : b;
}

// fmax/fmin ignore a NaN operand (IEEE maxNum / minNum).
template <typename T>
inline T fmax(T a, T b) {
  if (hls::isnan(a)) return b;
  if (hls::isnan(b)) return a;
  return a > b ? a : b;
}

template <typename T>
inline T fmin(T a, T b) {
  if (hls::isnan(a)) return b;
  if (hls::isnan(b)) return a;
  return a < b ? a : b;
}

// clamp to scalar bounds: a NaN input stays NaN (the min/max of the vector loop pass it through).
template <typename T>
inline T clamp(T a, T lo, T hi) {
  const T low = lo > a ? lo : a;
  return hi < low ? hi : low;
}

// --- unary --------------------------------------------------------------------------------------

template <typename T>
inline T abs(T a, std::true_type /* floating point */) { return hls::fabs(a); }
template <typename T>
inline T abs(T a, std::false_type) {
  return a < T(0) ? T(-a) : a;  // integers: the most negative value stays itself, as in ATen
}
template <typename T>
inline T abs(T a) { return abs(a, is_float<T>()); }

// sign: -1, 0 or 1; 0 for NaN and for both zeros. For complex (torch.sgn) z / |z|, 0 for 0, and
// NaN in both parts when either part of the quotient is NaN.
template <typename T>
inline T sign(T a, std::true_type /* complex */) {
  typedef typename T::value_type R;
  const R m = hls::hypot(a.real(), a.imag());
  if (m == R(0)) return T(0);
  const R re = a.real() / m, im = a.imag() / m;
  if (hls::isnan(re) || hls::isnan(im)) return T(std::numeric_limits<R>::quiet_NaN(), std::numeric_limits<R>::quiet_NaN());
  return T(re, im);
}
template <typename T>
inline T sign(T a, std::false_type) { return T((T(0) < a) - (a < T(0))); }
template <typename T>
inline T sign(T a) { return sign(a, is_complex<T>()); }

// Round half to even (std::nearbyint in the default rounding mode), as torch.round.
template <typename T>
inline T round(T a) {
  return hls::nearbyint(a);
}

template <typename T>
inline T frac(T a) {
  return a - hls::trunc(a);
}

template <typename T>
inline T rsqrt(T a) {
  return T(1) / hls::sqrt(a);
}

// sinh/cosh as ATen's vector loop: through exp(|x|), so they overflow to inf where expf does
// (|x| > 88.7228...), short of the true overflow at 89.4.
template <typename T>
inline T sinh(T a) {
  if (hls::fabs(a) > T(88.72283172607421875)) return hls::copysign(std::numeric_limits<T>::infinity(), a);
  return hls::sinh(a);
}

template <typename T>
inline T cosh(T a) {
  if (hls::fabs(a) > T(88.72283172607421875)) return std::numeric_limits<T>::infinity();
  return hls::cosh(a);
}

template <typename T>
inline T sigmoid(T a) {
  return T(1) / (T(1) + hls::exp(-a));
}

template <typename T>
inline T silu(T a) {
  return a / (T(1) + hls::exp(-a));
}

// gelu: `approximate` is ATen's GeluType (0 none, 1 tanh).
template <typename T>
inline T gelu(T a, int32_t approximate) {
  if (approximate == 1) {
    const T beta = T(0.7978845608028654);  // sqrt(2 / pi)
    const T kappa = T(0.044715);
    const T inner = beta * (a + kappa * a * a * a);
    return T(0.5) * a * (T(1) + hls::tanh(inner));
  }
  return a * T(0.5) * (T(1) + hls::erf(a * T(0.7071067811865476)));  // 1 / sqrt(2)
}

// --- activations and their gradients (ATen's cpu/Activation.cpp vector loops) ------------------

// silu'(x) * dy, with sigmoid as 1 / (1 + exp(-x)).
template <typename T>
inline T silu_backward(T dy, T x) {
  const T s = T(1) / (T(1) + hls::exp(-x));
  return dy * s * (T(1) + x * (T(1) - s));
}

// gelu'(x) * dy for ATen's GeluType `approximate` (0 none, 1 tanh).
template <typename T>
inline T gelu_backward(T dy, T x, int32_t approximate) {
  if (approximate == 1) {
    const T beta = T(0.7978845608028654);  // sqrt(2 / pi)
    const T kappa = T(0.044715);
    const T x_sq = x * x;
    const T tanh_inner = hls::tanh(beta * (x + kappa * (x * x * x)));
    const T left = T(0.5) * x;
    const T left_derivative = T(0.5) * (T(1) + tanh_inner);
    const T tanh_derivative = T(1) - tanh_inner * tanh_inner;
    const T inner_derivative = beta * (T(1) + T(3) * kappa * x_sq);
    return dy * (left_derivative + left * tanh_derivative * inner_derivative);
  }
  const T cdf = T(0.5) * (T(1) + hls::erf(x * T(0.7071067811865476)));  // 1 / sqrt(2)
  const T pdf = T(0.3989422804014327) * hls::exp(x * x * T(-0.5));       // 1 / sqrt(2 pi)
  return dy * (cdf + x * pdf);
}

// elu: x > 0 ? x * scale : expm1(x * input_scale) * alpha * scale (the coefficient rounded first).
template <typename T>
inline T elu(T x, T alpha, T scale, T input_scale) {
  const T negcoef = alpha * scale;
  return x > T(0) ? x * scale : hls::expm1(x * input_scale) * negcoef;
}

// elu's gradient from the input (is_result false) or from the result (true).
template <typename T>
inline T elu_backward(T dy, T b, T alpha, T scale, T input_scale, bool is_result) {
  const T negcoef = alpha * scale;
  const T neg = is_result ? dy * input_scale * (b + negcoef) : dy * input_scale * negcoef * hls::exp(b * input_scale);
  return b > T(0) ? dy * scale : neg;
}

// nan_to_num: the host resolves omitted replacements to ATen's defaults (0, the dtype's max and
// lowest) before the launch.
template <typename T>
inline T nan_to_num(T a, T nan, T posinf, T neginf) {
  if (hls::isnan(a)) return nan;
  if (hls::isinf(a)) return a > T(0) ? posinf : neginf;
  return a;
}

// --- ternary ------------------------------------------------------------------------------------

// self + value * t1 * t2 as ATen fuses it: fma(value * t1, t2, self); complex: unfused.
template <typename T>
inline T addcmul(T self, T t1, T t2, T value, std::true_type /* floating point */) {
  return hls::fma(value * t1, t2, self);
}
template <typename T>
inline T addcmul(T self, T t1, T t2, T value, std::false_type) { return self + mul(mul(value, t1), t2); }
template <typename T>
inline T addcmul(T self, T t1, T t2, T value) { return addcmul(self, t1, t2, value, is_float<T>()); }

template <typename T>
inline T addcdiv(T self, T t1, T t2, T value) {
  return self + (value * t1) / t2;
}

// lerp as ATen's vector loop: one fma from whichever end the weight is closer to (complex: a
// product, then a sum; |weight| is hypot).
template <typename T>
inline T lerp(T start, T end, T weight, std::true_type /* complex */) {
  const T diff = end - start;
  const bool small = hls::hypot(weight.real(), weight.imag()) < 0.5f;
  return small ? mul(weight, diff) + start : mul(weight - T(1), diff) + end;
}
template <typename T>
inline T lerp(T start, T end, T weight, std::false_type) {
  const T diff = end - start;
  return hls::fabs(weight) < T(0.5) ? hls::fma(weight, diff, start) : hls::fma(weight - T(1), diff, end);
}
template <typename T>
inline T lerp(T start, T end, T weight) { return lerp(start, end, weight, is_complex<T>()); }

}  // namespace afpga
