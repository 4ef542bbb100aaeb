// fpga_weight_norm: weight normalization (torch.nn.utils.weight_norm; wav2vec2's positional
// convolution) from the reduce and pointwise kernels. dim is the one dim the norm keeps (ATen's
// fused kernel: 0 or the last); every other dim is reduced. ATen's CPU kernel, per kept index j:
//   norm[j] = sqrt(sum v^2)              reduce/norm2 (linalg_vector_norm)
//   w = v * (g[j] / norm[j])             binary/div, binary/mul
// and the backward
//   s = sum(grad_w * v)                  binary/mul, reduce/sum
//   grad_g = s / norm; a = g / norm; b = a * grad_g / norm
//   grad_v = a * grad_w - b * v          binary ops, broadcast over the reduced dims
// The sums' order is the reduce kernels' (within float32 rounding of ATen's, not bit exact).
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <c10/core/DeviceGuard.h>

#include "FPGAType.h"
#include "fpga_kernel.h"

namespace aten_fpga {
namespace {

// The dims of v the norm reduces: all but `dim`, as ATen's fused kernel (0 or the last).
std::vector<int64_t> reduced_dims(const at::Tensor& v, int64_t dim) {
  TORCH_CHECK(v.dim() > 0, "weight_norm: expected a weight of at least one dim");
  const int64_t kept = at::maybe_wrap_dim(dim, v.dim());
  TORCH_CHECK(kept == 0 || kept == v.dim() - 1, "weight_norm: the fused kernel keeps dim 0 or the last dim, got ", dim);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (d != kept) dims.push_back(d);
  }
  return dims;
}

// Every operand on one fpga device and float32, the dtype the table builds: ATen's float16 weight
// norm keeps its norms in float32, which these kernels do not (the CPU runs it, counted).
void require_fpga(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts) {
    if (!t->is_privateuseone() || t->device() != (*ts.begin())->device()) throw KernelUnavailable("weight_norm across devices");
    if (t->scalar_type() != at::kFloat) throw KernelUnavailable("weight_norm other than float32");
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fpga__weight_norm_interface(const KernelRef& kernel, const at::Tensor& v,
                                                               const at::Tensor& g, int64_t dim) {
  kernel_for(kernel, v.scalar_type(), v.device());  // KernelUnavailable before any side effect
  require_fpga({&v, &g});
  c10::DeviceGuard guard(v.device());
  const std::vector<int64_t> dims = reduced_dims(v, dim);
  at::Tensor norm = dims.empty() ? v.abs() : at::linalg_vector_norm(v, 2, dims, /*keepdim=*/true);
  at::Tensor w = at::mul(v, at::div(g, norm.view(g.sizes())).view(norm.sizes()));
  return {w.contiguous(), norm.view(g.sizes())};
}

std::tuple<at::Tensor, at::Tensor> fpga__weight_norm_interface_backward(const KernelRef& kernel,
                                                                        const at::Tensor& grad_w,
                                                                        const at::Tensor& saved_v,
                                                                        const at::Tensor& saved_g,
                                                                        const at::Tensor& saved_norms, int64_t dim) {
  kernel_for(kernel, saved_v.scalar_type(), saved_v.device());
  require_fpga({&saved_v, &grad_w, &saved_g, &saved_norms});
  c10::DeviceGuard guard(saved_v.device());
  const std::vector<int64_t> dims = reduced_dims(saved_v, dim);
  const at::Tensor prod = at::mul(grad_w, saved_v);
  const at::Tensor s = dims.empty() ? prod : at::sum(prod, dims, /*keepdim=*/true);
  const at::Tensor norm = saved_norms.view(s.sizes());
  const at::Tensor grad_g = at::div(s, norm);
  const at::Tensor a = at::div(saved_g.view(s.sizes()), norm);
  const at::Tensor b = at::div(at::mul(a, grad_g), norm);
  const at::Tensor grad_v = at::sub(at::mul(grad_w, a), at::mul(saved_v, b));
  return {grad_v.contiguous(), grad_g.view(saved_g.sizes()).contiguous()};
}

}  // namespace aten_fpga
