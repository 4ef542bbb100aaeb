// Shared by every aten_fpga HLS kernel: the HLS headers our templates use and the ATen-exact
// building blocks their op expressions call. Compiled by v++ (Vitis headers) or, for the emulated
// device, by g++ with kernels/hls/emu/include first on the include path.
#pragma once

#include <cstdint>

#include <hls_math.h>
#include <hls_stream.h>
#include <hls_vector.h>

namespace afpga {

// a + alpha * b exactly as ATen's CPU kernel rounds it: its vectorized loop uses one fused
// multiply-add (vec::fmadd), so we do too. With alpha == 1 this is the correctly rounded a + b.
template <typename T>
inline T add_alpha(T a, T b, T alpha) {
  return hls::fma(b, alpha, a);
}

}  // namespace afpga
