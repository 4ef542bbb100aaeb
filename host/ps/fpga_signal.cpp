// The data movement of torch.stft / torch.istft, so that they run on the device end to end around
// their FFTs: reflection padding (stft's center=True) and unfold_backward (istft's overlap-add).
// Both are index maps computed on the host (a few KB of int64 indices, the only bytes that cross)
// and run by the index kernels: a gather (index_select) and a scatter-add of rows
// (embedding_dense_backward's kernel).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <vector>

#include "FPGAType.h"
#include "fpga_kernel.h"

namespace aten_fpga {
namespace {

at::Tensor indices_on(const std::vector<int64_t>& idx, c10::Device device) {
  return at::tensor(idx, at::TensorOptions().dtype(at::kLong)).to(device);
}

}  // namespace

// out[..., i] = self[..., reflect(i - left)] over the last dim, as ATen's reflection_pad1d.
at::Tensor& fpga_reflection_pad1d_out(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef padding,
                                      at::Tensor& out) {
  TORCH_CHECK(padding.size() == 2, "reflection_pad1d: padding must have 2 elements, got ", padding.size());
  TORCH_CHECK(self.dim() == 2 || self.dim() == 3, "reflection_pad1d: expected a 2-D or 3-D input, got ",
              self.dim(), "-D of size ", self.sizes());
  kernel_for(kernel, self.scalar_type(), self.device());  // KernelUnavailable before any work
  const int64_t width = self.size(-1), left = padding[0], right = padding[1];
  TORCH_CHECK(left < width && right < width, "Argument #4: Padding size should be less than the corresponding "
              "input dimension, but got: padding (", left, ", ", right, ") at dimension ", self.dim() - 1,
              " of input ", self.sizes());
  const int64_t padded = width + left + right;
  TORCH_CHECK(padded >= 1, "input (W: ", width, ") is too small. Calculated output W: ", padded);
  c10::DeviceGuard guard(self.device());
  std::vector<int64_t> idx(padded);
  for (int64_t i = 0; i < padded; ++i) {
    const int64_t j = i - left;
    idx[i] = j < 0 ? -j : j >= width ? 2 * (width - 1) - j : j;
  }
  const at::Tensor result = at::index_select(self, -1, indices_on(idx, self.device()));
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

// The gradient of unfold(dim, size, step): frame j's element k adds into position j * step + k of
// dim, as a scatter-add of rows ([frames * size, rest] into [input_sizes[dim], rest]).
at::Tensor fpga_unfold_backward(const KernelRef& kernel, const at::Tensor& grad_in, at::IntArrayRef input_sizes,
                                int64_t dim, int64_t size, int64_t step) {
  // ATen's first check (UnfoldBackward.cpp); with step 0 the frames below would all add at 0.
  TORCH_CHECK_VALUE(step > 0, "step is ", step, " but must be > 0");
  kernel_for(kernel, grad_in.scalar_type(), grad_in.device());  // KernelUnavailable before any work
  const int64_t d = c10::maybe_wrap_dim(dim, static_cast<int64_t>(input_sizes.size()));
  c10::DeviceGuard guard(grad_in.device());
  const int64_t frames = grad_in.size(d), length = input_sizes[d];
  // [frames, size, the other dims of the input...]
  const at::Tensor g = grad_in.movedim(d, 0).movedim(-1, 1);
  std::vector<int64_t> rest(g.sizes().begin() + 2, g.sizes().end());
  const int64_t width = c10::multiply_integers(rest);
  if (frames * size == 0 || width == 0) return at::zeros(input_sizes, grad_in.options());
  std::vector<int64_t> idx(frames * size);
  for (int64_t j = 0; j < frames; ++j) {
    for (int64_t k = 0; k < size; ++k) idx[j * size + k] = j * step + k;
  }
  const at::Tensor rows = g.reshape({frames * size, width});
  const at::Tensor sums = at::embedding_dense_backward(rows, indices_on(idx, grad_in.device()), length,
                                                       /*padding_idx=*/-1, /*scale_grad_by_freq=*/false);
  std::vector<int64_t> shape{length};
  shape.insert(shape.end(), rest.begin(), rest.end());
  return sums.view(shape).movedim(0, d).contiguous();
}

}  // namespace aten_fpga
