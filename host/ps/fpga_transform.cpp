// fpga_transform: tensor transformations made of the data-movement kernels, and the BatchNorm
// overloads AOTAutograd emits.
//   roll (Swin's shifted windows)   index_select (index/gather_rows) with the rotated indices
//   flip                            index_select (index/gather_rows) with descending indices
//                                   from arange (range/arange), one per flipped dim
//   _native_batch_norm_legit        native_batch_norm (host/ps/fpga_norm.cpp): the same op, its
//                                   running statistics taken as mutable (and .no_stats without)
// The ops they are made of count their own runs and fallbacks; these count a run when those
// launched a kernel.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>

#include "FPGAType.h"
#include "fpga_kernel.h"

namespace aten_fpga {

at::Tensor fpga_roll(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  kernel_for(kernel, self.scalar_type(), self.device());  // KernelUnavailable before any side effect
  if (dims.empty()) {  // roll the flattened tensor, as ATen does
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
    const int64_t zero = 0;
    return fpga_roll(kernel, self.reshape(-1), shifts, at::IntArrayRef(zero)).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  at::Tensor out = self;
  bool copied = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t dim = at::maybe_wrap_dim(dims[i], self.dim());
    const int64_t n = self.size(dim);
    if (n == 0) continue;
    const int64_t start = ((shifts[i] % n) + n) % n;  // the first output element comes from n - start
    if (start == 0) continue;
    // The rotated order, made on the host (n indices) and gathered by the index kernel, as flip's:
    // slices joined by cat would move contiguous slabs by DMA, which launches no kernel to count.
    const at::Tensor order = at::cat({at::arange(n - start, n, at::kLong), at::arange(0, n - start, at::kLong)});
    out = at::index_select(out, dim, order.to(self.device()));
    copied = true;
  }
  return copied ? out : self.clone(at::MemoryFormat::Contiguous);
}

at::Tensor fpga_flip(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef dims) {
  kernel_for(kernel, self.scalar_type(), self.device());
  const auto flipped = at::dim_list_to_bitset(dims, self.dim());  // wraps, and rejects duplicates
  at::Tensor out = self;
  bool copied = false;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!flipped[d] || self.size(d) < 2) continue;
    const at::Tensor descending = at::arange(self.size(d) - 1, -1, -1, self.options().dtype(at::kLong));
    out = at::index_select(out, d, descending);
    copied = true;
  }
  return copied ? out : self.clone(at::MemoryFormat::Contiguous);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_batch_norm_legit(
    const KernelRef& kernel, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var, bool training,
    double momentum, double eps) {
  return fpga_native_batch_norm(kernel, input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_batch_norm_legit_no_stats(
    const KernelRef& kernel, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, bool training, double momentum, double eps) {
  return fpga_native_batch_norm(kernel, input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}

}  // namespace aten_fpga
