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
#include <utility>

#include <hls_half.h>
#include <hls_math.h>
#include <hls_stream.h>
#include <hls_vector.h>

// A helper that must be inlined into its pipelined loop. On the card `#pragma HLS INLINE` does it;
// g++ ignores that pragma and may keep a large helper out of line, which in the emulator costs a
// call and a copy of its arrays per element (var's column fold: twice the time).
#ifdef __SYNTHESIS__
#define AFPGA_INLINE inline
#else
#define AFPGA_INLINE inline __attribute__((always_inline))
#endif

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

// --- float transcendentals, without branches or calls ------------------------------------------
//
// afpga::math::exp/log/tanh and erf_for_gelu of a float: a range reduction, then a polynomial, in
// float with fused multiply-adds; the few steps whose rounding would cost accuracy carry the
// rounding error in a second float (Fast2Sum: s = a + b, err = (a - s) + b is exact when |a| >= |b|).
// exp and log are within 0.61 ulp of the true value, tanh 0.70, sigmoid 0.79 (measured on every 16th
// float against double-precision results; docs/kernels.md), so within the ulp bounds of
// tests/test_kernels_pointwise.py against ATen's own. Every step is an add, multiply, fma, divide,
// compare-and-select or 32-bit integer bit operation: on the card each function is one II=1
// pipeline of float operators; in the emulator g++ vectorizes a lane loop of them 8 floats to an
// AVX2 register, as ATen's CPU loops use vectorized math. sin/cos (below) reduce in double. Other
// types go to hls::.
namespace math {

// A float or double's bits as the unsigned integer of its width, and back: a memcpy, which g++
// and HLS both turn into a plain reinterpretation.
template <typename To, typename From>
inline To bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From), "a reinterpretation keeps the width");
  To out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

// c ? a : b as a blend of the two's bits. Where one side is costly (a polynomial, exp_parts), g++
// turns a ?: into a branch that computes it only when it is taken, and a loop over lanes with a
// branch in it does not vectorize; the blend computes both, as the hardware does anyway (a
// multiplexer, in HLS as with ?:).
inline float select(bool c, float a, float b) {
  const uint32_t m = 0u - uint32_t(c);
  return bits_as<float>((bits_as<uint32_t>(a) & m) | (bits_as<uint32_t>(b) & ~m));
}

// c0 + x (c1 + x (c2 + ...)): Horner's rule with fused steps, expanded at compile time.
template <typename F>
inline F horner(F, F c) { return c; }
template <typename F, typename... C>
inline F horner(F x, F c0, C... rest) {
  return hls::fma(x, horner(x, rest...), c0);
}

// 2^n for -126 <= n <= 127, built in the exponent field.
inline float pow2(int32_t n) { return bits_as<float>(uint32_t(n + 127) << 23); }

// e^x = 2^n (hi + lo) for |x| <= 104: hi is e^(x - n ln2) rounded (within 0.61 ulp), hi + lo within
// 2e-10 relative of it.
// n = round(x / ln2) (adding 1.5 * 2^23 leaves it in the low bits of t); x - n ln2 = r + r_lo with ln2 in
// two parts, r = x - n LN2_HI being exact (x and n LN2_HI are multiples of 2^-25 where n != 0, and
// |r| < 1/2) and |r_lo| < 3e-7; e^r = 1 + r + r^2 Q(r), Q a degree 5 polynomial fitted to
// (e^r - 1 - r) / r^2 on |r| <= ln2 / 2 (error 1.4e-10 relative to e^r), 1 + r summed exactly into
// one + err, and e^(r + r_lo) = e^r (1 + r_lo).
inline void exp_parts(float x, int32_t& n, float& hi, float& lo) {
#pragma HLS INLINE
  const float SHIFTER = 12582912.0f;  // 1.5 * 2^23
  const float t = hls::fma(x, 1.44269502f, SHIFTER);
  const float nf = t - SHIFTER;
  n = int32_t(bits_as<uint32_t>(t) - bits_as<uint32_t>(SHIFTER));
  const float r = hls::fma(-nf, 0.693147182f, x);  // LN2_HI: ln2 rounded to float
  const float r_lo = nf * 1.90465421e-09f;          // n (LN2_HI - ln2)
  const float q = horner(r, 0.5f, 0.16666664f, 0.041666448f, 0.00833388f, 0.0013936597f, 0.00019586027f);
  const float one = 1.0f + r;
  const float rest = ((1.0f - one) + r) + (r * r) * q;  // e^r - one
  const float tail = hls::fma(r_lo, one + rest, rest);
  hi = one + tail;
  lo = (one - hi) + tail;
}

