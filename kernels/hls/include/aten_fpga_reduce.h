// The reductions of kernels/hls/reduce: one functor per op, shared by every XCL_OPT level.
//
// A kernel reduces each row of a contiguous [outer, inner] input to one output element. It folds
// the row's elements into independent partial accumulators with `add`, combines the partials
// pairwise with `merge`, and turns the row's accumulator into the output with `finish`:
//
//   Acc identity()                        the accumulator of no elements
//   Acc add(Acc a, T x, T k, uint64_t i)  a with element x (at index i of its row) folded in; k is the
//                                         first element of the run of the row being folded (var's shift)
//   Acc merge(Acc a, Acc b)               two accumulators of disjoint parts of a row; associative and
//                                         commutative, so the pairwise order is free
//   R finish(Acc a, uint64_t n)           the output of a row of n elements
//
// An op may fold a row's elements in a narrower `Lane` type than its Acc (sum of float32: float
// lanes, a double Acc): the XCL_OPT 4 rows fold's FoldPartials x LANES accumulators are Lanes
// (LaneOf), its `add` and `merge` take either type, and each run's combined Lane becomes an Acc,
// which the runs, partials, columns and the combine carry. The scalar folds of the other levels
// (16 accumulators, each of every 16th element) fold in Acc: a narrow type buys them nothing.
// An op whose Acc is a value and the index it was found at (argmax) names the index's type `Tag`:
// that fold keeps the Lanes (values) and the Tags in two arrays (TagOf, fold_lane), so each is one
// vector of the lanes for g++; an array of {value, index} structs needs a shuffle per lane.
//
// `add` is the only loop-carried step, so it is kept to an add or a compare-and-select: with
// PARTIALS interleaved accumulators its latency is hidden and the loop runs at II=1: element i joins
// accumulator i % PARTIALS, so each one is updated every PARTIALS cycles, longer than a
// double-precision adder's latency. PARTIALS is codegen/abi.py's REDUCE_PARTIALS, which the
// templates write as the accumulator count and as their DEPENDENCE distance; the XCL_OPT 4 rows
// fold sizes its own to the lane's step (FoldPartials).
#pragma once

#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "aten_fpga_hls.h"

#if __has_include(<hls_half.h>)
#include <hls_half.h>
#else
typedef _Float16 half;  // g++ (emulated device): IEEE binary16, the bits of torch.float16
#endif

