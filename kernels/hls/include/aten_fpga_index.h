// The row-indexed kernels (kernels/hls/index). Both walk a [outer, rows, inner] range in order;
// row k of it is table row idx[k] of a [outer, table_rows, inner] tensor:
//   gather_rows       out[o][k][i]        = in[o][idx[k]][i]          (index_select, embedding)
//   scatter_add_rows  out[o][idx[k]][i]  += in[o][k][i]               (embedding_dense_backward,
//                                                                       index_add along one dim)
// A row whose index equals `skip` is left out (embedding's padding_idx; -1: none).
#pragma once

#include <cstdint>

#include "aten_fpga_hls.h"

namespace afpga {
namespace index {

struct GatherRows {
  static const bool kIndexedInput = true;  // the input is the table; the output is walked in order
  template <typename T>
  static T update(T, T x) { return x; }
};

struct ScatterAddRows {
  static const bool kIndexedInput = false;  // the output is the table, accumulated into
  template <typename T>
  static T update(T old, T x) { return T(opmath_t<T>(old) + opmath_t<T>(x)); }
};

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
