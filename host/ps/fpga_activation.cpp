// The activation entries whose ATen impl cannot serve "fpga" through a DispatchStub (the table's
// `host:` entries): gelu and gelu_backward (their CPU impls call the kernel for kCPU whatever the
// tensors' device, which would read the host shadows), relu and hardtanh (registered for CPU and
// CUDA only; ATen computes them as clamps, and so do we), mse_loss (see fpga_mse_loss) and
// mse_loss_backward (its functional CPU
// impl zero-fills the result before the stub overwrites it). Each builds the iterator ATen's meta
// or impl builds and runs the entry's pointwise kernel through fpga_kernel.
#include <ATen/ATen.h>
#include <ATen/native/Gelu.h>
#include <ATen/core/Reduction.h>

#include "FPGAType.h"
#include "fpga_kernel.h"
#include "runtime.h"

namespace aten_fpga {
namespace {

// KernelUnavailable unless the image has `kernel` for this dtype: checked before any side effect
// when the entry's work goes through other ops (which would otherwise each fall back on their own).
void require(const KernelRef& kernel, const at::Tensor& t) { kernel_for(kernel, t.scalar_type(), t.device()); }

// gelu's `approximate` is a kernel of its own (none: the entry's kernel, tanh: `tanh_kernel`), so
// that no kernel builds both erf and tanh.
const KernelRef& gelu_kernel(const KernelRef& none, const KernelRef& tanh_kernel, c10::string_view approximate) {
  return at::native::get_gelutype_enum(approximate) == at::native::GeluType::Tanh ? tanh_kernel : none;
}

}  // namespace

at::Tensor& fpga_gelu_out(const KernelRef& kernel, const at::Tensor& self, c10::string_view approximate,
                          at::Tensor& out) {
  static const KernelRef tanh_kernel{"gelu_tanh"};
  at::TensorIterator iter = at::TensorIterator::unary_op(out, self);
  fpga_kernel(iter, gelu_kernel(kernel, tanh_kernel, approximate), {});
  return out;
}

at::Tensor& fpga_gelu_backward_out(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
                                   c10::string_view approximate, at::Tensor& grad_input) {
  static const KernelRef tanh_kernel{"gelu_backward_tanh"};
  at::TensorIterator iter = at::TensorIterator::borrowing_binary_op(grad_input, grad_output, self);
  fpga_kernel(iter, gelu_kernel(kernel, tanh_kernel, approximate), {});
  return grad_input;
}

// ATen refuses a bool relu, with an exception type that changed between releases (RuntimeError in
// 2.13, NotImplementedError in 2.14): its own CPU relu of an empty bool tensor raises what it raises.
static void relu_dtype_check(const at::Tensor& self) {
  if (self.scalar_type() == at::kBool) at::relu(at::empty({0}, self.options().device(at::kCPU)));
}

// relu is clamp_min(self, 0), as ATen's CPU impl computes it.
at::Tensor fpga_relu(const KernelRef& kernel, const at::Tensor& self) {
  relu_dtype_check(self);
  require(kernel, self);
  return at::clamp_min(self, 0);
}

at::Tensor& fpga_relu_(const KernelRef& kernel, at::Tensor& self) {
  relu_dtype_check(self);
  require(kernel, self);
  return at::clamp_min_(self, 0);
}

// hardtanh is clamp(self, min_val, max_val), as ATen's CPU impl computes it (floating dtypes only
// here: the integer bound conversion ATen adds is not needed).
at::Tensor& fpga_hardtanh_out(const KernelRef& kernel, const at::Tensor& self, const at::Scalar& min_val,
                              const at::Scalar& max_val, at::Tensor& out) {
  require(kernel, self);
  return at::clamp_out(out, self, min_val, max_val);
}

at::Tensor fpga_hardtanh(const KernelRef& kernel, const at::Tensor& self, const at::Scalar& min_val,
                         const at::Scalar& max_val) {
  require(kernel, self);
  return at::clamp(self, min_val, max_val);
}

at::Tensor& fpga_hardtanh_(const KernelRef& kernel, at::Tensor& self, const at::Scalar& min_val,
                           const at::Scalar& max_val) {
  require(kernel, self);
  return at::clamp_(self, min_val, max_val);
}

// grad_input = norm * (self - target) * grad_output, norm = 2 (or 2 / numel for a mean), as ATen's
// mse_loss_backward_out computes it.
at::Tensor& fpga_mse_loss_backward_out(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
                                       const at::Tensor& target, int64_t reduction, at::Tensor& grad_input) {
  const double norm = reduction == at::Reduction::Mean ? 2. / static_cast<double>(self.numel()) : 2.;
  const std::optional<c10::Scalar> scalars[] = {c10::Scalar(norm)};
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_output(grad_input)
                                .add_const_input(self)
                                .add_const_input(target)
                                .add_const_input(grad_output)
                                .build();
  fpga_kernel(iter, kernel, scalars);
  return grad_input;
}

at::Tensor fpga_mse_loss_backward(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& target, int64_t reduction) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return fpga_mse_loss_backward_out(kernel, grad_output, self, target, reduction, grad_input);
}

// mse_loss: the elementwise (self - target)^2 on the mse kernel, then its mean or sum (the reduce
// kernels). ATen's structured functional would allocate the elementwise shape and resize it to a
// scalar, warning on every call.
at::Tensor fpga_mse_loss(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& target,
                         int64_t reduction) {
  at::Tensor loss;
  at::TensorIterator iter = at::TensorIterator::binary_op(loss, self, target);
  fpga_kernel(iter, kernel, {});
  const at::Tensor& elementwise = iter.output();
  if (reduction == at::Reduction::Mean) return elementwise.mean();
  if (reduction == at::Reduction::Sum) return elementwise.sum();
  return elementwise;
}

}  // namespace aten_fpga
