// Device memory for tensors, and per-allocation coherence between the host shadow and the device
// copy. A tensor's data_ptr is its buffer's host shadow; the Allocation (the DataPtr's context)
// records which side holds the valid bytes, so each side is synced only when the other is newer.
#pragma once

#include <ATen/core/TensorBase.h>
#include <c10/core/Allocator.h>

#include <mutex>

#include "device.h"

namespace aten_fpga {

struct Allocation {
  enum class Valid : uint8_t { Both, Host, Device };
  std::unique_ptr<Buffer> buffer;
  Device* device;
  int device_index;
  size_t requested;  // bytes asked for; the buffer may be padded past this
  Valid valid = Valid::Both;
  std::mutex mu;
};

// The allocation behind an fpga tensor's storage (nullptr for an empty storage).
Allocation* allocation_of(const at::TensorBase& t);

// Make the device copy current (host -> device if the host is newer).
void sync_to_device(Allocation* a);
// Make the host shadow current (device -> host if the device is newer).
void sync_to_host(Allocation* a);
// After writing: the side that was written becomes the only valid one.
void mark_device_written(Allocation* a);
void mark_host_written(Allocation* a);

// Prepare to write bytes [offset, offset + n) of `a` on one side: a write that covers the whole
// allocation needs no sync first, a partial one must not lose the rest of the bytes.
void prepare_device_write(Allocation* a, size_t offset, size_t n);
void prepare_host_write(Allocation* a, size_t offset, size_t n);

c10::Allocator* fpga_allocator();

// Every buffer is padded to a whole number of 512-bit words, so a vectorized kernel may read and
// write the last word of a tensor that ends at the allocation's end.
constexpr size_t kWordBytes = 64;

}  // namespace aten_fpga
