#include "allocator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "runtime.h"
#include "stats.h"

namespace aten_fpga {

const bool kSanitize = [] {
  const char* v = std::getenv("ATEN_FPGA_SANITIZE");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}();

bool ByteRanges::overlaps(size_t b, size_t e) const {
  for (const Range& r : ranges_) {
    if (r.begin >= e) break;
    if (r.end > b) return true;
  }
  return false;
}

void ByteRanges::add(size_t b, size_t e) {
  if (b >= e) return;
  // The ranges that meet or touch [b, e) merge with it into one.
  auto* first = std::find_if(ranges_.begin(), ranges_.end(), [&](const Range& r) { return r.end >= b; });
  auto* last = std::find_if(first, ranges_.end(), [&](const Range& r) { return r.begin > e; });
  if (first == last) {
    ranges_.insert(first, Range{b, e});
    return;
  }
  first->begin = std::min(first->begin, b);
  first->end = std::max((last - 1)->end, e);
  ranges_.erase(first + 1, last);
}

void ByteRanges::subtract(size_t b, size_t e) {
  if (b >= e) return;
  for (size_t i = 0; i < ranges_.size();) {
    Range& r = ranges_[i];
    if (r.begin >= e) break;
    if (r.end <= b) {
      ++i;
    } else if (r.begin < b && r.end > e) {  // [b, e) splits r in two
      const Range tail{e, r.end};
      r.end = b;
      ranges_.insert(ranges_.begin() + i + 1, tail);
      break;
    } else if (r.begin < b) {
      r.end = b;
      ++i;
    } else if (r.end > e) {
      r.begin = e;
      break;
    } else {
      ranges_.erase(ranges_.begin() + i);
    }
  }
}

namespace {

// A mark never leaves more ranges than this on one side: beyond, the gaps between them are made
// current on that side and joined (few ranges keep each coherence step cheap).
constexpr size_t kMaxRanges = 32;

// Poison bytes [offset, offset + n) of the side at `base`, the pattern in phase with the
// allocation's start (callers hold a->mu and checked kSanitize).
void poison_range(void* base, size_t offset, size_t n) {
  const unsigned shift = 8 * (offset % 8);
  const uint64_t phased = shift == 0 ? kPoison : (kPoison >> shift) | (kPoison << (64 - shift));
  fill_repeating(static_cast<char*>(base) + offset, n, phased);
}
void poison_host(Allocation* a, size_t offset, size_t n) { poison_range(a->buffer->host, offset, n); }
// Where the host cannot reach device memory (a card), the device side is not poisoned.
void poison_device(Allocation* a, size_t offset, size_t n) {
  if (void* device = a->device->device_address(*a->buffer)) poison_range(device, offset, n);
}

// [offset, offset + n) rounded out to whole port words, within the allocation.
std::pair<size_t, size_t> word_span(const Allocation* a, size_t offset, size_t n) {
  const size_t b = std::min(offset / kWordBytes * kWordBytes, a->requested);
  const size_t e = std::min((offset + n + kWordBytes - 1) / kWordBytes * kWordBytes, a->requested);
  return {b, e};
}

// Publish which of a's lists are non-empty (callers hold a->mu, after changing them).
void publish_stale_sides(Allocation* a) {
  a->stale_sides.store((a->host_stale.empty() ? 0 : Allocation::kHostStale) |
                           (a->device_stale.empty() ? 0 : Allocation::kDeviceStale),
                       std::memory_order_release);
}

// Move the bytes of [b, e) that `stale` lists to that side, and forget them there. Returns the
// bytes moved. Callers hold a->mu.
size_t sync_locked(Allocation* a, ByteRanges& stale, bool to_device, size_t b, size_t e) {
  if (stale.empty() || !stale.overlaps(b, e)) return 0;
  size_t moved = 0;
  for (const ByteRanges::Range& r : stale) {
    if (r.begin >= e) break;
    const size_t lo = std::max(r.begin, b), hi = std::min(r.end, e);
    if (lo >= hi) continue;
    if (to_device) {
      a->device->to_device(*a->buffer, lo, hi - lo);
    } else {
      a->device->to_host(*a->buffer, lo, hi - lo);
    }
    moved += hi - lo;
  }
  stale.subtract(b, e);
  publish_stale_sides(a);
  return moved;
}

void sync_range(Allocation* a, bool to_device, size_t offset, size_t n) {
  if (a == nullptr) return;
  // Nothing is stale on that side: nothing to move (the common case of a kernel's input).
  if (!(a->stale_sides.load(std::memory_order_acquire) & (to_device ? Allocation::kDeviceStale : Allocation::kHostStale))) {
    return;
  }
  size_t moved;
  {
    std::lock_guard<std::mutex> g(a->mu);
    const auto [b, e] = word_span(a, offset, n);
    moved = sync_locked(a, to_device ? a->device_stale : a->host_stale, to_device, b, e);
  }
  if (moved != 0) record_sync(to_device, static_cast<int64_t>(moved));
}

// Bytes [offset, offset + n) were written on the device (or on the host): they are current there
// alone. Moves bytes only to join too many ranges (kMaxRanges).
void mark_range(Allocation* a, bool device_written, size_t offset, size_t n) {
  if (a == nullptr) return;
  size_t moved = 0;
  {
    std::lock_guard<std::mutex> g(a->mu);
    const size_t b = std::min(offset, a->requested), e = std::min(offset + n, a->requested);
    ByteRanges& written = device_written ? a->device_stale : a->host_stale;  // where it is no longer stale
    ByteRanges& stale = device_written ? a->host_stale : a->device_stale;    // now stale on the other side
    written.subtract(b, e);
    stale.add(b, e);
    if (kSanitize) (device_written ? poison_host : poison_device)(a, b, e - b);
    if (stale.size() > kMaxRanges) {
      // Join: make the gaps current on the written side, then the whole span is newer there.
      const size_t lo = stale.front().begin, hi = stale.back().end;
      moved = sync_locked(a, written, device_written, lo, hi);
      stale.clear();
      stale.add(lo, hi);
      if (kSanitize) (device_written ? poison_host : poison_device)(a, lo, hi - lo);
    }
    publish_stale_sides(a);
  }
  if (moved != 0) record_sync(device_written, static_cast<int64_t>(moved));
}

}  // namespace

void give_back(void* ctx);

Allocation* allocation_of(const c10::StorageImpl& s) {
  const c10::DataPtr& p = s.data_ptr();
  if (p.get_deleter() == &give_back) return static_cast<Allocation*>(p.get_context());
  TORCH_CHECK(s.nbytes() == 0, "aten_fpga: this fpga tensor's memory (", s.nbytes(), " bytes at ", p.get(),
              ") was not allocated by aten_fpga: it was made elsewhere, e.g. by torch.from_dlpack of an fpga "
              "tensor or at::from_blob on \"fpga\", so there is no record of which side (host or device) holds its "
              "current bytes and it cannot be read or written. Use the original fpga tensor (a DLPack round trip "
              "gives no new memory), or exchange data through the CPU: torch.from_dlpack(t.cpu()).to(\"fpga\").");
  return nullptr;  // an empty storage: nothing to sync
}

std::pair<size_t, size_t> byte_span(const at::TensorBase& t) {
  return {byte_offset(t), at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size())};
}