template <typename T>
inline T exp(T a) { return hls::exp(a); }
inline float exp(float a) {
  // Beyond [-104, 89] e^x rounds to 0 or overflows; 2^n in two factors covers n in [-150, 128], the
  // second multiply rounding a subnormal result once.
  const float x = select(a < -104.0f, -104.0f, select(a > 89.0f, 89.0f, a));
  int32_t n;
  float hi, lo;
  exp_parts(x, n, hi, lo);
  const int32_t n1 = n / 2;
  const float r = (hi * pow2(n1)) * pow2(n - n1);
  return select(a != a, a, r);  // NaN
}

template <typename T>
inline T log(T a) { return hls::log(a); }
inline float log(float a) {
  // a = 2^e m with m in [sqrt(1/2), sqrt(2)) from the bits (a subnormal scaled by 2^23 first);
  // f = m - 1 is exact. log a = e ln2 + f - f^2 / 2 + f^3 P(f), P a degree 8 polynomial fitted on
  // [sqrt(1/2) - 1, sqrt(2) - 1] (error 9e-10 relative to log1p f). The three leading terms are summed
  // exactly into a head and a tail: e LN2_HI (ln2's leading 16 bits: exact) + (f - h), h = f^2 / 2 from
  // its exact product f * f = h2 + l2 (fma).
  const bool subnormal = a < 1.17549435e-38f;
  const float s = select(subnormal, a * 8388608.0f, a);  // 2^23
  const uint32_t shifted = bits_as<uint32_t>(s) - 0x3f3504f3u;  // 0x3f3504f3: sqrt(1/2)
  const int32_t e_int = int32_t(shifted) >> 23;       // floor(log2(s / sqrt(1/2))) (arithmetic shift)
  const float m = bits_as<float>((shifted & 0x007fffffu) + 0x3f3504f3u);
  const float e = float(e_int - 23 * int32_t(subnormal));
  const float f = m - 1.0f;
  const float h2 = f * f;
  const float l2 = hls::fma(f, f, -h2);
  const float h = 0.5f * h2;
  const float d = f - h;  // |f| >= h
  const float d_err = (f - d) - h;
  const float e_hi = e * 0.693145752f;  // LN2_HI = 0.693145751953125
  const float head = e_hi + d;          // |e_hi| >= 0.69 > |d| unless e = 0
  const float head_err = (e_hi - head) + d;
  const float p = horner(f, 0.3333331f, -0.25000015f, 0.2000224f, -0.16667752f, 0.14217126f, -0.124086805f,
                         0.11908427f, -0.11665019f, 0.06689574f);
  const float tail = hls::fma(e, 1.42860677e-06f, hls::fma(h2 * f, p, -0.5f * l2)) + (head_err + d_err);
  const float r = head + tail;  // ln2 - LN2_HI = 1.42860677e-06
  const float inf = std::numeric_limits<float>::infinity();
  const float special = select(a == 0.0f, -inf, select(a < 0.0f, std::numeric_limits<float>::quiet_NaN(), a));  // inf, NaN
  return select((a > 0.0f) & (a < inf), r, special);  // &: no short circuit (a branch)
}

