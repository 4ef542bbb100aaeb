// The minimal ops of a device: creating tensors, viewing them and resizing their storage. Views
// share the allocation (and so its coherence state); growing a storage keeps its bytes.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "allocator.h"
#include "runtime.h"
#include "stats.h"
#include "structured.h"

namespace aten_fpga {
namespace {

constexpr c10::DispatchKeySet kFpgaKeys{c10::DispatchKey::PrivateUse1};

c10::Device fpga_device(std::optional<c10::Device> d) {
  if (d.has_value() && d->has_index()) return *d;
  return c10::Device(c10::DeviceType::PrivateUse1, current_device());
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false), "pin_memory is for CPU tensors, not fpga tensors");
  return empty_fpga(size, {}, at::TensorOptions().dtype(dtype).device(device).memory_format(memory_format));
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "pin_memory is for CPU tensors, not fpga tensors");
  // Not empty_fpga, whose empty strides mean contiguous: ATen refuses strides of another length.
  c10::DeviceGuard guard(fpga_device(device));
  return at::detail::empty_strided_generic(size, stride, fpga_allocator(), kFpgaKeys,
                                           c10::dtype_or_default(dtype));
}

// Grow a storage to at least `bytes`, keeping its contents on the side where they are valid
// (device to device when the device copy is current: no round trip through the host).
void maybe_grow_storage(c10::TensorImpl* self, size_t bytes) {
  c10::StorageImpl* storage = self->unsafe_storage().unsafeGetStorageImpl();
  if (bytes <= storage->nbytes()) return;
  static OpStats& stats = op_stats("resize_");
  OpScope scope(stats);
  c10::DeviceGuard guard(self->device());
  c10::DataPtr fresh = fpga_allocator()->allocate(bytes);
  Allocation* old = allocation_of(*storage);
  if (old != nullptr && storage->nbytes() > 0) {
    copy_valid_bytes(static_cast<Allocation*>(fresh.get_context()), 0, old, 0, storage->nbytes());
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(bytes);
}

void resize_impl(c10::TensorImpl* self, at::IntArrayRef size, at::OptionalIntArrayRef stride) {
  if (self->sizes() == size && (!stride || self->strides() == *stride)) return;
  const auto itemsize = self->dtype().itemsize();
  const auto offset = self->storage_offset();
  size_t bytes;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    bytes = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    self->set_sizes_contiguous(size);
    bytes = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  maybe_grow_storage(self, bytes);
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  resize_impl(self.unsafeGetTensorImpl(), size, std::nullopt);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "unsupported memory format ", *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, at::Storage source, int64_t offset, at::IntArrayRef size,
                               at::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  resize_impl(self.unsafeGetTensorImpl(), size,
              stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (!self.is_same(source)) {
    set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
  }
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  at::Storage empty(at::Storage::use_byte_size_t(), 0, fpga_allocator(), /*resizable=*/true);
  return set_storage_offset(self, empty, 0, {0}, {});
}

}  // namespace

at::Tensor empty_fpga(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  c10::DeviceGuard guard(fpga_device(options.device_opt()));  // the allocator serves the current device
  const at::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
  if (strides.empty()) {
    return at::detail::empty_generic(sizes, fpga_allocator(), kFpgaKeys, dtype, options.memory_format_opt());
  }
  return at::detail::empty_strided_generic(sizes, strides, fpga_allocator(), kFpgaKeys, dtype);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  // View ops whose only kernels are per backend (a view cannot fall back: its result must alias
  // its input); ATen's own restride the input's storage, whatever its device.
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
}

}  // namespace aten_fpga
