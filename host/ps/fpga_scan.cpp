// fpga_scan: the cumulative ops as kernels/hls/scan kernels (one launch each).
//   cumsum (Hugging Face decoders build position ids and masks with it, on int64), cumprod,
//   _logcumsumexp (logcumsumexp reaches it).
// The input, cast to the output's dtype as ATen's impl does, is a contiguous [outer, len, inner]
// block on the device; each (outer, inner) pair is a lane the kernel scans along len in ATen's
// accumulate type, in order (bit exact). The lanes are split across compute units.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/irange.h>

#include "FPGAType.h"
#include "allocator.h"
#include "launch.h"

namespace aten_fpga {
namespace {

constexpr int64_t kScanLanes = 16;  // a block of the kernel (kernels/hls/scan/_kernel.j2, levels 2-4)

// out = the scan of self along dim (out: self's sizes, the kernel dtype).
void scan(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& out) {
  if (!self.is_privateuseone() || self.device() != out.device()) throw KernelUnavailable("a scan across devices");
  KernelLaunch launch(kernel, out.scalar_type(), out.device());  // KernelUnavailable before any side effect
  launch.expect_args(2 + 5, "kernels/hls/scan/ops.yaml and fpga_scan.cpp disagree");
  c10::DeviceGuard guard(out.device());
  if (self.numel() == 0) return;
  if (self.dim() == 0) {
    out.copy_(self);  // a scan of one element is that element (cast), as ATen's impl
    return;
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor in = self.to(out.scalar_type()).contiguous();  // on the device
  const bool direct = out.is_contiguous();
  const at::Tensor res = direct ? out : at::empty(self.sizes(), out.options());
  int64_t outer = 1, inner = 1;
  for (const auto d : c10::irange(dim)) outer *= self.size(d);
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= self.size(d);
  const int64_t len = self.size(dim);
  const size_t bytes = in.numel() * in.element_size();
  Allocation* a_in = allocation_of(in);
  Allocation* a_out = allocation_of(res);
  sync_to_device(a_in, byte_offset(in), bytes);
  prepare_device_write(a_out, byte_offset(res), bytes);
  for (const CuRange& r : launch.split(outer * inner, kScanLanes, len)) {
    launch.add_run()
        .buffer(a_in, byte_offset(in), bytes)
        .buffer(a_out, byte_offset(res), bytes)
        .size(outer)
        .size(len)
        .size(inner)
        .size(r.begin)
        .size(r.size());
  }
  launch.run();
  mark_device_written(a_out, byte_offset(res), bytes);
  if (!direct) out.copy_(res);  // on the device
}

// cumsum/cumprod(out=): ATen's meta -- the dtype asked for, else out's -- then the scan.
at::Tensor& cumulative_out(const KernelRef& kernel, const char* name, const at::Tensor& self, int64_t dim,
                           std::optional<at::ScalarType> dtype, at::Tensor& out) {
  at::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType out_dtype = dtype.value_or(out.scalar_type());
  TORCH_CHECK(out.scalar_type() == out_dtype, name, "(): expected out tensor to have dtype ", out_dtype,
              ", but got ", out.scalar_type(), " instead");
  kernel_for(kernel, out_dtype, out.device());
  at::native::resize_output(out, self.sizes());
  scan(kernel, self, dim, out);
  return out;
}

}  // namespace

at::Tensor& fpga_cumsum_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cumulative_out(kernel, "cumsum", self, dim, dtype, out);
}

at::Tensor& fpga_cumprod_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim,
                             std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cumulative_out(kernel, "cumprod", self, dim, dtype, out);
}

at::Tensor& fpga_logcumsumexp_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim, at::Tensor& out) {
  kernel_for(kernel, self.scalar_type(), self.device());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "logcumsumexp(): expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, self.sizes());
  scan(kernel, self, dim, out);
  return out;
}

at::Tensor fpga_logcumsumexp(const KernelRef& kernel, const at::Tensor& self, int64_t dim) {
  kernel_for(kernel, self.scalar_type(), self.device());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  scan(kernel, self, dim, out);
  return out;
}

}  // namespace aten_fpga
