// torch.autocast("fpga"): the AutocastPrivateUse1 kernels, with the op lists PyTorch shares between
// backends (ATen/autocast_mode.h, those CUDA registers): matrix products and convolutions run in the
// autocast dtype (float16 or bfloat16), numerically sensitive ops (exp, log, norms, losses, softmax,
// sums) in float32, and mixed-dtype ops at the widest input's type.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace aten_fpga {
namespace {

using namespace at::autocast;
// The lists' signatures name these unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false, "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast on fpga "
              "(as on cuda): a float16 or bfloat16 sigmoid before it loses the precision the log needs. Use "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, which combine "
              "the sigmoid and the loss and are safe to autocast.");
}

// Ops in no list run as they are (PyTorch registers this fallthrough for its own backends only).
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define AFPGA_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(AFPGA_LOWER_PRECISION_FP)
#define AFPGA_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(AFPGA_FP32)
#define AFPGA_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(AFPGA_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define AFPGA_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(AFPGA_PROMOTE)
#undef AFPGA_LOWER_PRECISION_FP
#undef AFPGA_FP32
#undef AFPGA_FP32_SET_OPT_DTYPE
#undef AFPGA_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace
}  // namespace aten_fpga
