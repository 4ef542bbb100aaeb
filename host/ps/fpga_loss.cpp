// nll_loss and nll_loss2d, forward and backward (the table's `host:` entries; ATen's impls are CPU
// loops with no DispatchStub). The target's entries are selected by a one-hot comparison on the
// device (eq of the target against the class indices, the ignored class replaced by an index no
// target has), which gives each input element its weight (0 off target); the loss is then a sum
// over the class dim and the reduction, the gradient one product. Every step is an FPGA kernel.
//
// Not checked (ATen raises for it): a target outside [0, C) other than ignore_index; here it
// selects nothing (loss 0, weight 0).
#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>

#include "FPGAType.h"
#include "fpga_kernel.h"
#include "runtime.h"

namespace aten_fpga {
namespace {

// self is [C], [N, C] or [N, C, d...]; target [], [N] or [N, d...].
struct Selection {
  int64_t class_dim;
  at::Tensor hit;     // like self, bool: the entry is its sample's (not ignored) target
  at::Tensor weight;  // like self: the target class's weight at the target entry, else 0
  at::Tensor zero;    // a 0-dim 0 of self's dtype on the device
};

Selection select(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& target,
                 const std::optional<at::Tensor>& weight, int64_t ignore_index) {
  kernel_for(kernel, self.scalar_type(), self.device());  // KernelUnavailable before any side effect
  if (target.scalar_type() != at::kLong) throw KernelUnavailable("nll_loss with a non-int64 target");
  TORCH_CHECK(self.dim() >= 1 && self.dim() == target.dim() + 1, "nll_loss: expected input of ", target.dim() + 1,
              " dims for a target of ", target.dim(), ", got ", self.dim());
  Selection s;
  s.class_dim = self.dim() == 1 ? 0 : 1;
  const int64_t classes = self.size(s.class_dim);
  std::vector<int64_t> shape(self.dim(), 1);
  shape[s.class_dim] = classes;
  const bool weighted = weight.has_value() && weight->defined();
  TORCH_CHECK(!weighted || weight->numel() == classes, "weight tensor should be defined either for all ", classes,
              " classes or no classes but got weight tensor of shape: ", weight->sizes());

  // The class indices, small and made on the host: the ignored class gets `classes`, which no
  // valid target has, so that one comparison both selects and ignores.
  at::Tensor index = at::arange(classes, target.options().device(at::kCPU));
  if (ignore_index >= 0 && ignore_index < classes) index[ignore_index] = classes;
  s.hit = at::eq(target.unsqueeze(s.class_dim), index.view(shape).to(self.device()));

  const auto host = self.options().device(at::kCPU);
  s.zero = at::zeros({}, host).to(self.device());
  const at::Tensor w = weighted ? weight->to(self.scalar_type()).view(shape) : at::ones(shape, host).to(self.device());
  s.weight = at::where(s.hit, w, s.zero);
  return s;
}

void forward(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& target,
             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index, at::Tensor& output,
             at::Tensor& total_weight) {
  const Selection s = select(kernel, self, target, weight, ignore_index);
  // x[target] * w[target] per sample; where() keeps -inf and NaN off target out of the product.
  const at::Tensor picked = at::sum(at::mul(at::where(s.hit, self, s.zero), s.weight), s.class_dim);
  at::native::resize_output(total_weight, {});
  at::sum_out(total_weight, s.weight);
  if (reduction == at::Reduction::None) {
    at::native::resize_output(output, picked.sizes());
    at::neg_out(output, picked);
    return;
  }
  at::native::resize_output(output, {});
  const at::Tensor loss = at::neg(at::sum(picked));
  if (reduction == at::Reduction::Mean) {
    at::div_out(output, loss, total_weight);
  } else {
    output.copy_(loss);
  }
}

void backward(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
              const at::Tensor& target, const std::optional<at::Tensor>& weight, int64_t reduction,
              int64_t ignore_index, const at::Tensor& total_weight, at::Tensor& grad_input) {
  const Selection s = select(kernel, self, target, weight, ignore_index);
  // ATen: grad_input[target] = w[target] * -(grad (/ total_weight for a mean)), 0 elsewhere.
  const at::Tensor g = reduction == at::Reduction::None   ? grad_output.unsqueeze(s.class_dim)
                       : reduction == at::Reduction::Mean ? at::div(grad_output, total_weight)
                                                          : grad_output;
  at::native::resize_output(grad_input, self.sizes());
  at::mul_out(grad_input, s.weight, at::neg(g));
}

}  // namespace

std::tuple<at::Tensor&, at::Tensor&> fpga_nll_loss_forward_out(const KernelRef& kernel, const at::Tensor& self,
                                                               const at::Tensor& target,
                                                               const std::optional<at::Tensor>& weight,
                                                               int64_t reduction, int64_t ignore_index,
                                                               at::Tensor& output, at::Tensor& total_weight) {
  forward(kernel, self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& fpga_nll_loss_backward_out(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
                                       const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                       int64_t reduction, int64_t ignore_index, const at::Tensor& total_weight,
                                       at::Tensor& grad_input) {
  backward(kernel, grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  return grad_input;
}

std::tuple<at::Tensor, at::Tensor> fpga_nll_loss2d_forward(const KernelRef& kernel, const at::Tensor& self,
                                                           const at::Tensor& target,
                                                           const std::optional<at::Tensor>& weight,
                                                           int64_t reduction, int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options()), total_weight = at::empty({0}, self.options());
  forward(kernel, self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor fpga_nll_loss2d_backward(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
                                    const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                    int64_t reduction, int64_t ignore_index, const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty({0}, self.options());
  backward(kernel, grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input);
  return grad_input;
}

}  // namespace aten_fpga
