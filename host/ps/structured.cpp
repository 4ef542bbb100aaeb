#include "structured.h"

#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

namespace aten_fpga {

void set_output(std::reference_wrapper<at::Tensor> out_ref, std::optional<at::Tensor>& proxy, at::IntArrayRef sizes,
                at::IntArrayRef strides, const at::TensorOptions& options, bool allow_proxy) {
  at::Tensor& out = out_ref.get();
  TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(),
              ", but got ", out.dtype(), " instead");
  TORCH_CHECK(options.device() == out.device(), "Expected out tensor to have device ", options.device(),
              ", but got ", out.device(), " instead");
  const bool resized = at::native::resize_output(out, sizes);
  if (resized) {
    if (!strides.empty()) {
      TORCH_INTERNAL_ASSERT(!options.memory_format_opt().has_value());
      out.as_strided_(sizes, strides);
    } else if (options.memory_format_opt().has_value()) {
      out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
    }
  }
  if (allow_proxy && !strides.empty() && !out.strides().equals(strides)) {
    c10::DeviceGuard guard(options.device());
    proxy = at::empty_strided(sizes, strides, options);
  }
}

}  // namespace aten_fpga
