// The indexed kernels (kernels/hls/index). Each walks a [outer, rows, inner] range in order; the
// element (o, k, i) of the walk is element (o, idx, i) of a [outer, table_rows, inner] tensor, idx
// being idx[k] (a row index: the same for a whole row) or idx[flat element] (an element index):
//   gather_rows       out[o][k][i]          = in[o][idx[k]][i]       (index_select, embedding)
//   scatter_rows      out[o][idx[k]][i]     = in[o][k][i]            (index_put_)
//   scatter_add_rows  out[o][idx[k]][i]    += in[o][k][i]            (embedding_dense_backward,
//                                                                      index_put_ accumulating)
//   gather            out[o][k][i]          = in[o][idx[o][k][i]][i] (gather along dim)
//   scatter           out[o][idx[o][k][i]][i] = in[o][k][i]          (scatter, scatter.value)
//   scatter_add, scatter_mul: the same, += and *=                    (scatter_add, reduce=)
// A walk element whose index equals `skip` is left out (embedding's padding_idx; -1: none).
// Scatters update each destination in walk order, k ascending: ATen's CPU order, so repeated
// indices accumulate (or overwrite) deterministically and as the CPU does.
#pragma once

#include <cstdint>

#include "aten_fpga_hls.h"

namespace afpga {
namespace index {

// How a moved element combines with the destination (computed in ATen's opmath type).
struct Take {
  template <typename T>
  static T update(T, T x) { return x; }
};
struct Add {
  template <typename T>
  static T update(T old, T x) { return T(opmath_t<T>(old) + opmath_t<T>(x)); }
};
struct Mul {
  template <typename T>
  static T update(T old, T x) { return T(opmath_t<T>(old) * opmath_t<T>(x)); }
};

// IndexedInput: the input is the table (a gather; the output is walked in order), else the output
// is (a scatter, which reads the destination it updates). PerElement: one index per walk element.
template <bool IndexedInput, bool PerElement, typename Update>
struct Indexed : Update {
  static const bool kIndexedInput = IndexedInput;
  static const bool kPerElement = PerElement;
};

typedef Indexed<true, false, Take> GatherRows;
typedef Indexed<false, false, Take> ScatterRows;
typedef Indexed<false, false, Add> ScatterAddRows;
typedef Indexed<true, true, Take> Gather;
typedef Indexed<false, true, Take> Scatter;
typedef Indexed<false, true, Add> ScatterAdd;
typedef Indexed<false, true, Mul> ScatterMul;

// The walk over [outer, rows, inner]: (o, k, i) of flat element `begin`, stepped without division.
struct Walk {
  uint64_t o, k, i;
  Walk(uint64_t begin, uint64_t rows, uint64_t inner)
      : o(begin / inner / rows), k(begin / inner % rows), i(begin % inner) {}
  void step(uint64_t rows, uint64_t inner) {
#pragma HLS INLINE
    i += 1;
    if (i == inner) {
      i = 0;
      k += 1;
      if (k == rows) {
        k = 0;
        o += 1;
      }
    }
  }
};

}  // namespace index
}  // namespace afpga