void sync_to_device(Allocation* a, size_t offset, size_t n) { sync_range(a, true, offset, n); }
void sync_to_host(Allocation* a, size_t offset, size_t n) { sync_range(a, false, offset, n); }
void sync_to_device(Allocation* a) { sync_range(a, true, 0, SIZE_MAX / 2); }
void sync_to_host(Allocation* a) { sync_range(a, false, 0, SIZE_MAX / 2); }

void mark_device_written(Allocation* a, size_t offset, size_t n) { mark_range(a, true, offset, n); }
void mark_host_written(Allocation* a, size_t offset, size_t n) { mark_range(a, false, offset, n); }
void mark_device_written(Allocation* a) { mark_range(a, true, 0, SIZE_MAX / 2); }
void mark_host_written(Allocation* a) { mark_range(a, false, 0, SIZE_MAX / 2); }

namespace {
// n bytes from src to dst, which may sit at any offsets in their pages. glibc's memcpy of a large
// block (`rep movsb`) runs at a third of its speed when dst lies a few bytes past src modulo a page
// (measured on Zen 3: 256 MiB in 180 ms instead of 63) -- a CPU tensor's data against a
// page-aligned device buffer. ATen's vectorized copy runs at one speed whatever the offsets.
void copy_bytes(void* dst, const void* src, size_t n) {
  constexpr size_t kLarge = size_t(1) << 20;
  if (n < kLarge) {
    std::memcpy(dst, src, n);
    return;
  }
  const auto bytes = at::TensorOptions().dtype(at::kByte);
  const auto len = static_cast<int64_t>(n);
  at::from_blob(dst, {len}, bytes).copy_(at::from_blob(const_cast<void*>(src), {len}, bytes));
}
}  // namespace

