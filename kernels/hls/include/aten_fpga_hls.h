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
#include <cstring>
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

// --- dataflow regions --------------------------------------------------------------------------

// How many items (elements or port words of type E) one DATAFLOW region streams. On the card: the
// whole range, so the region's stages fill and drain once per call, not once per tile. In C
// simulation (g++, the emulated device) a region's stages run one after the other and each
// hls::stream buffers all its producer wrote, so the same loop enters the region once per 16 KiB of
// items, which keeps those buffers in the cache.
template <typename E>
constexpr uint64_t dataflow_span() {
#ifdef __SYNTHESIS__
  return ~uint64_t(0);
#else
  return (16384 + sizeof(E) - 1) / sizeof(E);
#endif
}

// --- float transcendentals in double, without branches or calls -----------------------------------
//
// afpga::math::exp/log/tanh of a float: a range reduction, then a polynomial, both in
// double, rounded once to float. The double result is within ~1e-12 of the true value, so the float
// is the correctly rounded one except for values within that distance of a rounding tie: within
// 1 ulp, as the tests' ULP bounds require (tests/test_kernels_pointwise.py). Every step is an add,
// multiply, divide, compare-and-select or integer bit operation, so on the card each function is
// one pipeline at II=1 (in double: a few dozen DSPs per lane), and g++ vectorizes a lane loop of them
// for the emulated device, as ATen's CPU loops use vectorized math. Other types go to hls::.
namespace math {

inline double from_bits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}
inline uint64_t to_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

// Adding 1.5 * 2^52 to a double of magnitude < 2^51 rounds it to an integer held in the low bits of
// the sum (no float-to-integer conversion, which the vector units of g++'s target lack for 64 bits).
const double SHIFTER = 6755399441055744.0;

// e^x for x in [-300, 300]: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to r^10
// (relative remainder < 2e-13), times 2^n built in the exponent field.
inline double exp_core(double x) {
#pragma HLS INLINE
  const double t = x * 1.4426950408889634 + SHIFTER;  // n = round(x / ln2), in t's low bits
  const double n = t - SHIFTER;
  const double r = (x - n * 0.6931471803691238) - n * 1.9082149292705877e-10;  // ln2 in two parts: n * hi is exact
  double p = 2.755731922398589e-07;  // 1 / 10!
  p = p * r + 2.7557319223985893e-06;
  p = p * r + 2.48015873015873e-05;
  p = p * r + 0.0001984126984126984;
  p = p * r + 0.001388888888888889;
  p = p * r + 0.008333333333333333;
  p = p * r + 0.041666666666666664;
  p = p * r + 0.16666666666666666;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const uint64_t n_bits = to_bits(t) - to_bits(SHIFTER);  // n as a two's complement integer
  return p * from_bits((n_bits + 1023) << 52);             // 2^n
}

template <typename T>
inline T exp(T a) { return hls::exp(a); }
inline float exp(float a) {
  const double x = a;
  const double c = x < -200.0 ? -200.0 : x > 100.0 ? 100.0 : x;  // beyond: 0 or inf once rounded
  const float r = float(exp_core(c));
  return a != a ? a : r;  // NaN
}

