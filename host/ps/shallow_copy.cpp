// Moving a module between the CPU and "fpga" keeps its Parameters: nn.Module._apply (and
// `param.data = t`) asks `_has_compatible_shallow_copy_type` whether a Parameter may take the moved
// tensor in place. c10's answer counts only its built-in dense backends (CPU, CUDA, ...), so for a
// PrivateUse1 tensor it says no, and _apply then makes a new Parameter per module: weights tied
// across modules (a language model's embedding and its output layer) come apart, silently.
// A dense fpga tensor is a plain strided TensorImpl like a CPU or CUDA one, so it answers as c10
// does for two CUDA-or-CPU tensors.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace aten_fpga {
namespace {

bool dense_on_cpu_or_fpga(const at::Tensor& t) {
  const c10::DeviceType type = t.device().type();
  return t.layout() == c10::kStrided && !t.is_quantized() && !t.is_nested() &&
         (type == c10::DeviceType::CPU || type == c10::DeviceType::PrivateUse1);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense_on_cpu_or_fpga(self) && dense_on_cpu_or_fpga(from));
}

}  // namespace

// Dispatch takes the union of both arguments' keys, so a pair with one fpga tensor lands here.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace aten_fpga
