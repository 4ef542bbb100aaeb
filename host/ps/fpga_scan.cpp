// fpga_scan: the cumulative ops as kernels/hls/scan kernels (one launch each).
//   cumsum (Hugging Face decoders build position ids and masks with it, on int64), cumprod,
//   _logcumsumexp (logcumsumexp reaches it), _cummax_helper/_cummin_helper (what cummax/cummin
//   and their out= overloads reach, with preallocated values and indices).
// The input, cast to the output's dtype as ATen's impl does, is a contiguous [outer, len, inner]
// block on the device; each (outer, inner) pair is a lane the kernel scans along len in ATen's
// accumulate type, in order (bit exact). The lanes are split across compute units. cummax/cummin
// also write each element's int64 index to `idx`, laid out as the output.
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

// out = the scan of self along dim (out: self's sizes, the kernel dtype); idx, if defined (the
// indexed scan, cumextreme: `largest` picks cummax), its int64 indices.
void scan(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& out,
          const at::Tensor& idx = {}, bool largest = false) {
  if (!self.is_privateuseone() || self.device() != out.device()) throw KernelUnavailable("a scan across devices");
  KernelLaunch launch(kernel, out.scalar_type(), out.device());  // KernelUnavailable before any side effect
  if (idx.defined() && idx.device() != out.device()) throw KernelUnavailable("a scan's indices on another device");
  launch.expect_args(idx.defined() ? 3 + 1 + 5 : 2 + 5, "kernels/hls/scan/ops.yaml and fpga_scan.cpp disagree");
  c10::DeviceGuard guard(out.device());
  if (self.numel() == 0) return;
  if (self.dim() == 0) {
    out.copy_(self);  // a scan of one element is that element (cast), as ATen's impl
    if (idx.defined()) idx.fill_(0);
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
  const bool idx_direct = !idx.defined() || idx.is_contiguous();
  const at::Tensor ires = idx_direct ? idx : at::empty(self.sizes(), idx.options());
  const size_t ibytes = self.numel() * sizeof(int64_t);
  Allocation* a_idx = ires.defined() ? allocation_of(ires) : nullptr;
  sync_to_device(a_in, byte_offset(in), bytes);
  prepare_device_write(a_out, byte_offset(res), bytes);
  if (a_idx) prepare_device_write(a_idx, byte_offset(ires), ibytes);
  for (const CuRange& r : launch.split(outer * inner, kScanLanes, len)) {
    RunArgs run = launch.add_run();
    run.buffer(a_in, byte_offset(in), bytes).buffer(a_out, byte_offset(res), bytes);
    if (a_idx) run.buffer(a_idx, byte_offset(ires), ibytes).scalar(largest);
    run.size(outer)
        .size(len)
        .size(inner)
        .size(r.begin)
        .size(r.size());
  }
  launch.run();
  mark_device_written(a_out, byte_offset(res), bytes);
  if (a_idx) mark_device_written(a_idx, byte_offset(ires), ibytes);
  if (!direct) out.copy_(res);  // on the device
  if (!idx_direct) idx.copy_(ires);
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

namespace {

// cummax (largest) / cummin through cumextreme, whose members are float32 and int64: float16 and
// int32 run widened (exact both ways) and their values are narrowed back.
void cumextreme(const KernelRef& kernel, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                int64_t dim, bool largest) {
  const at::ScalarType t = self.scalar_type();
  const at::ScalarType wide = t == at::kHalf ? at::kFloat : t == at::kInt ? at::kLong : t;
  kernel_for(kernel, wide, self.device());  // KernelUnavailable before any side effect (bool, bfloat16...)
  if (wide == t) return scan(kernel, self, dim, values, indices, largest);
  c10::DeviceGuard guard(self.device());
  const at::Tensor widened = at::empty(self.sizes(), values.options().dtype(wide));
  scan(kernel, self, dim, widened, indices, largest);
  values.copy_(widened);  // on the device
}

}  // namespace

// ATen's composites (cummax, cummin and their out=) checked the dtypes and sized values and indices.
void fpga_cummax_helper(const KernelRef& kernel, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                        int64_t dim) {
  cumextreme(kernel, self, values, indices, dim, true);
}

void fpga_cummin_helper(const KernelRef& kernel, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                        int64_t dim) {
  cumextreme(kernel, self, values, indices, dim, false);
}

}  // namespace aten_fpga
