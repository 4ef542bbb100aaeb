// Copies across and within devices, honouring each allocation's coherence state. CPU <-> fpga
// goes through the host shadow (the device side is synced lazily, when a kernel needs it);
// fpga -> fpga runs on the device: a dense copy of one dtype is a device-to-device block copy
// (a DMA on a card), any other (strided, broadcast, casting) is a strided copy kernel
// (kernels/hls/copy, host/ps/fpga_copy.cpp). Only copies the image has no kernel for (other
// dtypes) and copies between two devices go through the host.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <torch/library.h>

#include "fpga_copy.h"
#include "stats.h"
#include "tensor_views.h"

namespace aten_fpga {
namespace {

// Syncs only the bytes a view spans: `.cpu()` of x[i] moves a port word, not x's allocation.
void sync_span_to_host(const at::Tensor& t) {
  const auto [off, n] = byte_span(t);
  sync_to_host(allocation_of(t), off, n);
}

void copy_into_fpga_from_host(const at::Tensor& dst, const at::Tensor& cpu_src) {
  Allocation* d = allocation_of(dst);
  const auto [off, n] = byte_span(dst);
  // A destination with gaps (a diagonal, a strided slice) does not overwrite its span: the bytes
  // between its elements must be current on the host before it is written there.
  if (!dst.is_non_overlapping_and_dense()) sync_to_host(d, off, n);
  host_alias(dst).copy_(cpu_src);
  mark_host_written(d, off, n);
}

void copy_fpga_to_fpga(const at::Tensor& src, const at::Tensor& dst) {
  try {
    device_copy(dst, src);
  } catch (const KernelUnavailable&) {
    sync_span_to_host(src);
    copy_into_fpga_from_host(dst, host_alias(src));
  }
}

}  // namespace

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  static OpStats& stats = op_stats("_copy_from");
  OpScope scope(stats);
  if (dst.numel() == 0) return dst;
  const bool src_fpga = self.is_privateuseone();
  const bool dst_fpga = dst.is_privateuseone();
  if (src_fpga && !dst_fpga) {
    sync_span_to_host(self);
    dst.copy_(host_alias(self));
  } else if (!src_fpga && dst_fpga) {
    copy_into_fpga_from_host(dst, self);
  } else {
    TORCH_CHECK(src_fpga && dst_fpga, "_copy_from: neither tensor is on fpga");
    copy_fpga_to_fpga(self, dst);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  static OpStats& stats = op_stats("_local_scalar_dense");
  OpScope scope(stats);
  sync_span_to_host(self);
  return at::_local_scalar_dense(host_alias(self));
}

// A conjugated or negated tensor reaches _copy_from as it is (copy_from resolves the bits on the
// CPU): the Conjugate and Negative fallbacks would materialize it with a clone, which copies, which
// calls _copy_from again.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace aten_fpga
