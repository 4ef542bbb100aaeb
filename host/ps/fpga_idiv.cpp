// fpga_idiv: integer division with a rounding mode on int32 and int64 -- div(a, b,
// rounding_mode='trunc'|'floor') and floor_divide -- as the kernels/hls/idiv kernels (a bit-serial
// divider, docs/kernels.md "Integer division"), bit exact with ATen's CPU kernels. A zero divisor
// raises "ZeroDivisionError" as they do, checked before the launch (one sync of one value).
// Every other case -- floating dtypes, true division, other integer dtypes -- runs div.out_mode
// (the binary kernels where the table has them), so the functional ops these entries take over
// behave as before.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/DeviceGuard.h>

#include "FPGAType.h"
#include "allocator.h"
#include "launch.h"

namespace aten_fpga {
namespace {

at::Tensor divide_rounded(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& other,
                          std::optional<c10::string_view> mode) {
  at::ScalarType dtype = at::result_type(self, other);
  const bool rounded = mode.has_value() && (*mode == "trunc" || *mode == "floor");
  if (rounded && at::isIntegralType(dtype, /*includeBool=*/true) && dtype != at::kInt && dtype != at::kLong)
    throw KernelUnavailable(std::string("integer division of ") + c10::toString(dtype));  // the CPU, counted here
  if (!rounded || (dtype != at::kInt && dtype != at::kLong)) {
    if (!mode.has_value() && at::isIntegralType(dtype, /*includeBool=*/true))
      dtype = c10::typeMetaToScalarType(c10::get_default_dtype());  // true division of integers
    if (dtype != at::kFloat && dtype != at::kHalf)  // div.out_mode's dtypes in the table
      throw KernelUnavailable(std::string("division of ") + c10::toString(dtype));
    at::Tensor out = at::empty({0}, self.options().dtype(dtype));
    return at::div_out(out, self, other, mode);  // ATen's meta checks the mode
  }
  static const KernelRef floor{"idiv_floor"};
  KernelLaunch launch(*mode == "floor" ? floor : kernel, dtype, self.device());  // KernelUnavailable first
  launch.expect_args(4 + 1, "kernels/hls/idiv/ops.yaml and fpga_idiv.cpp disagree");
  if (!self.is_privateuseone()) throw KernelUnavailable("integer division of a CPU tensor");
  // A Python number arrives as a 0-dim CPU tensor: it moves to the device (8 bytes).
  const bool cpu_scalar = other.device().is_cpu() && other.dim() == 0;
  if (!cpu_scalar && other.device() != self.device()) throw KernelUnavailable("integer division across devices");
  c10::DeviceGuard guard(self.device());
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  const at::Tensor a = self.to(dtype).expand(shape).contiguous();  // on the device
  const at::Tensor b = other.to(self.device()).to(dtype).expand(shape).contiguous();
  at::Tensor out = at::empty(shape, self.options().dtype(dtype));
  const int64_t n = out.numel();
  if (n == 0) return out;
  // A zero divisor is ATen's error, checked before the launch by two table kernels (eq, any): an
  // exception thrown after a launch leaves the launch's booking pending on the thread, which broke
  // a later op's error path (stats.cpp). The kernel's status word stays unread until that is fixed.
  TORCH_CHECK(!at::eq(b, 0).any().item<bool>(), "ZeroDivisionError");  // ATen's CPU message
  const auto units = launch.split(n);
  at::Tensor status = at::empty({int64_t(units.size())}, self.options().dtype(at::kLong));
  const size_t es = out.element_size();
  Allocation* a_a = allocation_of(a);
  Allocation* a_b = allocation_of(b);
  Allocation* a_out = allocation_of(out);
  Allocation* a_status = allocation_of(status);
  sync_to_device(a_a, byte_offset(a), n * es);
  sync_to_device(a_b, byte_offset(b), n * es);
  prepare_device_write(a_out, byte_offset(out), n * es);
  prepare_device_write(a_status, byte_offset(status), status.numel() * 8);
  for (size_t u = 0; u < units.size(); ++u) {
    const CuRange& r = units[u];
    launch.add_run()
        .buffer(a_a, byte_offset(a) + r.begin * es, r.size() * es)
        .buffer(a_b, byte_offset(b) + r.begin * es, r.size() * es)
        .buffer(a_out, byte_offset(out) + r.begin * es, r.size() * es)
        .buffer(a_status, byte_offset(status) + u * 8, 8)
        .size(r.size());
  }
  launch.run();
  mark_device_written(a_out, byte_offset(out), n * es);
  mark_device_written(a_status, byte_offset(status), status.numel() * 8);
  return out;
}

}  // namespace

at::Tensor fpga_div_tensor_mode(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& other,
                                std::optional<c10::string_view> rounding_mode) {
  return divide_rounded(kernel, self, other, rounding_mode);
}

at::Tensor fpga_floor_divide(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& other) {
  return divide_rounded(kernel, self, other, c10::string_view("floor"));
}

}  // namespace aten_fpga
