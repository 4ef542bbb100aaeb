// What the window drivers (fpga_conv.cpp, fpga_pool.cpp) share. Their kernels (kernels/hls/im2col,
// kernels/hls/pool) walk whole 2-d planes held on chip, each plane starting a port word: the host
// lays tensors out as [planes, pitch] on the device, pitch being the plane's elements rounded up to
// whole words (a 512-bit word at XCL_OPT 4, one element below).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "allocator.h"
#include "device.h"

namespace aten_fpga {

// The kernels' on-chip limits (MAX_PLANE, MAX_SIDE / MAX_GEOM in the templates): beyond them the
// driver throws KernelUnavailable and the op runs on the CPU, counted.
constexpr int64_t kMaxPlane = 65536;  // elements of one plane
constexpr int64_t kMaxSide = 4096;    // pool: output rows, output columns
constexpr int64_t kMaxGeom = 8192;    // im2col: window rows * output rows + window columns * output columns

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Elements per port word of the kernel's argument `arg` (1 below XCL_OPT 4).
int64_t port_lanes(const KernelInfo& info, size_t arg);

// `x`, whose last `inner` dims make a plane, as unit-stride [planes, pitch] rows on the device: x
// itself when it already is one (and starts a word), else a device copy (strided, channels_last,
// sliced, or pitch > plane). The padding elements are not written.
at::Tensor to_planes(const at::Tensor& x, int inner, int64_t pitch, int64_t word_bytes);

// [planes, pitch] rows seen as a tensor of `sizes` whose last `inner` dims make a plane; contiguous
// (a device copy) when pitch > plane.
at::Tensor from_planes(const at::Tensor& rows, at::IntArrayRef sizes, int inner, int64_t pitch);

// A host vector of int32 as a device tensor on `where` (the kernels' window geometry).
at::Tensor geometry_tensor(const std::vector<int32_t>& g, c10::Device where);


}  // namespace aten_fpga
