// The strided copy kernels (kernels/hls/copy) from the host: copy_ between fpga tensors of one
// device with any strides, broadcast and dtypes (a cast), and tril/triu. host/ps/fpga_copy.cpp.
#pragma once

#include <ATen/ATen.h>

#include "fpga_kernel.h"

namespace aten_fpga {

// dst = src (broadcast to dst's shape, cast to dst's dtype) on the device: v_copy_<src>_<dst>.
// Throws KernelUnavailable, before any side effect, when the image has no such kernel or the
// tensors are on different devices.
void device_copy(const at::Tensor& dst, const at::Tensor& src);

}  // namespace aten_fpga