namespace afpga {
namespace reduce {


// The accumulation type of each element type: as wide as ATen's CPU accumulation, or wider.
template <typename T> struct Wide { typedef T type; };
template <> struct Wide<float> { typedef double type; };
template <> struct Wide<half> { typedef float type; };
template <> struct Wide<int32_t> { typedef int64_t type; };
template <> struct Wide<std::complex<float> > { typedef std::complex<double> type; };

// The Lane type of the sums of float32 elements (sum, mean, the 1- and 2-norms, and the inf-norms,
// exact in any type): float32, as ATen's CPU sums (a cascade sum in float). Each of the XCL_OPT 4
// fold's LANES x FoldPartials accumulators sums every 128th element of a run; the drain widens them to
// double, so the run's tree and the runs' merges (rows, pieces, the emulator's blocks) are in
// double: within a few ulps of ATen's own float sum (docs/reductions.md has the measured errors).
// Folding in double would hold half the lanes per register and convert every element. Products,
// counts, var/std and the general p-norm fold in Wide: their error grows with every element, not
// only with the rounding of one sum.
template <typename T> struct SumLane : Wide<T> {};
template <> struct SumLane<float> { typedef float type; };

// An op's Lane type: its `Lane`, or its Acc.
template <class...> struct Void { typedef void type; };
template <class Op, class = void> struct LaneOf { typedef typename Op::Acc type; };
template <class Op> struct LaneOf<Op, typename Void<typename Op::Lane>::type> { typedef typename Op::Lane type; };

// An op's Tag type: its `Tag`, or NoTag -- nothing besides the Lane (a placeholder no code reads or
// writes, so neither g++ nor HLS keeps it).
struct NoTag {
  bool unused;
};
template <class Op, class = void> struct TagOf { typedef NoTag type; };
template <class Op> struct TagOf<Op, typename Void<typename Op::Tag>::type> { typedef typename Op::Tag type; };

// The XCL_OPT 4 rows fold's interleaved accumulators per lane: as many as the latency, in cycles,
// of the op's loop-carried step on a lane, so that each accumulator is updated no more often than
// its step completes and the words loop runs at II=1 with no more registers than that needs. A
// float32 lane's step is one fadd or one compare-select, 4-5 cycles in Vitis HLS's cores at 300
// MHz: Narrow (codegen/abi.py REDUCE_LANE_PARTIALS) of them. Every other lane keeps Wide
// (REDUCE_PARTIALS): double adds and products of 6-8 cycles, complex products (a multiply then
// an add), argmax's value-and-index compare. The templates write the DEPENDENCE distance as this
// constant (Vitis HLS takes a const int there).
template <class Op, int Wide, int Narrow>
struct FoldPartials {
  static const int value = std::is_same<typename LaneOf<Op>::type, float>::value &&
                                   std::is_same<typename TagOf<Op>::type, NoTag>::value
                               ? Narrow
                               : Wide;
};

// The passes the XCL_OPT 4 folds make over a run's words of `Lanes` lanes, `Built` of whose steps
// the fold builds (Kernel.compute_lanes on the card; every lane by default): Lanes / Built, a
// lane group a pass -- or, for an op whose step holds a unit too costly to build per lane (it says
// so with `static const int SHARED_UNITS = n`, n > 0), Lanes / n where n is fewer. Each pass is a
// loop at II=1. The values are those of one pass (each lane's accumulators take its elements in
// the same order), and the II=1 that the pipeline pragma states is the II the card reaches with
// the units built.
template <class Op, int Lanes, int Built = Lanes, class = void>
struct Turns {
  static_assert(Built > 0 && Lanes % Built == 0, "the lanes built must divide the lanes");
  static const int value = Lanes / Built;
};
template <class Op, int Lanes, int Built>
struct Turns<Op, Lanes, Built, typename Void<decltype(Op::SHARED_UNITS)>::type> {
  static const int units = Op::SHARED_UNITS > 0 && Op::SHARED_UNITS < Built ? Op::SHARED_UNITS : Built;
  static_assert(units > 0 && Lanes % units == 0, "the shared units must divide the lanes");
  static const int value = Lanes / units;
};

// The real type of a (possibly complex) type.
template <typename T> struct Real { typedef T type; };
template <typename T> struct Real<std::complex<T> > { typedef T type; };

// Re(conj(a) * b): the dot product of two numbers as vectors; |a|^2 when b == a.
template <typename T> inline T re_dot(T a, T b) { return a * b; }
template <typename T> inline T re_dot(std::complex<T> a, std::complex<T> b) {
  return a.real() * b.real() + a.imag() * b.imag();
}

// |x| in the accumulation type W (complex: sqrt(re^2 + im^2), which cannot overflow in double).
template <typename W, typename T> inline W magnitude(T x) { return std::fabs(W(x)); }
template <typename W, typename T> inline W magnitude(std::complex<T> x) {
  return std::sqrt(re_dot(std::complex<W>(x), std::complex<W>(x)));
}

// The smallest and largest values of T (infinities for floating point).
template <typename T> struct Limits {
  static T lowest() { return std::numeric_limits<T>::lowest(); }
  static T highest() { return std::numeric_limits<T>::max(); }
};
template <typename T> struct FloatLimits {
  static T lowest() { return T(-INFINITY); }
  static T highest() { return T(INFINITY); }
};
template <> struct Limits<float> : FloatLimits<float> {};
template <> struct Limits<double> : FloatLimits<double> {};
template <> struct Limits<half> : FloatLimits<half> {};

template <typename T> inline bool is_nan(T x) { return x != x; }

// c ? a : b. For floating point a blend of the two's bits (afpga::math::select, at every width):
// g++ compiles a ?: of floats whose condition tests for NaN to a branch (also with `|` in the
// condition), and a lane loop unrolled into a fold's loop over words then stays scalar -- amax's
// column fold ran so at 1.6x the CPU's time; the blend is straight-line code that g++ vectorizes
// across the lanes. On the card it is the same multiplexer as ?:. Integers keep ?: (a max).
template <int Bytes> struct BitsOf;
template <> struct BitsOf<2> { typedef uint16_t type; };
template <> struct BitsOf<4> { typedef uint32_t type; };
template <> struct BitsOf<8> { typedef uint64_t type; };
template <typename T> inline T blend(bool c, T a, T b) {
  typedef typename BitsOf<sizeof(T)>::type U;
  const U m = U(0) - U(c);
  return math::bits_as<T>(U((math::bits_as<U>(a) & m) | (math::bits_as<U>(b) & U(~m))));
}
template <typename T> inline T pick(bool c, T a, T b) { return c ? a : b; }
inline float pick(bool c, float a, float b) { return blend(c, a, b); }
inline double pick(bool c, double a, double b) { return blend(c, a, b); }
inline half pick(bool c, half a, half b) { return blend(c, a, b); }

// max/min that propagate NaN, as ATen's amax/amin and inf-norms do: a if it is NaN or beats b,
// else b. Written as a NaN test around a plain max, which g++ compiles to maxps (a > b ? a : b is
// that instruction's own definition, no branch): both the rows fold and the column fold then
// vectorize, and the rows fold does a word in two fewer instructions than with one blend of
// `is_nan(a) | (a > b)` (amax along dim 1: 20% over the sum's time -> 5%).
template <typename T> inline T max_nan(T a, T b) { return pick(is_nan(a), a, a > b ? a : b); }
template <typename T> inline T min_nan(T a, T b) { return pick(is_nan(a), a, a < b ? a : b); }

// Pairwise combination of N (a power of two) partial accumulators: a balanced tree of merges, so
// each result is a sum of sums of equal size (the numerically sound order) and the tree is
// log2(N) merges deep. Written as a compile-time recursion, so the tree is fully unrolled by any
// compiler (v++, and g++ for the emulated device).
template <class Op, int Lo, int N>
struct Tree {
  template <class A>
  static A run(const Op& op, const A* p) {
#pragma HLS INLINE
    return op.merge(Tree<Op, Lo, N / 2>::run(op, p), Tree<Op, Lo + N / 2, N / 2>::run(op, p));
  }
};
template <class Op, int Lo>
struct Tree<Op, Lo, 1> {
  template <class A>
  static A run(const Op&, const A* p) {
    return p[Lo];
  }
};

template <class Op, class A, int N>
A combine(const Op& op, const A (&p)[N]) {
#pragma HLS INLINE
  return Tree<Op, 0, N>::run(op, p);
}

// Lane l of a port item: a word's lane at XCL_OPT 4, the element itself at the other levels (one
// lane), so a template writes one loop over ITEM_LANES for both.
template <typename T> inline T lane(const T& x, int) { return x; }
template <typename T, std::size_t N> inline T lane(const hls::vector<T, N>& x, int l) { return x[l]; }

// A partial accumulator as one word of the `part` port (REDUCE_PARTIAL_BYTES, codegen/abi.py): the
// accumulator's bytes first, the rest zero. Every op's Acc is a plain scalar or struct of scalars,
// so the copy is a bit-for-bit move of the fields (wires on the card).
template <class Word, class Acc>
inline Word to_word(const Acc& a) {
  static_assert(sizeof(Acc) <= sizeof(Word), "an accumulator wider than a partial word (REDUCE_PARTIAL_BYTES)");
  Word w(0);
  std::memcpy(&w, &a, sizeof(Acc));
  return w;
}
template <class Acc, class Word>
inline Acc from_word(const Word& w) {
  Acc a;
  std::memcpy(&a, &w, sizeof(Acc));
  return a;
}

// Items one rows reduction's DATAFLOW region streams: all of them on the card; in C simulation
// REGION_BYTES of them, whose stream stays in the L2 cache. Each region ends its runs by draining
// the fold's PARTIALS x LANES accumulators (the card drains once per row); 64 KiB regions make that
// a few percent of the fold, where dataflow_span's 16 KiB cost a quarter (measured with perf).
const uint64_t REGION_BYTES = 65536;
template <typename E>
constexpr uint64_t region_span() {
  return dataflow_span<E>() == ~uint64_t(0) ? ~uint64_t(0) : (REGION_BYTES + sizeof(E) - 1) / sizeof(E);
}

// Rows of `width` items that one column reduction's DATAFLOW region streams, a multiple of
// `multiple`: every row on the card (one fill per column tile), about dataflow_span's 16 KiB of
// items in C simulation, whose streams buffer all their producer wrote. The division runs in the
// emulator only.
template <typename E>
inline uint64_t dataflow_rows(uint64_t width, uint64_t multiple) {
#ifdef __SYNTHESIS__
  (void)width;
  (void)multiple;
  return ~uint64_t(0);
#else
  const uint64_t rows = dataflow_span<E>() / width;
  return (rows > 0 ? rows : 1) * multiple;
#endif
}

// --- The ops ---------------------------------------------------------------------------------

// sum: in the wide type (float32 in double, float16 in float, complex64 in complex<double>, int32 in
// int64), a float32 row's elements folded in float lanes (SumLane).
template <typename T, typename R>
struct Sum {
  typedef typename Wide<T>::type Acc;
  typedef typename SumLane<T>::type Lane;
  Acc identity() const { return Acc(0); }
  template <class A> A add(A a, T x, T, uint64_t) const { return a + A(x); }
  template <class A> A merge(A a, A b) const { return a + b; }
  R finish(Acc a, uint64_t) const { return R(a); }
};

// mean: the sum, divided once at the end (an empty row gives 0/0 = NaN, as ATen's does).
template <typename T, typename R>
struct Mean : Sum<T, R> {
  typedef typename Sum<T, R>::Acc Acc;
  R finish(Acc a, uint64_t n) const { return R(a / Acc(typename Real<Acc>::type(n))); }
};

// prod: complex factors multiply as the binary mul kernel and ATen's vector loop do, (ac - bd) +
// (ad + bc)i (afpga::mul): std::complex's operator* recovers infinities from NaN parts (C99 Annex
// G), so (inf + 0i)(1 + 1i) gave inf - inf i where ATen gives nan + nan i.
template <typename T, typename R>
struct Prod {
  typedef typename Wide<T>::type Acc;
  Acc identity() const { return Acc(1); }
  Acc add(Acc a, T x, T, uint64_t) const { return mul(a, Acc(x)); }
  Acc merge(Acc a, Acc b) const { return mul(a, b); }
  R finish(Acc a, uint64_t) const { return R(a); }
};

// amax / amin: NaN wins (ATen's max_values / min_values).
template <typename T, typename R>
struct Max {
  typedef T Acc;
  Acc identity() const { return Limits<T>::lowest(); }
  Acc add(Acc a, T x, T, uint64_t) const { return max_nan(a, x); }
  Acc merge(Acc a, Acc b) const { return max_nan(a, b); }
  R finish(Acc a, uint64_t) const { return a; }
};

template <typename T, typename R>
struct Min {
  typedef T Acc;
  Acc identity() const { return Limits<T>::highest(); }
  Acc add(Acc a, T x, T, uint64_t) const { return min_nan(a, x); }
  Acc merge(Acc a, Acc b) const { return min_nan(a, b); }
  R finish(Acc a, uint64_t) const { return a; }
};

// argmax / argmin: a value and its index. ATen's order: NaN beats every number (the first NaN
// wins), then the larger (smaller) value, then the smaller index -- a total order, so merging the
// partials in any order gives the first index of the extremum.
template <typename T>
struct Best {
  T value;
  int64_t index;
};

// a (at index ia) beats b (at ib): a NaN beats a number, the better value wins, and of two NaNs or
// equal values the earlier index. One expression of compares joined by & and |, no short circuit:
// g++ turns a chain of ifs or of && into branches, and a lane loop with branches stays scalar; on
// the card it is the same few comparators and gates either way.
template <typename T, bool Largest>
inline bool beats(T a, int64_t ia, T b, int64_t ib) {
  const bool nan_a = is_nan(a), nan_b = is_nan(b);
  const bool better = Largest ? a > b : a < b;  // false when either is NaN
  const bool tie = (a == b) | (nan_a & nan_b);
  return (nan_a & !nan_b) | better | (tie & (ia < ib));
}

template <typename T, typename R, bool Largest>
struct ArgBest {
  typedef Best<T> Acc;
  typedef T Lane;      // the XCL_OPT 4 fold's values,
  typedef int64_t Tag;  // and their indices, in an array of their own (fold_lane)
  Acc identity() const {
    // Loses to every element: the worst value, and an index after any real one.
    Acc a = {Largest ? Limits<T>::lowest() : Limits<T>::highest(), std::numeric_limits<int64_t>::max()};
    return a;
  }
  Acc add(const Acc& a, T x, T, uint64_t i) const { return better_of(a, x, int64_t(i)); }
  Acc merge(const Acc& a, const Acc& b) const { return better_of(a, b.value, b.index); }
  R finish(Acc a, uint64_t) const { return a.index; }
  // (value, index) beats (best, at).
  static bool wins(T value, int64_t index, T best, int64_t at) { return beats<T, Largest>(value, index, best, at); }