template <typename T>
inline T tanh(T a) { return hls::tanh(a); }
inline float tanh(float a) {
  const float ax = hls::fabs(a);
  // |x| < 0.55: x + x^3 P(x^2), P a degree 4 polynomial fitted there (error 1.2e-9 relative to tanh).
  const float x2 = a * a;
  const float small = hls::fma(ax * x2, horner(x2, -0.33333316f, 0.13332547f, -0.053848095f, 0.021053761f,
                                                  -0.0062481156f), ax);
  // Beyond: 1 - y, y = 2 / (E + 1), E = e^2|x| = Eh + El exactly scaled from exp_parts; the quotient's
  // remainder (exact through an fma) and El correct y0 = 2 / (Eh + 1) to y0 + c, and 1 - y0 is summed
  // exactly. |x| > 10 (tanh rounds to 1 from 9.01) computes at 10.
  int32_t n;
  float hi, lo;
  exp_parts(2.0f * select(ax > 10.0f, 10.0f, ax), n, hi, lo);
  const float scale = pow2(n);
  const float eh = hi * scale;
  const float d = eh + 1.0f;                              // eh >= 1
  const float d_lo = ((eh - d) + 1.0f) + lo * scale;
  const float y0 = 2.0f / d;
  const float c = (hls::fma(-y0, d, 2.0f) - y0 * d_lo) * (0.5f * y0);  // (2 - y0 (d + d_lo)) / d
  const float one_minus = 1.0f - y0;                                     // y0 <= 1
  const float large = one_minus + (((1.0f - one_minus) - y0) - c);
  const float r = hls::copysign(select(ax < 0.55f, small, large), a);
  return select(a != a, a, r);
}

// erf to within 1e-7 absolute: below 1, x P(x^2) with P a degree 5 polynomial fitted there (6e-8
// relative); beyond, 1 - e^-x^2 erfcx(x), with erfcx (= e^x^2 erfc x, smooth) a degree 11 polynomial
// in x / 2 - 1 fitted to it on [0, 4] (weighted by e^-x^2: 5e-8 absolute); beyond 4, erfc < 2e-8.
// Absolute, not relative, accuracy: gelu's 1 + erf(x) needs no more; torch.erf itself stays hls::erf.
template <typename T>
inline T erf_for_gelu(T a) { return hls::erf(a); }
inline float erf_for_gelu(float a) {
  const float ax = hls::fabs(a);
  const float small = ax * horner(ax * ax, 1.1283791f, -0.37612298f, 0.11280024f, -0.02670748f, 0.004913272f,
                                  -0.0005613787f);
  const float c = select(ax > 4.0f, 4.0f, ax);
  const float p = horner(hls::fma(c, 0.5f, -1.0f), 0.25539643f, -0.21356264f, 0.16732398f, -0.124556765f,
                         0.08157317f, -0.06326923f, 0.06578293f, 0.045863908f, 0.039645612f, -0.09997796f,
                         -0.11908345f, -0.053858604f);
  int32_t n;
  float hi, lo;
  exp_parts(-(c * c), n, hi, lo);  // n >= -24
  const float large = hls::fma(-hi * pow2(n), p, 1.0f);
  return hls::copysign(select(ax < 1.0f, small, large), a);
}

