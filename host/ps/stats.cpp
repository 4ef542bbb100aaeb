#include "stats.h"

#include <c10/macros/Macros.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "runtime.h"
#include "thread_state.h"

namespace aten_fpga {

// This thread's accounting target, and fpga_kernel's bookings not yet given to an op.
struct ThreadAccount {
  OpStats* scope = nullptr;
  bool in_kernel = false;
  int64_t pending_ns = 0, pending_to_device = 0, pending_to_host = 0;
  c10::SmallVector<int64_t, 4> pending_bytes;  // per pending launch: device memory it spans
  c10::SmallVector<int64_t, 4> pending_work;   // per pending launch: its work (launch_work)
  std::vector<std::pair<size_t, LaunchSizes>> pending_sizes;  // (launch index, sizes) while recorded
  c10::SmallVector<const std::string*, 4> pending_launches;  // kernel names
  int64_t epoch = 0;  // launches so far
  // The counters (OpStats::kernels values) this thread last booked launches to, by op and kernel
  // name (the image's string: its address identifies it while that image is loaded), so a booking
  // neither searches the map nor takes its lock.
  struct Slot {
    const OpStats* op;
    const std::string* kernel;
    uint64_t generation;
    KernelCounts* count;
  };
  Slot slots[8] = {};
  unsigned next_slot = 0;
};

namespace {
std::mutex mu;
std::unordered_map<std::string, std::unique_ptr<OpStats>>& table() {
  static auto* t = new std::unordered_map<std::string, std::unique_ptr<OpStats>>();
  return *t;
}

// Each thread's account, made on its first use (one TLS lookup per access).
inline ThreadAccount& account() { return ThreadState<ThreadAccount>::get(); }

std::atomic<bool> sizes_on{false};
std::vector<std::vector<std::string>> specs;

// The launch counters of `kernel` in op `s`.
KernelCounts& kernel_count(ThreadAccount& a, OpStats& s, const std::string* kernel) {
  const uint64_t generation = image_generation();
  for (const ThreadAccount::Slot& slot : a.slots) {
    if (slot.op == &s && slot.kernel == kernel && slot.generation == generation) return *slot.count;
  }
  std::lock_guard<std::mutex> g(s.kernels_mu);
  KernelCounts& count = s.kernels.try_emplace(*kernel).first->second;
  a.slots[a.next_slot++ % 8] = {&s, kernel, generation, &count};
  return count;
}

// The syncs of a kernel that failed midway, and any outside every op, still count somewhere.
OpStats& unattributed() {
  static OpStats& s = op_stats("(outside ops)");
  return s;
}
}  // namespace

void set_work_specs(std::vector<std::vector<std::string>> s) { specs = std::move(s); }
const std::vector<std::vector<std::string>>& work_specs() { return specs; }
void set_record_sizes(bool on) { sizes_on.store(on, std::memory_order_relaxed); }
bool record_sizes() { return sizes_on.load(std::memory_order_relaxed); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

void RunCounter::book_pending(size_t first_launch) {
  book_pending(account(), first_launch);
}

void RunCounter::book_pending(ThreadAccount& a, size_t first_launch) {
  if (a.pending_ns | a.pending_to_device | a.pending_to_host) {
    owner_->fpga_ns.fetch_add(a.pending_ns, std::memory_order_relaxed);
    owner_->bytes_to_device.fetch_add(a.pending_to_device, std::memory_order_relaxed);
    owner_->bytes_to_host.fetch_add(a.pending_to_host, std::memory_order_relaxed);
    a.pending_ns = a.pending_to_device = a.pending_to_host = 0;
  }
  if (a.pending_launches.size() <= first_launch) return;
  owner_->launches.fetch_add(static_cast<int64_t>(a.pending_launches.size() - first_launch),
                             std::memory_order_relaxed);
  int64_t bytes = 0;
  for (size_t i = first_launch; i < a.pending_launches.size(); ++i) {
    KernelCounts& k = kernel_count(a, *owner_, a.pending_launches[i]);
    k.launches.fetch_add(1, std::memory_order_relaxed);
    k.bytes.fetch_add(a.pending_bytes[i], std::memory_order_relaxed);
    if (a.pending_work[i]) k.work.fetch_add(a.pending_work[i], std::memory_order_relaxed);
    bytes += a.pending_bytes[i];
  }
  owner_->kernel_bytes.fetch_add(bytes, std::memory_order_relaxed);
  // The recorded sizes of the launches booked (they are in launch order).
  auto first = std::find_if(a.pending_sizes.begin(), a.pending_sizes.end(),
                            [&](const auto& p) { return p.first >= first_launch; });
  if (first != a.pending_sizes.end()) {
    std::lock_guard<std::mutex> g(owner_->kernels_mu);
    for (auto it = first; it != a.pending_sizes.end(); ++it) {
      owner_->kernels[*a.pending_launches[it->first]].sizes[std::move(it->second)] += 1;
    }
    a.pending_sizes.erase(first, a.pending_sizes.end());
  }
  a.pending_launches.resize(first_launch);
  a.pending_bytes.resize(first_launch);
  a.pending_work.resize(first_launch);
}

void RunCounter::add_run(LaunchMark since) {
  ThreadAccount& a = account();
  book_pending(a, std::min(since.pending, a.pending_launches.size()));
  if (a.epoch > since.epoch) n_.fetch_add(1, std::memory_order_relaxed);
}

LaunchMark launch_mark() {
  const ThreadAccount& a = account();
  return {a.epoch, a.pending_launches.size()};
}

OpStats& op_stats(const std::string& op) {
  std::lock_guard<std::mutex> g(mu);
  auto& slot = table()[op];
  if (!slot) slot = std::make_unique<OpStats>(op);
  return *slot;
}

OpScope::OpScope(OpStats& op) {
  ThreadAccount& a = account();
  if (a.scope == nullptr && !a.in_kernel) {
    op_ = &op;
    a.scope = op_;
    start_ns_ = now_ns();
  }
}

OpScope::~OpScope() {
  if (op_ != nullptr) {
    op_->cpu_ns.fetch_add(now_ns() - start_ns_, std::memory_order_relaxed);
    account().scope = nullptr;
  }
}

KernelBooking::KernelBooking() {
  ThreadAccount& a = account();
  outer_ = !a.in_kernel && a.scope == nullptr;
  if (outer_) {
    a.in_kernel = true;
    start_ns_ = now_ns();
  }
}

void KernelBooking::done() { done_ = true; }

KernelBooking::~KernelBooking() {
  if (!outer_) return;
  ThreadAccount& a = account();
  a.in_kernel = false;
  const bool moved = a.pending_to_device | a.pending_to_host;
  if (done_ || moved) a.pending_ns += now_ns() - start_ns_;
  if (!done_ && moved) {
    // No kernel ran (it was unavailable, the op was empty, or it failed): its syncs happened all
    // the same and count somewhere.
    unattributed().fpga_runs.book_pending(a);
  }
}

void record_launch(const std::string& kernel, int64_t bytes, int64_t work, LaunchSizes* sizes) {
  ThreadAccount& a = account();
  if (sizes != nullptr) a.pending_sizes.emplace_back(a.pending_launches.size(), std::move(*sizes));
  a.pending_launches.push_back(&kernel);
  a.pending_bytes.push_back(bytes);
  a.pending_work.push_back(work);
  a.epoch += 1;
}

void record_sync(bool to_device, int64_t bytes) {
  ThreadAccount& a = account();
  if (a.in_kernel) {
    (to_device ? a.pending_to_device : a.pending_to_host) += bytes;
  } else {
    OpStats& s = a.scope != nullptr ? *a.scope : unattributed();
    (to_device ? s.bytes_to_device : s.bytes_to_host).fetch_add(bytes, std::memory_order_relaxed);
  }
}

std::map<std::string, OpCounts> stats_snapshot() {
  std::lock_guard<std::mutex> g(mu);
  std::map<std::string, OpCounts> out;
  for (const auto& [name, s] : table()) {
    OpCounts c{s->fpga_runs.load(), s->cpu_fallbacks.load(), s->bytes_to_device.load(),
               s->bytes_to_host.load(), s->fpga_ns.load(), s->cpu_ns.load(), s->launches.load(),
               s->kernel_bytes.load(), {}};
    {
      std::lock_guard<std::mutex> k(s->kernels_mu);
      for (const auto& [kernel, count] : s->kernels) {
        if (const int64_t n = count.launches.load(std::memory_order_relaxed)) {
          c.kernels.emplace(kernel, KernelSnapshot{n, count.bytes.load(std::memory_order_relaxed),
                                                   count.work.load(std::memory_order_relaxed), count.sizes});
        }
      }
    }
    if (c.fpga_runs || c.cpu_fallbacks || c.bytes_to_device || c.bytes_to_host || c.fpga_ns || c.cpu_ns) {
      out.emplace(name, std::move(c));
    }
  }
  return out;
}

void reset_stats() {
  std::lock_guard<std::mutex> g(mu);
  for (auto& kv : table()) {
    OpStats& s = *kv.second;
    s.fpga_runs.reset();
    for (auto* c : {&s.cpu_fallbacks, &s.bytes_to_device, &s.bytes_to_host, &s.fpga_ns, &s.cpu_ns, &s.launches,
                    &s.kernel_bytes}) c->store(0);
    std::lock_guard<std::mutex> k(s.kernels_mu);
    for (auto& kv : s.kernels) {  // not erased: threads keep pointers to the counts
      for (auto* c : {&kv.second.launches, &kv.second.bytes, &kv.second.work}) c->store(0);
      kv.second.sizes.clear();
    }
  }
}

}  // namespace aten_fpga
