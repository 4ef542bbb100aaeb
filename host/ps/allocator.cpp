#include "allocator.h"

#include <c10/core/CPUAllocator.h>

#include "runtime.h"

namespace aten_fpga {

Allocation* allocation_of(const at::TensorBase& t) {
  return static_cast<Allocation*>(t.storage().data_ptr().get_context());
}

void sync_to_device(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  if (a->valid == Allocation::Valid::Host) {
    a->device->to_device(*a->buffer, 0, a->requested);
    a->valid = Allocation::Valid::Both;
  }
}

void sync_to_host(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  if (a->valid == Allocation::Valid::Device) {
    a->device->to_host(*a->buffer, 0, a->requested);
    a->valid = Allocation::Valid::Both;
  }
}

void mark_device_written(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  a->valid = Allocation::Valid::Device;
}

void mark_host_written(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  a->valid = Allocation::Valid::Host;
}

void prepare_device_write(Allocation* a, size_t offset, size_t n) {
  if (a == nullptr) return;
  if (offset == 0 && n >= a->requested) return;  // every byte is overwritten
  sync_to_device(a);
}

void prepare_host_write(Allocation* a, size_t offset, size_t n) {
  if (a == nullptr) return;
  if (offset == 0 && n >= a->requested) return;
  sync_to_host(a);
}

namespace {

void delete_allocation(void* ctx) { delete static_cast<Allocation*>(ctx); }

class FpgaAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex index = current_device();
    const c10::Device dev(c10::DeviceType::PrivateUse1, index);
    if (nbytes == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, dev};
    Device& d = device(index);
    auto* a = new Allocation();
    try {
      a->buffer = d.allocate((nbytes + kWordBytes - 1) / kWordBytes * kWordBytes);
    } catch (...) {
      delete a;
      throw;
    }
    a->device = &d;
    a->device_index = index;
    a->requested = nbytes;
    return {a->buffer->host, a, &delete_allocation, dev};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

c10::Allocator* fpga_allocator() {
  static FpgaAllocator allocator;
  return &allocator;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, fpga_allocator());

}  // namespace aten_fpga
