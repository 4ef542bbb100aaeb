// Output handling for the generated structured wrappers (FPGAType_*.cpp), as ATen's own
// Register<Backend>.cpp does it for an out= overload: resize `out` (restriding only when it was
// resized); where the kernel needs other strides than `out`
// has, compute into a proxy that is copied back afterwards.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>

namespace aten_fpga {

void set_output(std::reference_wrapper<at::Tensor> out, std::optional<at::Tensor>& proxy, at::IntArrayRef sizes,
                at::IntArrayRef strides, const at::TensorOptions& options, bool allow_proxy);

}  // namespace aten_fpga
