// CPU tensors aliasing an fpga tensor's host shadow: they let ATen's CPU code read and write those
// bytes with the fpga tensor's exact sizes, strides and dtype.
#pragma once

#include <ATen/ATen.h>

#include "allocator.h"

namespace aten_fpga {

at::Tensor host_alias(const at::Tensor& t);

}  // namespace aten_fpga