void read_current(Allocation* a, size_t offset, size_t n, void* dst, Buffer* pinned, size_t pinned_offset) {
  char* device = static_cast<char*>(a->device->device_address(*a->buffer));
  if (device == nullptr && pinned == nullptr) {
    sync_to_host(a, offset, n);
    copy_bytes(dst, static_cast<char*>(a->buffer->host) + offset, n);
    return;
  }
  const char* host = static_cast<const char*>(a->buffer->host);
  char* out = static_cast<char*>(dst);
  int64_t booked = 0;
  {
    std::lock_guard<std::mutex> g(a->mu);
    // Alternate runs of host-current and device-newer bytes, in order.
    size_t at = offset;
    const size_t end = offset + n;
    for (const ByteRanges::Range& r : a->host_stale) {
      if (r.begin >= end) break;
      const size_t lo = std::max(r.begin, at), hi = std::min(r.end, end);
      if (lo >= hi) continue;
      copy_bytes(out + (at - offset), host + at, lo - at);
      if (pinned != nullptr) {
        a->device->copy_on_device(*pinned, pinned_offset + (lo - offset), *a->buffer, lo, hi - lo);
      } else {
        copy_bytes(out + (lo - offset), device + lo, hi - lo);
      }
      const auto [wb, we] = word_span(a, lo, hi - lo);
      booked += static_cast<int64_t>(we - wb);
      at = hi;
    }
    copy_bytes(out + (at - offset), host + at, end - at);
  }
  if (booked != 0) record_sync(false, booked);
}

void write_from_pinned(Allocation* a, size_t offset, size_t n, Buffer& pinned, size_t pinned_offset) {
  a->device->copy_on_device(*a->buffer, offset, pinned, pinned_offset, n);
  mark_device_written(a, offset, n);
  record_sync(true, static_cast<int64_t>(n));
}

void prepare_device_write(Allocation* a, size_t offset, size_t n) {
  if (a == nullptr) return;
  if (offset == 0 && n >= a->requested) return;  // every byte is overwritten
  sync_to_device(a);
}

