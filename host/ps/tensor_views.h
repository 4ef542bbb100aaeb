// CPU tensors aliasing an fpga tensor's bytes: its host shadow, or (where the device memory is
// addressable, as on the emulator) its device copy. They let ATen's CPU code read and write those
// bytes with the fpga tensor's exact sizes, strides and dtype.
#pragma once

#include <ATen/ATen.h>

#include "allocator.h"

namespace aten_fpga {

at::Tensor host_alias(const at::Tensor& t);
// nullopt-like: an undefined tensor when the device memory is not addressable.
at::Tensor device_alias(const at::Tensor& t);

}  // namespace aten_fpga