 private:
  // a, or (value, index) where that beats it. Each field is selected on its own (a struct-wide ?:
  // is a branch to g++) into a copy of a, taken by reference: g++ vectorizes a lane loop of these
  // only when every byte of the stored struct, its padding too, is copied from the accumulator in
  // place (a by-value copy first breaks it).
  static Acc better_of(const Acc& a, T value, int64_t index) {
    const bool take = beats<T, Largest>(value, index, a.value, a.index);
    Acc r = a;
    r.value = take ? value : a.value;
    r.index = take ? index : a.index;
    return r;
  }
};

// a = op.add(a, x, k, i) and a = op.merge(a, b), in place: the fold's and the drain's steps over
// lanes. Argmax's accumulator is stored field by field: g++ vectorizes a lane loop of these, not
// one that stores the whole struct that `add` returns.
template <class Acc>
inline void store(Acc& a, const Acc& r) {
#pragma HLS INLINE
  a = r;
}
template <typename T>
inline void store(Best<T>& a, const Best<T>& r) {
#pragma HLS INLINE
  a.value = r.value;
  a.index = r.index;
}
template <class Op, class A, typename T>
inline void add_into(const Op& op, A& a, T x, T k, uint64_t i) {
#pragma HLS INLINE
  store(a, op.add(a, x, k, i));
}
template <class Op, class A>
inline void merge_into(const Op& op, A& a, const A& b) {
#pragma HLS INLINE
  store(a, op.merge(a, b));
}

// The XCL_OPT 4 fold's steps on one lane's accumulator, a Lane and its Tag: cleared to the op's
// identity, element x at index i folded in, and read as an Acc. With NoTag the Lane is the whole
// accumulator; with an index Tag (argmax) the two are selected separately, each a blend of lanes.
template <class Op, class L>
inline void clear_lane(const Op& op, L& lane, NoTag&) {
#pragma HLS INLINE
  lane = op.identity();
}
template <class Op, class L, typename T>
inline void fold_lane(const Op& op, L& lane, NoTag&, T x, T k, uint64_t i) {
#pragma HLS INLINE
  add_into(op, lane, x, k, i);
}
template <class Op, class L>
inline typename Op::Acc lane_acc(const Op&, const L& lane, const NoTag&) {
#pragma HLS INLINE
  return typename Op::Acc(lane);
}
// An Acc split into a Lane and its Tag, the inverse of lane_acc (the scalar levels' group fold, which
// keeps argmax's values and indices apart as the XCL_OPT 4 fold does).
template <class Op, class A>
inline void split_acc(const Op&, const A& a, A& lane, NoTag&) {
#pragma HLS INLINE
  lane = a;
}
template <class Op, typename T>
inline void split_acc(const Op&, const Best<T>& a, T& value, int64_t& index) {
#pragma HLS INLINE
  value = a.value;
  index = a.index;
}
template <class Op, typename T>
inline void clear_lane(const Op& op, T& value, int64_t& index) {
#pragma HLS INLINE
  value = op.identity().value;
  index = op.identity().index;
}
template <class Op, typename T>
inline void fold_lane(const Op&, T& value, int64_t& index, T x, T, uint64_t i) {
#pragma HLS INLINE
  const bool take = Op::wins(x, int64_t(i), value, index);
  value = pick(take, x, value);
  index = take ? int64_t(i) : index;
}
template <class Op, typename T>
inline typename Op::Acc lane_acc(const Op&, const T& value, const int64_t& index) {
#pragma HLS INLINE
  const typename Op::Acc a = {value, index};
  return a;
}

template <typename T, typename R> struct ArgMax : ArgBest<T, R, true> {};
template <typename T, typename R> struct ArgMin : ArgBest<T, R, false> {};

// all / any over bool (ATen casts other inputs to bool first).
template <typename T, typename R>
struct All {
  typedef bool Acc;
  Acc identity() const { return true; }
  Acc add(Acc a, T x, T, uint64_t) const { return a && x; }
  Acc merge(Acc a, Acc b) const { return a && b; }
  R finish(Acc a, uint64_t) const { return a; }
};

template <typename T, typename R>
struct Any {
  typedef bool Acc;
  Acc identity() const { return false; }
  Acc add(Acc a, T x, T, uint64_t) const { return a || x; }
  Acc merge(Acc a, Acc b) const { return a || b; }
  R finish(Acc a, uint64_t) const { return a; }
};

// The vector p-norm (linalg.vector_norm): sum |x|^p, then the p-th root. The order's kind is a
// template parameter, each its own kernel that the host picks by p (host/ps/fpga_reduce.cpp), so a
// lane builds only its own math -- a pow in every lane of every kernel, selected at run time,
// would cost DSPs and latency for nothing. p = 0 counts the nonzero elements, 1 and 2 avoid pow,
// +-inf take the largest/smallest |x| (NaN propagates), any other p uses pow. Every kernel keeps
// the p register (the one ABI of the norm kernels); only the general one reads it.
//
// The general p's pow is in double (Wide) for float32, as it always was here: the results stay
// those of earlier builds, within the tests' tolerance of ATen's (which takes float powf). A double
// pow is some tens of DSPs and thousands of LUTs, so its lanes share one pow unit (SHARED_UNITS,
// Turns): the XCL_OPT 4 folds take one element a cycle, LANES cycles a word, where the other
// norms take a word a cycle. Bit-identity with today's results is what costs the II.
enum NormOrder { NORM_COUNT, NORM_ABS, NORM_SQUARE, NORM_POW, NORM_MAX, NORM_MIN };

// The norms whose accumulator is a sum or an extremum of |x| fold in a sum's lanes (SumLane); the
// count (exact integers past 2^24) and the general p (pow's error in every term) in Wide.
template <typename T, NormOrder Order>
struct NormLane : std::conditional<Order == NORM_COUNT || Order == NORM_POW, Wide<T>, SumLane<T> >::type {};

template <typename T, typename R, NormOrder Order>
struct NormOf {
  typedef typename Real<typename Wide<T>::type>::type Acc;
  typedef typename Real<typename NormLane<T, Order>::type>::type Lane;
  // The general p: one (magnitude and) pow unit, shared by a word's lanes (Turns); every lane its
  // own step for the other orders (an add or a compare).
  static const int SHARED_UNITS = Order == NORM_POW ? 1 : 0;  // 0: none shared
  Acc p;
  explicit NormOf(double p_) : p(Acc(p_)) {}
  Acc identity() const { return Order == NORM_MIN ? Acc(INFINITY) : Acc(0); }
  template <class A> A add(A a, T x, T, uint64_t) const {
    return fold(a, x, std::integral_constant<NormOrder, Order>());
  }
  template <class A> A merge(A a, A b) const {
    return Order == NORM_MAX ? max_nan(a, b) : Order == NORM_MIN ? min_nan(a, b) : a + b;
  }
  R finish(Acc a, uint64_t) const { return R(root(a, std::integral_constant<NormOrder, Order>())); }