void copy_valid_bytes(Allocation* dst, size_t dst_offset, Allocation* src, size_t src_offset, size_t n) {
  TORCH_INTERNAL_ASSERT(dst->device == src->device);
  bool on_host;
  {
    std::lock_guard<std::mutex> g(src->mu);
    // On the host only when the device copy is stale somewhere in the range and the shadow nowhere.
    on_host = src->device_stale.overlaps(src_offset, src_offset + n) &&
              !src->host_stale.overlaps(src_offset, src_offset + n);
  }
  if (on_host) {
    std::memcpy(static_cast<char*>(dst->buffer->host) + dst_offset,
                static_cast<char*>(src->buffer->host) + src_offset, n);
    mark_host_written(dst, dst_offset, n);
  } else {
    sync_to_device(src, src_offset, n);
    dst->device->copy_on_device(*dst->buffer, dst_offset, *src->buffer, src_offset, n);
    mark_device_written(dst, dst_offset, n);
  }
}

namespace {

constexpr size_t kSmallStep = 512;
constexpr size_t kSmallMax = size_t(1) << 20;
constexpr size_t kLargeStep = size_t(2) << 20;

size_t size_class(size_t n) {
  const size_t step = n <= kSmallMax ? kSmallStep : kLargeStep;
  return (n + step - 1) / step * step;
}

std::string format_bytes(int64_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

// One device's free lists and counters.
class BlockCache {
 public:
  BlockCache() : small_(kSmallMax / kSmallStep) {}

  // A cached allocation of size class `cls` for `requested` bytes, counted as allocated; or nullptr.
  Allocation* take(size_t cls, size_t requested) {
    std::lock_guard<std::mutex> g(mu_);
    auto& list = cls <= kSmallMax ? small_[cls / kSmallStep - 1] : large_[cls];
    if (list.empty()) return nullptr;
    Allocation* a = list.back();
    list.pop_back();
    a->requested = requested;
    stats_.cache_hits += 1;
    count_allocated(a, /*fresh=*/false);
    return a;
  }

  void give_back(Allocation* a) {
    std::lock_guard<std::mutex> g(mu_);
    const size_t cls = a->buffer->bytes;
    (cls <= kSmallMax ? small_[cls / kSmallStep - 1] : large_[cls]).push_back(a);
    stats_.allocated_bytes -= static_cast<int64_t>(cls);
    stats_.requested_bytes -= static_cast<int64_t>(a->requested);
    stats_.allocations -= 1;
    stats_.total_frees += 1;
  }

  // A fresh device buffer, allocated.
  void on_allocated(const Allocation* a) {
    std::lock_guard<std::mutex> g(mu_);
    count_allocated(a, /*fresh=*/true);
  }

  // Free every cached block (outside the lock: a device free may take a while).
  void release_all() {
    std::vector<Allocation*> victims;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& list : small_) victims.insert(victims.end(), list.begin(), list.end()), list.clear();
      for (auto& kv : large_) victims.insert(victims.end(), kv.second.begin(), kv.second.end());
      large_.clear();
      for (Allocation* a : victims) stats_.reserved_bytes -= static_cast<int64_t>(a->buffer->bytes);
      stats_.device_frees += static_cast<int64_t>(victims.size());
    }
    for (Allocation* a : victims) delete a;
  }

  void count_retry() { std::lock_guard<std::mutex> g(mu_); stats_.alloc_retries += 1; }
  void count_oom() { std::lock_guard<std::mutex> g(mu_); stats_.ooms += 1; }

  MemoryStats stats() {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
  }
  void reset_peaks() {
    std::lock_guard<std::mutex> g(mu_);
    stats_.allocated_bytes_peak = stats_.allocated_bytes;
    stats_.requested_bytes_peak = stats_.requested_bytes;
    stats_.reserved_bytes_peak = stats_.reserved_bytes;
    stats_.allocations_peak = stats_.allocations;
  }

