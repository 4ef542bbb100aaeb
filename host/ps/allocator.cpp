#include "allocator.h"

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

namespace {
// Poison the side of `a` that just became stale (callers hold a->mu and checked kSanitize).
void poison_host(Allocation* a) { fill_repeating(a->buffer->host, a->requested, kPoison); }
void poison_device(Allocation* a) { a->device->poison(*a->buffer, a->requested, kPoison); }
}  // namespace

Allocation* allocation_of(const at::TensorBase& t) {
  return static_cast<Allocation*>(t.storage().data_ptr().get_context());
}

void sync_to_device(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  if (a->valid == Allocation::Valid::Host) {
    a->device->to_device(*a->buffer, 0, a->requested);
    a->valid = Allocation::Valid::Both;
    record_sync(/*to_device=*/true, static_cast<int64_t>(a->requested));
  }
}

void sync_to_host(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  if (a->valid == Allocation::Valid::Device) {
    a->device->to_host(*a->buffer, 0, a->requested);
    a->valid = Allocation::Valid::Both;
    record_sync(/*to_device=*/false, static_cast<int64_t>(a->requested));
  }
}

void mark_device_written(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  a->valid = Allocation::Valid::Device;
  if (kSanitize) poison_host(a);
}

void mark_host_written(Allocation* a) {
  if (a == nullptr) return;
  std::lock_guard<std::mutex> g(a->mu);
  a->valid = Allocation::Valid::Host;
  if (kSanitize) poison_device(a);
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

void copy_valid_bytes(Allocation* dst, size_t dst_offset, Allocation* src, size_t src_offset, size_t n) {
  TORCH_INTERNAL_ASSERT(dst->device == src->device);
  Allocation::Valid side;
  {
    std::lock_guard<std::mutex> g(src->mu);
    side = src->valid;
  }
  if (side == Allocation::Valid::Host) {
    prepare_host_write(dst, dst_offset, n);
    std::memcpy(static_cast<char*>(dst->buffer->host) + dst_offset,
                static_cast<char*>(src->buffer->host) + src_offset, n);
    mark_host_written(dst);
  } else {
    prepare_device_write(dst, dst_offset, n);
    dst->device->copy_on_device(*dst->buffer, dst_offset, *src->buffer, src_offset, n);
    mark_device_written(dst);
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

  // A cached allocation of size class `cls`, or nullptr.
  Allocation* take(size_t cls) {
    std::lock_guard<std::mutex> g(mu_);
    auto& list = cls <= kSmallMax ? small_[cls / kSmallStep - 1] : large_[cls];
    if (list.empty()) return nullptr;
    Allocation* a = list.back();
    list.pop_back();
    stats_.cache_hits += 1;
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

  void on_allocated(const Allocation* a, bool fresh) {
    std::lock_guard<std::mutex> g(mu_);
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

void give_back(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  cache(a->device_index).give_back(a);
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
    Allocation* a = c.take(cls);
    const bool fresh = a == nullptr;
    if (fresh) {
      Device& d = device(index);
      auto buffer = new_buffer(d, index, cls, nbytes);
      a = new Allocation();
      a->buffer = std::move(buffer);
      a->device = &d;
      a->device_index = index;
    }
    a->requested = nbytes;
    a->valid = Allocation::Valid::Both;  // neither side holds anything yet
    if (kSanitize) {  // nor does either side hold what an earlier tensor left in the block
      fill_repeating(a->buffer->host, a->buffer->bytes, kPoison);
      a->device->poison(*a->buffer, a->buffer->bytes, kPoison);
    }
    c.on_allocated(a, fresh);
    return {a->buffer->host, a, &give_back, dev};
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
