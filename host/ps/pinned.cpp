#include "pinned.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "runtime.h"

namespace aten_fpga {
namespace {

struct Block {
  std::unique_ptr<Buffer> buffer;
  Device* device;
  std::vector<Fence> uses;  // queued copies from or into it (under the pool's lock)

  // Wait for them: the block is handed out again, or freed.
  void wait_uses() {
    for (const Fence& f : uses) device->wait_nothrow(f);
    uses.clear();
  }
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
      b->wait_uses();
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
    const Block* b = find_locked(address);
    if (b == nullptr) return {};
    return {b->buffer.get(), b->device, address - reinterpret_cast<uintptr_t>(b->buffer->host),
            b->buffer->bytes - (address - reinterpret_cast<uintptr_t>(b->buffer->host))};
  }

  void use(const void* p, const Fence& f) {
    std::lock_guard<std::mutex> g(mu_);
    if (Block* b = find_locked(reinterpret_cast<uintptr_t>(p))) {
      b->uses.erase(std::remove_if(b->uses.begin(), b->uses.end(), [](const Fence& u) { return u.done(); }),
                    b->uses.end());
      b->uses.push_back(f);
    }
  }

  void release_all() {
    std::multimap<size_t, Block*> victims;
    {
      std::lock_guard<std::mutex> g(mu_);
      victims.swap(free_);
    }
    for (auto& kv : victims) {
      kv.second->wait_uses();
      delete kv.second;
    }
  }

 private:
  // The live block that holds `address` (callers hold mu_).
  Block* find_locked(uintptr_t address) {
    auto it = live_.upper_bound(address);
    if (it == live_.begin()) return nullptr;
    --it;
    Block* b = it->second;
    return address - it->first < b->buffer->bytes ? b : nullptr;
  }

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

void use_pinned(const void* p, const Fence& f) { pool().use(p, f); }

c10::Allocator* pinned_allocator() {
  static PinnedAllocator allocator;
  return &allocator;
}

void empty_pinned_cache() { pool().release_all(); }

}  // namespace aten_fpga