template <typename T>
inline T log(T a) { return hls::log(a); }
inline float log(float a) {
  // a = 2^e m with m in [sqrt(1/2), sqrt(2)); as a double even a subnormal float is normal.
  const uint64_t b = to_bits(double(a));
  const double m1 = from_bits((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);  // [1, 2)
  const bool high = m1 > 1.4142135623730951;
  const double m = high ? m1 * 0.5 : m1;
  const uint64_t e_biased = (b >> 52) + (high ? 1 : 0);                  // e + 1023
  const double e = from_bits(to_bits(SHIFTER) + e_biased - 1023) - SHIFTER;  // as a double
  // log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: the odd series to s^19 (< 1e-17).
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 19;
  p = p * s2 + 1.0 / 17;
  p = p * s2 + 1.0 / 15;
  p = p * s2 + 1.0 / 13;
  p = p * s2 + 1.0 / 11;
  p = p * s2 + 1.0 / 9;
  p = p * s2 + 1.0 / 7;
  p = p * s2 + 1.0 / 5;
  p = p * s2 + 1.0 / 3;
  p = p * s2 + 1.0;
  const float r = float(e * 0.6931471805599453 + 2.0 * s * p);
  const float inf = std::numeric_limits<float>::infinity();
  return a > 0.0f && a < inf ? r
         : a == 0.0f         ? -inf
         : a < 0.0f          ? std::numeric_limits<float>::quiet_NaN()
                             : a;  // inf, NaN
}

template <typename T>
inline T tanh(T a) { return hls::tanh(a); }
inline float tanh(float a) {
  const double x = a;
  const double ax = hls::fabs(x);
  // |x| < 1/16: the series to x^9 (relative remainder < 1e-12); beyond: 1 - 2 / (e^2|x| + 1),
  // whose absolute error ~1e-16 is relative error < 2e-15 there. |x| > 20 gives 1.
  const double x2 = x * x;
  double p = 62.0 / 2835;
  p = p * x2 - 17.0 / 315;
  p = p * x2 + 2.0 / 15;
  p = p * x2 - 1.0 / 3;
  const double small = ax + ax * x2 * p;
  const double e = exp_core(2.0 * (ax > 20.0 ? 20.0 : ax));
  const double large = 1.0 - 2.0 / (e + 1.0);
  const float r = float(hls::copysign(ax < 0.0625 ? small : large, x));
  return a != a ? a : r;
}

// erf to within 1e-11 absolute: 1 - e^-x^2 erfcx(x), with erfcx (= e^x^2 erfc x, smooth) a degree 20
// polynomial in (x - 2) / 2 fitted to it on [0, 4]; beyond 4, erfc < 2e-8. Absolute, not relative,
// accuracy: gelu's 1 + erf(x) needs no more; torch.erf itself stays hls::erf.
inline double erf_absolute(double x) {
  const double ax = hls::fabs(x);
  const double c = ax > 4.0 ? 4.0 : ax;
  const double u = c * 0.5 - 1.0;
  double p = 1.4601499400996146e-05;
  p = p * u - 3.143417202235886e-05;
  p = p * u - 6.548791896922264e-06;
  p = p * u + 1.1431208869332948e-05;
  p = p * u + 0.0001365440306257149;
  p = p * u - 0.000271444510438923;
  p = p * u + 0.00034579002512617583;
  p = p * u - 0.0006790259842992516;
  p = p * u + 0.0014328501218654078;
  p = p * u - 0.002652975219107545;
  p = p * u + 0.004732078549308521;
  p = p * u - 0.008332184743016117;
  p = p * u + 0.01426801687608635;
  p = p * u - 0.023653542032807486;
  p = p * u + 0.037917880574267926;
  p = p * u - 0.058613060845187026;
  p = p * u + 0.08705182952684135;
  p = p * u - 0.12368511130239068;
  p = p * u + 0.1672110100875382;
  p = p * u - 0.21359292358038182;
  p = p * u + 0.25539567631186677;
  return hls::copysign(1.0 - exp_core(-c * c) * p, x);
}

template <typename T>
inline T erf_for_gelu(T a) { return hls::erf(a); }
inline float erf_for_gelu(float a) { return float(erf_absolute(a)); }

// sin/cos of a float, for every float: x = (q + f) pi/2 with q an integer and |f| <= 1/2, then the
// Taylor series of sin or cos (as q is even or odd) at f pi/2, to x^11 / x^12 (relative remainder
// < 1e-11), in double. The reduction is Payne-Hanek's made branch-free and table-free: with
// 2^e <= |x| < 2^(e+1) and k = max(0, e - 24), x = x' 2^k where x' is an even integer when k > 0, so
// x 2/pi = x' (2^k 2/pi) and only 2^k 2/pi mod 2 matters: bits k to k + 95 of 2/pi (a window of the
// constant below, selected and shifted per lane), as four 24-bit pieces. x' (24 significant bits)
// times each piece is exact in double, and the pieces are summed from the top, taking out the
// integer part twice, so f keeps ~50 significant bits however close x is to a multiple of pi/2
// (checked against glibc's double sin on every float: bench/ulp_pointwise.py and the tests bound
// it). Selects, shifts, adds and multiplies only: g++ vectorizes it; on the card it is one pipeline.

// The bits of 2/pi from its 2^0 bit (0) down, 64 to a word, the most significant first.
const uint64_t TWO_OVER_PI[4] = {0x517cc1b727220a94ULL, 0xfe13abe8fa9a6ee0ULL, 0x6db14acc9e21c820ULL,
                                 0xff28b1d5ef5de2b0ULL};

// An integer below 2^52 as a double, through its bits (see SHIFTER).
inline double small_int(uint64_t v) { return from_bits(v | 0x4330000000000000ULL) - 4503599627370496.0; }

// sin(x) for quadrant_offset 0, cos(x) for 1 (cos x = sin(x + pi/2)); finite x.
inline double sin_cos_core(float a, uint64_t quadrant_offset) {
#pragma HLS INLINE
  const double xa = a;
  const uint64_t biased = (to_bits(xa) >> 52) & 0x7ff;  // e + 1023 (a subnormal float is a normal double)
  const uint64_t k = biased > 1023 + 24 ? biased - (1023 + 24) : 0;  // 0 .. 104
  const double x = xa * from_bits((1023 - k) << 52);                  // x 2^-k, exact
  // 128 bits of 2/pi from bit k: hi, lo (k < 128, so from words 0-3); `>> 1 >>` keeps a shift of 64 defined.
  const uint64_t s = k & 63;
  const bool second = k >= 64;
  const uint64_t w0 = second ? TWO_OVER_PI[1] : TWO_OVER_PI[0];
  const uint64_t w1 = second ? TWO_OVER_PI[2] : TWO_OVER_PI[1];
  const uint64_t w2 = second ? TWO_OVER_PI[3] : TWO_OVER_PI[2];
  const uint64_t hi = (w0 << s) | ((w1 >> 1) >> (63 - s));
  const uint64_t lo = (w1 << s) | ((w2 >> 1) >> (63 - s));
  const double c1 = small_int(hi >> 40) * 1.1920928955078125e-07;                             // 2^-23
  const double c2 = small_int((hi >> 16) & 0xffffff) * 7.105427357601002e-15;                 // 2^-47
  const double c3 = small_int(((hi << 8) | (lo >> 56)) & 0xffffff) * 4.235164736271502e-22;  // 2^-71
  const double c4 = small_int((lo >> 32) & 0xffffff) * 2.524354896707238e-29;                 // 2^-95
  const double p1 = x * c1, p2 = x * c2, p3 = x * c3, p4 = x * c4;  // exact: 24 x 24 bits
  const double t1 = p1 + SHIFTER;                 // round(p1) in the low bits
  const double b = (p1 - (t1 - SHIFTER)) + p2;    // |p1 - round(p1)| <= 1/2
  const double t2 = b + SHIFTER;                  // round(b)
  const double f = ((b - (t2 - SHIFTER)) + p3) + p4;
  const uint64_t q = to_bits(t1) + to_bits(t2) + quadrant_offset;  // its low two bits: q mod 4
  const double th = f * 1.5707963267948966;  // |th| <= pi/4 (and a hair)
  const double t = th * th;
  double sp = 1.0 / 39916800;  // 1 / 11!
  sp = sp * t - 1.0 / 362880;
  sp = sp * t + 1.0 / 5040;
  sp = sp * t - 1.0 / 120;
  sp = sp * t + 1.0 / 6;
  const double sin_th = th - th * t * sp;
  double cp = 1.0 / 479001600;  // 1 / 12!
  cp = cp * t - 1.0 / 3628800;
  cp = cp * t + 1.0 / 40320;
  cp = cp * t - 1.0 / 720;
  cp = cp * t + 1.0 / 24;
  cp = cp * t - 0.5;
  const double cos_th = 1.0 + t * cp;
  const double r = (q & 1) ? cos_th : sin_th;
  return (q & 2) ? -r : r;
}

template <typename T>
inline T sin(T a) { return hls::sin(a); }
inline float sin(float a) {
  const float r = float(sin_cos_core(a, 0));
  return a == 0.0f ? a  // keeps the sign of -0
         : hls::fabs(a) < std::numeric_limits<float>::infinity() ? r
                                                                 : a - a;  // inf, NaN: NaN
}

template <typename T>
inline T cos(T a) { return hls::cos(a); }
inline float cos(float a) {
  const float r = float(sin_cos_core(a, 1));
  return hls::fabs(a) < std::numeric_limits<float>::infinity() ? r : a - a;
}

}  // namespace math

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
  return T(1) / (T(1) + math::exp(-a));
}

