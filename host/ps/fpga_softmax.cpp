// softmax and log_softmax over any dim, and their gradients (the table's `host:` entries; ATen's
// impls are CPU kernels with no DispatchStub). Each is a few device ops over the rows of `dim`:
// the reduce kernels take a row's max or sum (a dim other than the last is gathered into rows on
// the device by the reduction driver), the pointwise kernels the rest. float16 computes in float
// and rounds once, as ATen's CPU kernels do.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>

#include "FPGAType.h"
#include "fpga_kernel.h"
#include "runtime.h"

namespace aten_fpga {
namespace {

// The operand in the type ATen computes in (float for float16).
at::Tensor opmath(const at::Tensor& t) { return t.scalar_type() == at::kHalf ? t.to(at::kFloat) : t; }

at::Tensor& softmax(const KernelRef& kernel, const at::Tensor& self, int64_t dim, bool half_to_float,
                    at::Tensor& out, bool log) {
  kernel_for(kernel, self.scalar_type(), self.device());  // KernelUnavailable before any side effect
  TORCH_CHECK(!half_to_float || self.scalar_type() == at::kHalf,
              "conversion is supported for Half type only (half_to_float with ", self.scalar_type(), " input)");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  const at::Tensor x = opmath(self);
  const at::Tensor shifted = at::sub(x, at::amax(x, d, /*keepdim=*/true));
  const at::Tensor e = at::exp(shifted);
  const at::Tensor sum = at::sum(e, d, /*keepdim=*/true);
  // ATen: log_softmax = (x - max) - log(sum); softmax = exp(x - max) * (1 / sum).
  return log ? at::sub_out(out, shifted, at::log(sum)) : at::mul_out(out, e, at::reciprocal(sum));
}

}  // namespace

at::Tensor& fpga_softmax_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim, bool half_to_float,
                             at::Tensor& out) {
  return softmax(kernel, self, dim, half_to_float, out, false);
}

at::Tensor& fpga_log_softmax_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim, bool half_to_float,
                                 at::Tensor& out) {
  return softmax(kernel, self, dim, half_to_float, out, true);
}

// grad_input = (grad - sum(grad * output)) * output over the rows of `dim`.
at::Tensor& fpga_softmax_backward_data_out(const KernelRef& kernel, const at::Tensor& grad_output,
                                           const at::Tensor& output, int64_t dim, at::ScalarType input_dtype,
                                           at::Tensor& grad_input) {
  kernel_for(kernel, grad_output.scalar_type(), grad_output.device());
  const int64_t d = at::maybe_wrap_dim(dim, grad_output.dim());
  at::native::resize_output(grad_input, grad_output.sizes());
  if (grad_output.numel() == 0) return grad_input;
  const at::Tensor g = opmath(grad_output), y = opmath(output);
  return at::mul_out(grad_input, at::sub(g, at::sum(at::mul(g, y), d, /*keepdim=*/true)), y);
}

// grad_input = grad - exp(output) * sum(grad) over the rows of `dim`.
at::Tensor& fpga_log_softmax_backward_data_out(const KernelRef& kernel, const at::Tensor& grad_output,
                                               const at::Tensor& output, int64_t dim, at::ScalarType input_dtype,
                                               at::Tensor& out) {
  kernel_for(kernel, grad_output.scalar_type(), grad_output.device());
  const int64_t d = at::maybe_wrap_dim(dim, grad_output.dim());
  at::native::resize_output(out, grad_output.sizes());
  if (grad_output.numel() == 0) return out;
  const at::Tensor g = opmath(grad_output), y = opmath(output);
  return at::sub_out(out, g, at::mul(at::exp(y), at::sum(g, d, /*keepdim=*/true)));
}

}  // namespace aten_fpga