// num / (1 + e^x), to within 0.8 ulp (sigmoid: num = 1, x = -a; silu: num = a): E = e^x = Eh + El
// from exp_parts (2^n in two factors, as exp); 1 + E summed exactly into d + d_lo, and num / d corrected
// by the remainder (exact through an fma) and d_lo. ATen computes num / (1 + exp(x)) in float, which
// rounds E, 1 + E and the quotient (about 2.4 ulp from the true value, docs/kernels.md); as there,
// E = inf (x > 88.72) gives num / inf, num = +-inf gives +-inf / (1 + E) and num = -0 gives -0.
inline float over_one_plus_exp(float num, float x) {
  const float c = select(x < -104.0f, -104.0f, select(x > 89.0f, 89.0f, x));
  int32_t n;
  float hi, lo;
  exp_parts(c, n, hi, lo);
  const int32_t n1 = n / 2;
  const float scale1 = pow2(n1), scale2 = pow2(n - n1);
  const float eh = (hi * scale1) * scale2;
  const float d = 1.0f + eh;
  const float big = select(eh > 1.0f, eh, 1.0f), small = select(eh > 1.0f, 1.0f, eh);  // Fast2Sum's order
  const float d_lo = ((big - d) + small) + (lo * scale1) * scale2;
  const float y0 = 1.0f / d;
  const float r0 = num * y0;
  const float r = r0 + (hls::fma(-r0, d, num) - r0 * d_lo) * y0;  // (num - r0 (d + d_lo)) / d
  // r0 = +-0, +-inf or NaN, or E = inf: r0 itself (the correction would lose -0's sign or be NaN).
  const float inf = std::numeric_limits<float>::infinity();
  return select((eh < inf) & (r0 != 0.0f) & (hls::fabs(r0) < inf), r, r0);  // &: no branch
}

// --- sin/cos: Payne-Hanek's reduction in double --------------------------------------------------

// Adding 1.5 * 2^52 to a double of magnitude < 2^51 rounds it to an integer held in the low bits of
// the sum (no float-to-integer conversion, which the vector units of g++'s target lack for 64 bits).
const double SHIFTER = 6755399441055744.0;

// sin/cos of a float, for every float: x = (q + f) pi/2 with q an integer and |f| <= 1/2, then the
// Taylor series of sin or cos (as q is even or odd) at f pi/2, to x^13 / x^12 (relative remainder
// < 1e-11), in double. The reduction is Payne-Hanek's made branch-free: with 2^e <= |x| < 2^(e+1)
// and k = max(0, e - 24), x = x' 2^k where x' is an even integer when k > 0, so x 2/pi = x' (2^k 2/pi)
// and only 2^k 2/pi mod 2 matters: bits k to k + 95 of 2/pi (a window of the constant below, one
// ROM row per k), as four 24-bit pieces. x' (24 significant bits) times each piece is exact in
// double, and the pieces are summed from the top, taking out the integer part twice, so f keeps ~50
// significant bits however close x is to a multiple of pi/2 (checked against glibc's double sin on
// every float: bench/ulp_pointwise.py and the tests bound it). A ROM read, then selects, shifts,
// adds and multiplies: on the card one pipeline (the ROM, 105 x 128 bits, is about 210 LUTs per
// lane, where shifting the window per lane took four 64-bit barrel shifters); in the emulator g++
// vectorizes all but the ROM read, which sin_cos_lanes skips where it can.

// The bits of 2/pi from its 2^0 bit (0) down, 64 to a word, the most significant first.
constexpr uint64_t TWO_OVER_PI[4] = {0x517cc1b727220a94ULL, 0xfe13abe8fa9a6ee0ULL, 0x6db14acc9e21c820ULL,
                                 0xff28b1d5ef5de2b0ULL};

// The window of 2/pi from bit k, 128 bits (hi, lo), for each k = 0 .. 104 (a float's largest k),
// computed at compile time; `>> 1 >>` keeps a shift by 64 defined.
const int SIN_WINDOWS = 105;
struct SinWindows {
  uint64_t hi[SIN_WINDOWS], lo[SIN_WINDOWS];
};
constexpr SinWindows sin_windows() {
  SinWindows t{};
  for (int k = 0; k < SIN_WINDOWS; ++k) {
    const int s = k & 63, w = k >> 6;  // k < 128: from words 0-3
    t.hi[k] = (TWO_OVER_PI[w] << s) | ((TWO_OVER_PI[w + 1] >> 1) >> (63 - s));
    t.lo[k] = (TWO_OVER_PI[w + 1] << s) | ((TWO_OVER_PI[w + 2] >> 1) >> (63 - s));
  }
  return t;
}
constexpr SinWindows SIN_WINDOW = sin_windows();

