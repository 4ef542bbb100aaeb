// The fills: the table's host: functions of fill_ (a Scalar or a 0-dim tensor value) and zero_,
// which zeros, ones, full, new_*, *_like and the optimizers' state initialisation reach through
// ATen's composite kernels. One launch of kernels/hls/fill (v_fill_<dtype>: out[i] = value) writes
// the tensor on the device; nothing crosses to the host.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include <algorithm>

#include "FPGAType.h"
#include "allocator.h"
#include "device.h"
#include "launch.h"

namespace aten_fpga {
namespace {

// The value as ATen's fill_ stores it: converted to the tensor's dtype (a checked conversion: an
// out-of-range value is ATen's error), then held exactly in the kernel's register, whose type is
// the dtype's opmath type (float for float16: rounding to half first avoids rounding twice).
c10::Scalar in_dtype(const c10::Scalar& v, at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return v.to<float>();
    case at::kHalf: return static_cast<float>(v.to<at::Half>());
    case at::kInt: return static_cast<int64_t>(v.to<int32_t>());
    case at::kLong: return v.to<int64_t>();
    case at::kBool: return v.to<bool>();
    default: throw KernelUnavailable("fill for " + std::string(c10::toString(dtype)));
  }
}

// Writes `value` over `self`. The kernel writes whole port words (512 bits at XCL_OPT 4), so it
// writes `self` in place only when `self` is one dense run of memory starting a word and ending a
// word or its allocation's bytes; any other tensor (a strided view, a slice ending mid-word) is
// filled through a dense temporary copied in on the device.
at::Tensor& fill(const KernelRef& kernel, at::Tensor& self, const c10::Scalar& value) {
  const at::ScalarType dtype = self.scalar_type();
  const c10::Scalar v = in_dtype(value, dtype);
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    throw KernelUnavailable("fill of a tensor whose elements share memory");
  }
  const int64_t n = self.numel();
  if (n == 0) return self;
  const int64_t esize = self.element_size();
  const int64_t word = std::max<int64_t>(kernel_for(kernel, dtype, self.device()).args[0].bytes, esize);
  Allocation* a = allocation_of(self);
  const size_t begin = self.storage_offset() * esize, end = begin + n * esize;
  const bool direct = self.is_non_overlapping_and_dense() && begin % word == 0 &&
                      (end % word == 0 || end >= a->requested);
  if (!direct) {
    at::Tensor dense = at::empty({n}, self.options());
    fill(kernel, dense, value);
    self.copy_(dense.view(self.sizes()));  // on the device
    return self;
  }
  KernelLaunch launch(kernel, dtype, self.device());
  launch.expect_args(3, "fill takes out, value, size: fix kernels/hls/fill/ops.yaml");
  prepare_device_write(a, begin, end - begin);
  for (const CuRange& r : launch.split(n, word / esize)) {
    launch.add_run().buffer(a, begin + r.begin * esize).scalar(v).size(r.size());
  }
  launch.run();
  mark_device_written(a);
  return self;
}

}  // namespace

at::Tensor& fpga_fill_(const KernelRef& kernel, at::Tensor& self, const at::Scalar& value) {
  return fill(kernel, self, value);
}

// ATen's fill_ reads a 0-dim value tensor on the host; one on the device costs a sync of its bytes.
at::Tensor& fpga_fill_tensor_(const KernelRef& kernel, at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  return fill(kernel, self, value.item());
}

at::Tensor& fpga_zero_(const KernelRef& kernel, at::Tensor& self) { return fill(kernel, self, 0); }

}  // namespace aten_fpga