 private:
  // One overload per order (C++14 has no `if constexpr`): only the kernel's own is instantiated.
  template <NormOrder O> using Is = std::integral_constant<NormOrder, O>;
  template <class A> A fold(A a, T x, Is<NORM_COUNT>) const { return a + A(x != T(0)); }
  template <class A> A fold(A a, T x, Is<NORM_ABS>) const { return a + magnitude<A>(x); }
  template <class A> A fold(A a, T x, Is<NORM_SQUARE>) const {
    const A m = magnitude<A>(x);
    return a + m * m;
  }
  template <class A> A fold(A a, T x, Is<NORM_POW>) const { return a + std::pow(magnitude<A>(x), A(p)); }
  template <class A> A fold(A a, T x, Is<NORM_MAX>) const { return max_nan(a, magnitude<A>(x)); }
  template <class A> A fold(A a, T x, Is<NORM_MIN>) const { return min_nan(a, magnitude<A>(x)); }
  template <NormOrder O> Acc root(Acc a, Is<O>) const { return a; }
  Acc root(Acc a, Is<NORM_SQUARE>) const { return std::sqrt(a); }
  Acc root(Acc a, Is<NORM_POW>) const { return std::pow(a, Acc(1) / p); }
};

// The kernels' functors (ops.yaml `expr`), one per order.
template <typename T, typename R> struct Norm : NormOf<T, R, NORM_POW> { using NormOf<T, R, NORM_POW>::NormOf; };
template <typename T, typename R> struct Norm0 : NormOf<T, R, NORM_COUNT> { using NormOf<T, R, NORM_COUNT>::NormOf; };
template <typename T, typename R> struct Norm1 : NormOf<T, R, NORM_ABS> { using NormOf<T, R, NORM_ABS>::NormOf; };
template <typename T, typename R> struct Norm2 : NormOf<T, R, NORM_SQUARE> { using NormOf<T, R, NORM_SQUARE>::NormOf; };
template <typename T, typename R> struct NormMax : NormOf<T, R, NORM_MAX> { using NormOf<T, R, NORM_MAX>::NormOf; };
template <typename T, typename R> struct NormMin : NormOf<T, R, NORM_MIN> { using NormOf<T, R, NORM_MIN>::NormOf; };

// var / std with Bessel's correction, in one pass: each run of a row accumulates its count and the
// sums of (x - k) and |x - k|^2 about its first element k, which keeps the final subtraction free
// of cancellation; `merge` re-centres one run's sums on the other's shift (Chan et al.'s pairwise
// update). Complex inputs give the real variance E|x - mean|^2, as ATen's var of real + var of imag.
template <typename T, typename R>
struct StdVar {
  typedef typename Wide<T>::type W;
  typedef typename Real<W>::type Re;
  struct Acc {
    W shift;
    uint64_t n;
    W s1;   // sum of (x - shift)
    Re s2;  // sum of |x - shift|^2
  };
  double correction;
  bool take_sqrt;
  StdVar(double correction_, bool take_sqrt_) : correction(correction_), take_sqrt(take_sqrt_) {}
  Acc identity() const {
    Acc a = {W(0), 0, W(0), Re(0)};
    return a;
  }
  Acc add(Acc a, T x, T k, uint64_t) const {
    const W d = W(x) - W(k);
    Acc r = {W(k), a.n + 1, a.s1 + d, a.s2 + re_dot(d, d)};
    return r;
  }
  Acc merge(Acc a, Acc b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const W d = b.shift - a.shift;  // b's sums about a's shift: x - a.shift = (x - b.shift) + d
    const Re nb = Re(b.n);
    Acc r = {a.shift, a.n + b.n, a.s1 + b.s1 + nb * d, a.s2 + b.s2 + Re(2) * re_dot(d, b.s1) + nb * re_dot(d, d)};
    return r;
  }
  R finish(Acc a, uint64_t) const {
    const Re n = Re(a.n);
    Re m2 = a.s2 - re_dot(a.s1, a.s1) / n;  // sum |x - mean|^2
    if (m2 < Re(0)) m2 = Re(0);               // rounding; NaN passes through
    const Re dof = n - Re(correction);
    const Re v = m2 / (dof > Re(0) ? dof : Re(0));  // ATen: M2 / max(0, n - correction)
    return R(take_sqrt ? std::sqrt(v) : v);
  }
};

}  // namespace reduce
}  // namespace afpga