template <typename T>
inline T silu(T a) {
  return a / (T(1) + math::exp(-a));
}

// gelu with ATen's GeluType none (the exact one, through erf) and tanh (its approximation): two
// kernels, so that neither builds the other's math.
template <typename T>
inline T gelu(T a) {
  return a * T(0.5) * (T(1) + math::erf_for_gelu(a * T(0.7071067811865476)));  // 1 / sqrt(2)
}

template <typename T>
inline T gelu_tanh(T a) {
  const T beta = T(0.7978845608028654);  // sqrt(2 / pi)
  const T kappa = T(0.044715);
  const T inner = beta * (a + kappa * a * a * a);
  return T(0.5) * a * (T(1) + math::tanh(inner));
}

// --- activations and their gradients (ATen's cpu/Activation.cpp vector loops) ------------------

// silu'(x) * dy, with sigmoid as 1 / (1 + exp(-x)).
template <typename T>
inline T silu_backward(T dy, T x) {
  const T s = T(1) / (T(1) + hls::exp(-x));
  return dy * s * (T(1) + x * (T(1) - s));
}

// gelu'(x) * dy, GeluType none and tanh (two kernels, as gelu).
template <typename T>
inline T gelu_backward(T dy, T x) {
  const T cdf = T(0.5) * (T(1) + hls::erf(x * T(0.7071067811865476)));  // 1 / sqrt(2)
  const T pdf = T(0.3989422804014327) * hls::exp(x * x * T(-0.5));       // 1 / sqrt(2 pi)
  return dy * (cdf + x * pdf);
}

template <typename T>
inline T gelu_backward_tanh(T dy, T x) {
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
