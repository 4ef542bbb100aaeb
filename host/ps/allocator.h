// Device memory for tensors: a caching allocator per device, and coherence between the host
// shadow and the device copy of each allocation, tracked per byte range. A tensor's data_ptr is
// its buffer's host shadow; the Allocation (the DataPtr's context) records which byte ranges are
// newer on one side, so a sync moves only the stale bytes a reader asks for (`.cpu()` of one
// element of a large tensor moves one port word, not the allocation).
//
// Freed blocks are kept per device in free lists by size class (512-byte steps up to 1 MiB, then
// 2 MiB steps) and handed out again for the same class, so a training loop stops allocating
// device buffers after its first step. When the device is full, the allocator frees the device's
// cache and retries once before raising torch.OutOfMemoryError.
#pragma once

#include <ATen/core/TensorBase.h>
#include <c10/core/Allocator.h>

#include <c10/util/SmallVector.h>

#include <atomic>
#include <mutex>

#include "device.h"

namespace aten_fpga {

// Disjoint, sorted, non-adjacent byte ranges [begin, end).
class ByteRanges {
 public:
  struct Range {
    size_t begin, end;
  };
  bool empty() const { return ranges_.empty(); }
  size_t size() const { return ranges_.size(); }
  const Range* begin() const { return ranges_.begin(); }
  const Range* end() const { return ranges_.end(); }
  const Range& front() const { return ranges_.front(); }
  const Range& back() const { return ranges_.back(); }
  void clear() { ranges_.clear(); }
  // Does any range meet [b, e)?
  bool overlaps(size_t b, size_t e) const;
  void add(size_t b, size_t e);       // union with [b, e)
  void subtract(size_t b, size_t e);  // difference with [b, e)

 private:
  c10::SmallVector<Range, 2> ranges_;
};

// A byte of an allocation is current on both sides, or newer on one: `host_stale` holds the
// ranges the device copy alone holds (a kernel wrote them), `device_stale` those the host shadow
// alone holds (a CPU write). The two never overlap; both empty means everything agrees.
struct Allocation {
  std::unique_ptr<Buffer> buffer;  // buffer->bytes is the block's size class
  Device* device;
  int device_index;
  size_t requested;  // bytes asked for; the block may be larger
  ByteRanges host_stale, device_stale;
  std::mutex mu;
  // Which lists are non-empty (kHostStale, kDeviceStale), published with them under mu: a sync
  // that has nothing to move (an input current on the device) returns without taking the lock.
  std::atomic<unsigned> stale_sides{0};
  static constexpr unsigned kHostStale = 1, kDeviceStale = 2;
};

// The allocation behind an fpga tensor's storage (nullptr for an empty storage). A storage this
// allocator did not make (torch.from_dlpack of an fpga tensor, at::from_blob on "fpga") has no
// coherence record to sync by: an error naming it, rather than its context read as one.
Allocation* allocation_of(const c10::StorageImpl& s);
inline Allocation* allocation_of(const at::TensorBase& t) { return allocation_of(*t.storage().unsafeGetStorageImpl()); }
// Where a tensor's first element sits in its allocation, in bytes.
inline size_t byte_offset(const at::TensorBase& t) { return t.storage_offset() * t.element_size(); }
// The bytes [offset, offset + extent) of its allocation that a tensor (a view) may touch.
std::pair<size_t, size_t> byte_span(const at::TensorBase& t);

// The coherence sanitizer, ATEN_FPGA_SANITIZE=1 (read once at startup): while a byte range of an
// allocation is newer on one side, the other side holds kPoison there (the pattern repeated from the
// allocation's start), so code that reads a side without syncing it first computes with NaNs (or,
// for integers, a fixed byte pattern) instead of stale values that may look right. The host shadow
// is poisoned where the device copy is newer; on the emulator the device copy too where the host
// shadow is newer, and both sides of a new allocation. Off, it costs one test of a constant bool per
// coherence transition.
extern const bool kSanitize;
// Read as float64 a signalling NaN; as float32 alternately a signalling and a quiet NaN; as bfloat16
// and float16 NaNs (no 16-bit pattern can be a signalling NaN of both and of float64 at once).
constexpr uint64_t kPoison = 0x7FF47FA07FA07FA0ull;

// Make bytes [offset, offset + n) current on one side, moving only the stale ones (rounded out to
// whole 64-byte port words, which a vectorized kernel reads). Without a range: the whole
// allocation.
void sync_to_device(Allocation* a, size_t offset, size_t n);
void sync_to_host(Allocation* a, size_t offset, size_t n);
void sync_to_device(Allocation* a);
void sync_to_host(Allocation* a);
// Copy the current bytes [offset, offset + n) of `a` into host memory at `dst`, each from the side
// that holds it, and leave the allocation's state as it was. The device-newer bytes go straight
// into `dst` where the device can write it -- pinned memory of a's device (`pinned`, `dst` at
// `pinned_offset` in it: a card's DMA), or any memory where the host addresses device memory (the
// emulator): one copy, not one into the host shadow and a second out of it. Elsewhere they are
// synced into the shadow first. Booked like a sync of the same bytes (whole port words).
void read_current(Allocation* a, size_t offset, size_t n, void* dst, Buffer* pinned, size_t pinned_offset);
// Write n bytes of pinned memory (`pinned` from `pinned_offset`, of a's device) into bytes
// [offset, offset + n) of `a` on the device, as a DMA: they are then newer there. Booked as a sync.
void write_from_pinned(Allocation* a, size_t offset, size_t n, Buffer& pinned, size_t pinned_offset);
// After writing every byte of [offset, offset + n) on one side: that side alone holds them; the
// rest keep their state. A write with gaps (a strided view) syncs its span to the side it writes
// first and marks the span. Without a range: the whole allocation (after prepare_*_write).
void mark_device_written(Allocation* a, size_t offset, size_t n);
void mark_host_written(Allocation* a, size_t offset, size_t n);
void mark_device_written(Allocation* a);
void mark_host_written(Allocation* a);

// For drivers that mark the whole allocation written after writing bytes [offset, offset + n) on the
// device: a write that covers the whole allocation needs no sync first, a partial one makes the
// rest current on the device.
void prepare_device_write(Allocation* a, size_t offset, size_t n);

// Copy n bytes from `src` to `dst` (allocations on the same device) on the side where those bytes
// of `src` are current: device to device unless only the host shadow holds some of them.
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