 private:
  // Callers hold mu_.
  void count_allocated(const Allocation* a, bool fresh) {
    const auto cls = static_cast<int64_t>(a->buffer->bytes);
    if (fresh) {
      stats_.device_allocs += 1;
      stats_.reserved_bytes += cls;
      stats_.reserved_bytes_peak = std::max(stats_.reserved_bytes_peak, stats_.reserved_bytes);
    }
    stats_.allocated_bytes += cls;
    stats_.allocated_bytes_peak = std::max(stats_.allocated_bytes_peak, stats_.allocated_bytes);
    stats_.requested_bytes += static_cast<int64_t>(a->requested);
    stats_.requested_bytes_peak = std::max(stats_.requested_bytes_peak, stats_.requested_bytes);
    stats_.allocations += 1;
    stats_.allocations_peak = std::max(stats_.allocations_peak, stats_.allocations);
    stats_.total_allocations += 1;
  }

  std::mutex mu_;
  std::vector<std::vector<Allocation*>> small_;  // by class / 512 - 1
  std::map<size_t, std::vector<Allocation*>> large_;
  MemoryStats stats_;
};

BlockCache& cache(int device_index) {
  // Never destroyed: tensors may be freed after static destruction began.
  static auto* caches = [] {
    auto* v = new std::vector<std::unique_ptr<BlockCache>>();
    for (int i = 0; i < device_count(); ++i) v->push_back(std::make_unique<BlockCache>());
    return v;
  }();
  return *(*caches)[device_index];
}


// A new device buffer of `cls` bytes; when the device is full, free its cache and retry once.
std::unique_ptr<Buffer> new_buffer(Device& d, int index, size_t cls, size_t requested) {
  BlockCache& c = cache(index);
  try {
    return d.allocate(cls);
  } catch (const c10::OutOfMemoryError&) {
    c.count_retry();
    c.release_all();
  }
  try {
    return d.allocate(cls);
  } catch (const c10::OutOfMemoryError& e) {
    c.count_oom();
    const MemoryStats s = c.stats();
    TORCH_CHECK_WITH(OutOfMemoryError, false, "fpga:", index, " out of memory: tried to allocate ",
                     format_bytes(static_cast<int64_t>(requested)), " (", requested, " bytes, a block of ", cls,
                     "); tensors on this device hold ", format_bytes(s.allocated_bytes), " of its ",
                     format_bytes(static_cast<int64_t>(d.capacity())),
                     ", and its cache of freed blocks was released before a retry. Free tensors you no longer "
                     "need; for the emulated device, ATEN_FPGA_EMU_MEMORY sets its memory in bytes. (",
                     e.what_without_backtrace(), ")");
  }
  return nullptr;  // unreachable
}

class FpgaAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex index = current_device();
    const c10::Device dev(c10::DeviceType::PrivateUse1, index);
    if (nbytes == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, dev};
    const size_t cls = size_class(nbytes);
    BlockCache& c = cache(index);
    Allocation* a = c.take(cls, nbytes);
    if (a == nullptr) {
      Device& d = device(index);
      auto buffer = new_buffer(d, index, cls, nbytes);
      a = new Allocation();
      a->buffer = std::move(buffer);
      a->device = &d;
      a->device_index = index;
      a->requested = nbytes;
      c.on_allocated(a);
    }
    a->host_stale.clear();  // neither side holds anything yet
    a->device_stale.clear();
    a->stale_sides.store(0, std::memory_order_release);
    if (kSanitize) {  // nor does either side hold what an earlier tensor left in the block
      poison_host(a, 0, a->buffer->bytes);
      poison_device(a, 0, a->buffer->bytes);
    }
    return {a->buffer->host, a, &give_back, dev};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

// Outside the anonymous namespace: allocation_of recognizes this allocator's storages by it.
void give_back(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  cache(a->device_index).give_back(a);
}

c10::Allocator* fpga_allocator() {
  static FpgaAllocator allocator;
  return &allocator;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, fpga_allocator());

MemoryStats memory_stats(int device) {
  check_device_index(device);
  return cache(device).stats();
}

void reset_peak_memory_stats(int device) {
  check_device_index(device);
  cache(device).reset_peaks();
}

void empty_cache() {
  for (int i = 0; i < device_count(); ++i) cache(i).release_all();
}

}  // namespace aten_fpga
