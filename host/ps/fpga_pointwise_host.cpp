// Pointwise table entries whose ATen impl bypasses the PrivateUse1 stub: it runs a CPU kernel on
// the host shadow itself, which is stale whenever the input was produced on the device. Each runs
// its table kernel through fpga_kernel on a TensorIterator built as ATen's meta builds it.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Gelu.h>

#include "FPGAType.h"
#include "fpga_kernel.h"

namespace aten_fpga {

// ATen's gelu_out_cpu calls GeluKernel(kCPU, ...) (or oneDNN) whatever the device.
at::Tensor& fpga_gelu_out(const KernelRef& kernel, const at::Tensor& self, c10::string_view approximate,
                          at::Tensor& out) {
  const auto type = at::native::get_gelutype_enum(approximate);  // rejects a bad name, as ATen does
  at::TensorIterator iter = at::TensorIterator::unary_op(out, self);  // gelu's meta: a unary op
  const std::optional<c10::Scalar> scalars[] = {c10::Scalar(static_cast<int64_t>(type))};
  fpga_kernel(iter, kernel, scalars);
  return out;
}

}  // namespace aten_fpga
