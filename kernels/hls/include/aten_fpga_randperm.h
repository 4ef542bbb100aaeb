// The randperm kernel (kernels/hls/randperm): Fisher-Yates step i (i = n-1 .. 1) swaps positions i
// and j = swap_index(seed, offset, i), uniform in [0, i]: the high 64 bits of (64 random bits of
// philox(seed, (i, offset))) * (i + 1) -- no division in the datapath; the bias is below
// (i + 1) / 2^64.
#pragma once

#include <cstdint>

#include "aten_fpga_rng.h"

namespace afpga {
namespace randperm {

inline uint64_t swap_index(int64_t seed, int64_t offset, uint64_t i) {
#pragma HLS INLINE
  return rng::mulhi64(rng::bits64(rng::draw(seed, offset, i)), i + 1);
}

}  // namespace randperm
}  // namespace afpga