// v 2^(S - 52) for an integer 0 <= v < 2^52, exactly: v as the significand bits of 2^S, less 2^S.
template <int S>
inline double scaled_int(uint64_t v) {
  const uint64_t one = uint64_t(1023 + S) << 52;  // 2^S
  return bits_as<double>(v | one) - bits_as<double>(one);
}

// The window row of a float: k = max(0, e - 24) for 2^e <= |x| < 2^(e+1); 0 for every |x| < 2^25.
inline uint64_t sin_window_row(float a) {
  const uint64_t biased = (bits_as<uint64_t>(double(a)) >> 52) & 0x7ff;  // e + 1023 (a subnormal float is a normal double)
  return biased > 1023 + 24 ? biased - (1023 + 24) : 0;                   // 0 .. 104
}

// sin(x) for quadrant_offset 0, cos(x) for 1 (cos x = sin(x + pi/2)); finite x, k its window row,
// (hi, lo) that row of the window ROM (read by the caller, from its own copy of the ROM).
inline double sin_cos_core(float a, uint64_t k, uint64_t hi, uint64_t lo, uint64_t quadrant_offset) {
#pragma HLS INLINE
  const double x = double(a) * bits_as<double>((1023 - k) << 52);           // x 2^-k, exact
  const double c1 = scaled_int<29>(hi >> 40);                             // 2^-23 units
  const double c2 = scaled_int<5>((hi >> 16) & 0xffffff);                 // 2^-47
  const double c3 = scaled_int<-19>(((hi << 8) | (lo >> 56)) & 0xffffff);  // 2^-71
  const double c4 = scaled_int<-43>((lo >> 32) & 0xffffff);               // 2^-95
  const double p1 = x * c1, p2 = x * c2, p3 = x * c3, p4 = x * c4;  // exact: 24 x 24 bits
  const double t1 = p1 + SHIFTER;                 // round(p1) in the low bits
  const double b = (p1 - (t1 - SHIFTER)) + p2;    // |p1 - round(p1)| <= 1/2
  const double t2 = b + SHIFTER;                  // round(b)
  const double f = ((b - (t2 - SHIFTER)) + p3) + p4;
  const uint64_t q = bits_as<uint64_t>(t1) + bits_as<uint64_t>(t2) + quadrant_offset;  // its low two bits: q mod 4
  const double th = f * 1.5707963267948966;  // |th| <= pi/4 (and a hair)
  const double t = th * th;
  // sin th = th + th t S(t), cos th = 1 + t C(t), Taylor's to th^13 / th^12: both, and the one this
  // lane needs selected (a select per coefficient instead would cost more than the second chain).
  const double s = hls::fma(th * t, horner(t, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                                           1.0 / 6227020800), th);
  const double c = hls::fma(t, horner(t, -1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800,
                                      1.0 / 479001600), 1.0);
  const double r = (q & 1) ? c : s;
  return bits_as<double>(bits_as<uint64_t>(r) ^ ((q & 2) << 62));  // negated in quadrants 2 and 3
}

// sin (quadrant 0) or cos (1) of a float, k its window row and (hi, lo) the row's words: NaN for
// inf and NaN; sin keeps -0.
inline float sin_cos_row(float a, uint64_t k, uint64_t hi, uint64_t lo, uint64_t quadrant) {
#pragma HLS INLINE
  const float r = float(sin_cos_core(a, k, hi, lo, quadrant));
  return quadrant == 0 && a == 0.0f ? a
         : hls::fabs(a) < std::numeric_limits<float>::infinity() ? r
                                                                 : a - a;
}

// The same, the row read from the one shared ROM: an element a cycle reads its two words, which
// a ROM's two ports serve (the scalar levels; and the emulator's row-0 words, where k = 0 folds).
inline float sin_cos(float a, uint64_t k, uint64_t quadrant) {
#pragma HLS INLINE
  return sin_cos_row(a, k, SIN_WINDOW.hi[k], SIN_WINDOW.lo[k], quadrant);
}

