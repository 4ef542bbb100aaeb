// Copies across and within devices, honouring each allocation's coherence state. CPU <-> fpga
// goes through the host shadow (the device side is synced lazily, when a kernel needs it), except
// dense byte copies: those read device-newer bytes straight into the CPU tensor, and those from
// or to pinned memory move between it and the device copy (docs/runtime.md, "Transfers");
// fpga -> fpga runs on the device: a dense copy of one dtype is a device-to-device block copy
// (a DMA on a card), any other (strided, broadcast, casting) is a strided copy kernel
// (kernels/hls/copy, host/ps/fpga_copy.cpp). Only copies the image has no kernel for (other
// dtypes) and copies between two devices go through the host.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <torch/library.h>

#include "fpga_copy.h"
#include "pinned.h"
#include "stats.h"
#include "tensor_views.h"

namespace aten_fpga {
namespace {

// Syncs only the bytes a view spans: `.cpu()` of x[i] moves a port word, not x's allocation.
void sync_span_to_host(const at::Tensor& t) {
  const auto [off, n] = byte_span(t);
  sync_to_host(allocation_of(t), off, n);
}

// Two tensors of the same dtype and layout, dense: the copy moves bytes. Between an fpga and a CPU
// tensor it goes straight between the device copy and the CPU tensor where it can (read_current,
// write_from_pinned), the host shadow untouched.
bool is_byte_copy(const at::Tensor& src, const at::Tensor& dst) {
  return src.scalar_type() == dst.scalar_type() && src.is_conj() == dst.is_conj() && src.is_neg() == dst.is_neg() &&
         src.is_non_overlapping_and_dense() && src.strides().equals(dst.strides()) &&
         src.sizes().equals(dst.sizes());
}

// The pinned memory, of a's device, that holds a CPU tensor's bytes (null buffer: none).
PinnedRef pinned_bytes(const at::Tensor& cpu, const Allocation* a) {
  const PinnedRef p = find_pinned(cpu.const_data_ptr());
  return p.buffer != nullptr && p.device == a->device && p.size >= cpu.nbytes() ? p : PinnedRef{};
}

void copy_into_fpga_from_host(const at::Tensor& dst, const at::Tensor& cpu_src) {
  Allocation* d = allocation_of(dst);
  const auto [off, n] = byte_span(dst);
  if (is_byte_copy(cpu_src, dst)) {
    // From pinned memory the bytes go to the device (a DMA); from pageable memory into the host
    // shadow, to the device when a kernel first reads them.
    if (const PinnedRef p = pinned_bytes(cpu_src, d); p.buffer != nullptr) {
      write_from_pinned(d, off, n, *p.buffer, p.offset);
      return;
    }
  }
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
    if (is_byte_copy(self, dst)) {
      Allocation* a = allocation_of(self);
      const PinnedRef p = pinned_bytes(dst, a);
      read_current(a, byte_offset(self), self.nbytes(), dst.data_ptr(), p.buffer, p.offset);
    } else {
      sync_span_to_host(self);
      dst.copy_(host_alias(self));
    }
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
