// Device memory for tensors: a caching allocator per device, and per-allocation coherence between
// the host shadow and the device copy. A tensor's data_ptr is its buffer's host shadow; the
// Allocation (the DataPtr's context) records which side holds the valid bytes, so each side is
// synced only when the other is newer.
//
// Freed blocks are kept per device in free lists by size class (512-byte steps up to 1 MiB, then
// 2 MiB steps) and handed out again for the same class, so a training loop stops allocating
// device buffers after its first step. When the device is full, the allocator frees the device's
// cache and retries once before raising torch.OutOfMemoryError.
#pragma once

#include <ATen/core/TensorBase.h>
#include <c10/core/Allocator.h>

#include <mutex>

#include "device.h"

namespace aten_fpga {

struct Allocation {
  enum class Valid : uint8_t { Both, Host, Device };
  std::unique_ptr<Buffer> buffer;  // buffer->bytes is the block's size class
  Device* device;
  int device_index;
  size_t requested;  // bytes asked for; the block may be larger
  Valid valid = Valid::Both;
  std::mutex mu;
};

// The allocation behind an fpga tensor's storage (nullptr for an empty storage).
Allocation* allocation_of(const at::TensorBase& t);
// Where a tensor's first element sits in its allocation, in bytes.
inline size_t byte_offset(const at::TensorBase& t) { return t.storage_offset() * t.element_size(); }

// The coherence sanitizer, ATEN_FPGA_SANITIZE=1 (read once at startup): while one side of an
// allocation is newer, the other holds kPoison, so code that reads a side without syncing it first
// computes with NaNs (or, for integers, a fixed byte pattern) instead of stale values that may look
// right. The host shadow is poisoned while the device copy is newer; on the emulator the device copy
// too while the host shadow is newer, and both sides of a new allocation. Off, it costs one test of a
// constant bool per coherence transition.
extern const bool kSanitize;
// Read as float64 a signalling NaN; as float32 alternately a signalling and a quiet NaN; as bfloat16
// and float16 NaNs (no 16-bit pattern can be a signalling NaN of both and of float64 at once).
constexpr uint64_t kPoison = 0x7FF47FA07FA07FA0ull;

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

// Copy n bytes from `src` to `dst` (allocations on the same device) on the side where `src` is
// valid: device to device when the device copy is current, else host to host.
void copy_valid_bytes(Allocation* dst, size_t dst_offset, Allocation* src, size_t src_offset, size_t n);

c10::Allocator* fpga_allocator();

// Every block is a whole number of 512-bit words (a size class is), so a vectorized kernel may
// read and write the last word of a tensor that ends at the allocation's end.
constexpr size_t kWordBytes = 64;

// The caching allocator's counters for one device (bytes, and counts of allocations).
struct MemoryStats {
  int64_t allocated_bytes = 0, allocated_bytes_peak = 0;  // blocks held by tensors
  int64_t requested_bytes = 0, requested_bytes_peak = 0;  // what the tensors asked for
  int64_t reserved_bytes = 0, reserved_bytes_peak = 0;    // device buffers: in use + cached
  int64_t allocations = 0, allocations_peak = 0;
  int64_t total_allocations = 0, total_frees = 0;
  int64_t cache_hits = 0;                 // allocations served from the cache
  int64_t device_allocs = 0, device_frees = 0;
  int64_t alloc_retries = 0;              // the cache was freed to make room
  int64_t ooms = 0;                       // allocations that failed after that
};
MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
// Return every cached block of every device to its device.
void empty_cache();

}  // namespace aten_fpga