template <typename T>
inline T sin(T a) { return hls::sin(a); }
inline float sin(float a) { return sin_cos(a, sin_window_row(a), 0); }

template <typename T>
inline T cos(T a) { return hls::cos(a); }
inline float cos(float a) { return sin_cos(a, sin_window_row(a), 1); }

// sin or cos of every lane of an XCL_OPT 4 word (T float or half, computed in float), as op() on
// each lane gives them: unary/ops.yaml's `word` for sin and cos. On the card every lane reads its
// row of the window ROM: L lanes a cycle, two words each, where one ROM has two read ports (the
// loop would run at II=L). So each lane has its own copy of the ROM (`hi`, `lo`: L copies, the
// copy dim partitioned): two reads a cycle per copy, one of each array, and II=1 (L x 105 x 128
// bits of LUTROM, about 210 LUTs a lane). In C simulation those reads are per-lane table loads that
// g++ cannot vectorize, about a third of sin's time; yet a word with no lane at or above 2^25 (bits
// 0x4c000000, where row 1 starts) reads row 0 in every lane, so such a word runs a copy of the lane
// loop with the row a constant. The values are the same (tests/test_kernels_pointwise.py checks
// words of both kinds); HLS sees only the ROM loop. The copies are the shared ROM's rows, laid out
// at compile time (I runs over L x SIN_WINDOWS: copy I / SIN_WINDOWS, row I % SIN_WINDOWS).
template <typename T, std::size_t L, std::size_t... I>
inline void sin_cos_lanes(const hls::vector<T, L>& a, hls::vector<T, L>& r, uint64_t quadrant,
                          std::index_sequence<I...>) {
#pragma HLS INLINE
  static const uint64_t hi[L][SIN_WINDOWS] = {SIN_WINDOW.hi[I % SIN_WINDOWS]...};
  static const uint64_t lo[L][SIN_WINDOWS] = {SIN_WINDOW.lo[I % SIN_WINDOWS]...};
  // A copy per lane: lane l reads only hi[l] and lo[l], one word of each a cycle.
#pragma HLS ARRAY_PARTITION variable=hi complete dim=1
#pragma HLS ARRAY_PARTITION variable=lo complete dim=1
#ifndef __SYNTHESIS__
  uint32_t top = 0;  // the largest |lane|, as bits (NaN and inf are above every finite float)
top_lane:
  for (std::size_t l = 0; l < L; ++l) {
    const uint32_t m = bits_as<uint32_t>(float(a[l])) & 0x7fffffffu;
    top = m > top ? m : top;
  }
  if (top < 0x4c000000u) {
  row0_lanes:
    for (std::size_t l = 0; l < L; ++l) r[l] = T(sin_cos(float(a[l]), 0, quadrant));
    return;
  }
#endif
rom_lanes:
  for (std::size_t l = 0; l < L; ++l) {
#pragma HLS UNROLL
    const uint64_t k = sin_window_row(float(a[l]));
#ifdef __SYNTHESIS__
    r[l] = T(sin_cos_row(float(a[l]), k, hi[l][k], lo[l][k], quadrant));
#else
    // C simulation reads the rows that the copies hold (the same words) from the one shared ROM:
    // loads from L copies at L addresses cost g++'s lane loop 3x on words with large lanes.
    r[l] = T(sin_cos_row(float(a[l]), k, SIN_WINDOW.hi[k], SIN_WINDOW.lo[k], quadrant));
#endif
  }
}
template <typename T, std::size_t L>
inline void sin_lanes(const hls::vector<T, L>& a, hls::vector<T, L>& r) {
  sin_cos_lanes(a, r, 0, std::make_index_sequence<L * SIN_WINDOWS>());
}
template <typename T, std::size_t L>
inline void cos_lanes(const hls::vector<T, L>& a, hls::vector<T, L>& r) {
  sin_cos_lanes(a, r, 1, std::make_index_sequence<L * SIN_WINDOWS>());
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
inline float sigmoid(float a) { return math::over_one_plus_exp(1.0f, -a); }

template <typename T>
inline T silu(T a) {
  return a / (T(1) + math::exp(-a));
}
inline float silu(float a) { return math::over_one_plus_exp(a, -a); }

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

// silu'(x) * dy, with sigmoid (1 / (1 + exp(-x))) as above.
template <typename T>
inline T silu_backward(T dy, T x) {
  const T s = sigmoid(x);
  return dy * s * (T(1) + x * (T(1) - s));
}

// gelu'(x) * dy, GeluType none and tanh (two kernels, as gelu).
template <typename T>
inline T gelu_backward(T dy, T x) {
  const T cdf = T(0.5) * (T(1) + math::erf_for_gelu(x * T(0.7071067811865476)));  // 1 / sqrt(2)
  const T pdf = T(0.3989422804014327) * math::exp(x * x * T(-0.5));                // 1 / sqrt(2 pi)
  return dy * (cdf + x * pdf);
}

template <typename T>
inline T gelu_backward_tanh(T dy, T x) {
  const T beta = T(0.7978845608028654);  // sqrt(2 / pi)
  const T kappa = T(0.044715);
  const T x_sq = x * x;
  const T tanh_inner = math::tanh(beta * (x + kappa * (x * x * x)));
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

// The hard activations as ATen's vector loops compute them (in opmath): exactly rounded, bit exact.
// hardsigmoid: min(max(x + 3, 0), 6) / 6; hardswish: x times that before the division.
template <typename T>
inline T relu6_of_shift(T x) {
  return minimum(maximum(x + T(3), T(0)), T(6));  // NaN-propagating, as ATen's vec::maximum/minimum
}
template <typename T>
inline T hardsigmoid(T x) { return relu6_of_shift(x) / T(6); }
template <typename T>
inline T hardswish(T x) { return x * relu6_of_shift(x) / T(6); }

// hardsigmoid'(x) * dy: dy / 6 (as dy times float(1/6)) strictly inside (-3, 3), else 0 (NaN: 0).
template <typename T>
inline T hardsigmoid_backward(T dy, T x) {
  return x > T(-3) && x < T(3) ? dy * T(1.0f / 6.0f) : T(0);
}

// hardswish'(x) * dy: 0 up to -3, dy from 3 on, dy * (x / 3 + 1/2) between (and for NaN: NaN).
template <typename T>
inline T hardswish_backward(T dy, T x) {
  const T mid = dy * (x / T(3) + T(0.5));
  return x <= T(-3) ? T(0) : x >= T(3) ? dy : mid;
}

// softplus: x where x * beta > threshold, else log1p(exp(x * beta)) / beta; and its gradient
// dy * z / (z + 1), z = exp(x * beta).
template <typename T>
inline T softplus(T x, T beta, T threshold) {
  const T xb = x * beta;
  return xb > threshold ? x : hls::log1p(math::exp(xb)) / beta;
}
template <typename T>
inline T softplus_backward(T dy, T x, T beta, T threshold) {
  const T xb = x * beta;
  const T z = math::exp(xb);
  return xb > threshold ? dy : dy * z / (z + T(1));
}

// mish: x * tanh(softplus(x)); its gradient dy * (t + x * sigmoid(x) * (1 - t * t)), t = tanh(softplus(x)).
template <typename T>
inline T tanh_softplus(T x) { return math::tanh(hls::log1p(math::exp(x))); }
template <typename T>
inline T mish(T x) { return x * tanh_softplus(x); }
template <typename T>
inline T mish_backward(T dy, T x) {
  const T s = T(1) / (T(1) + math::exp(-x));
  const T t = tanh_softplus(x);
  return dy * (t + x * s * (T(1) - t * t));
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
