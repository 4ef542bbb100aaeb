#include "pinned.h"

#include <c10/util/Exception.h>

#include <map>
#include <memory>
#include <mutex>

#include "runtime.h"

namespace aten_fpga {
namespace {

struct Block {
  std::unique_ptr<Buffer> buffer;
  Device* device;
};

// Freed blocks are kept and handed out again (a DataLoader pins every batch, of the same sizes):
// a request takes the smallest cached block of its device that fits and wastes at most half of it.
class PinnedPool {
 public:
  Block* take(size_t bytes) {
    Device* d = &device(current_device());
    std::lock_guard<std::mutex> g(mu_);
    for (auto it = free_.lower_bound(bytes); it != free_.end() && it->first <= 2 * bytes; ++it) {
      if (it->second->device != d) continue;
      Block* b = it->second;
      free_.erase(it);
      live_.emplace(reinterpret_cast<uintptr_t>(b->buffer->host), b);
      return b;
    }
    return nullptr;
  }

  Block* make(size_t bytes) {
    Device& d = device(current_device());
    auto* b = new Block{d.allocate_pinned(bytes), &d};
    std::lock_guard<std::mutex> g(mu_);
    live_.emplace(reinterpret_cast<uintptr_t>(b->buffer->host), b);
    return b;
  }

  void give_back(Block* b) {
    std::lock_guard<std::mutex> g(mu_);
    live_.erase(reinterpret_cast<uintptr_t>(b->buffer->host));
    free_.emplace(b->buffer->bytes, b);
  }

  PinnedRef find(const void* p) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> g(mu_);
    auto it = live_.upper_bound(address);
    if (it == live_.begin()) return {};
    --it;
    const Block* b = it->second;
    const size_t offset = address - it->first;
    if (offset >= b->buffer->bytes) return {};
    return {b->buffer.get(), b->device, offset, b->buffer->bytes - offset};
  }

  void release_all() {
    std::multimap<size_t, Block*> victims;
    {
      std::lock_guard<std::mutex> g(mu_);
      victims.swap(free_);
    }
    for (auto& kv : victims) delete kv.second;
  }

 private:
  std::mutex mu_;
  std::map<uintptr_t, Block*> live_;  // by host address
  std::multimap<size_t, Block*> free_;  // by size
};

PinnedPool& pool() {
  static auto* p = new PinnedPool();  // never destroyed: pinned tensors may outlive static destruction
  return *p;
}

void free_pinned(void* ctx) { pool().give_back(static_cast<Block*>(ctx)); }

// Page-multiple blocks: what a DMA engine maps.
constexpr size_t kPage = 4096;

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, cpu};
    const size_t bytes = (nbytes + kPage - 1) / kPage * kPage;
    Block* b = pool().take(bytes);
    if (b == nullptr) b = pool().make(bytes);
    return {b->buffer->host, b, &free_pinned, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

}  // namespace

PinnedRef find_pinned(const void* p) { return pool().find(p); }

c10::Allocator* pinned_allocator() {
  static PinnedAllocator allocator;
  return &allocator;
}

void empty_pinned_cache() { pool().release_all(); }

}  // namespace aten_fpga
