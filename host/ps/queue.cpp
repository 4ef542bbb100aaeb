// Asynchronous execution (device.h, docs/runtime.md): each stream of a device is a queue with a
// worker thread. The host pushes a launch (or a device-side copy, an event's marker or wait) and
// returns; the worker runs the items in order -- a launch through the device's launch(), which on
// the emulator drives the compute-unit threads with the worker as CU 0 and on XRT starts the runs
// and waits for them. An item's error is kept and raised at the host's next synchronization.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "device.h"

namespace aten_fpga {

bool launch_blocking() {
  static const bool on = [] {
    const char* v = std::getenv("ATEN_FPGA_LAUNCH_BLOCKING");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

namespace {
// At exit the queued work finishes before the process tears down what it uses (devices live on).
void drain_at_exit(Device* d) {
  static std::mutex mu;
  static auto* devices = new std::vector<Device*>();
  std::lock_guard<std::mutex> g(mu);
  if (std::find(devices->begin(), devices->end(), d) != devices->end()) return;
  if (devices->empty()) std::atexit([] {
    for (Device* each : *devices) each->synchronize_nothrow();
  });
  devices->push_back(d);
}
}  // namespace

StreamQueue::StreamQueue(Device& device, int64_t id, size_t index)
    : device_(device), id_(id), index_(index), thread_([this] { work(); }) {}

StreamQueue::~StreamQueue() {
  {
    std::lock_guard<std::mutex> g(mu_);
    QueueItem stop;
    stop.kind = QueueItem::Kind::kMarker;  // a marker without a time cell: the worker's stop
    items_.push_back(std::move(stop));
  }
  cv_.notify_one();
  thread_.join();
}

Fence StreamQueue::push(QueueItem&& item) {
  bool wake;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> g(mu_);
    items_.push_back(std::move(item));
    seq = issued_.fetch_add(1, std::memory_order_acq_rel) + 1;
    wake = sleeping_;
  }
  if (wake) cv_.notify_one();  // with the lock released: the worker wakes to a free lock
  return {this, seq};
}

void StreamQueue::wait(uint64_t seq) {
  if (completed() >= seq) return;
  std::unique_lock<std::mutex> g(mu_);
  ++waiters_;
  done_cv_.wait(g, [&] { return completed() >= seq; });
  --waiters_;
}

void StreamQueue::work() {
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    if (items_.empty()) {
      sleeping_ = true;
      cv_.wait(g, [this] { return !items_.empty(); });
      sleeping_ = false;
    }
    QueueItem& item = items_.front();
    if (item.kind == QueueItem::Kind::kMarker && item.time == nullptr) return;  // the destructor's stop
    g.unlock();
    device_.run_item(*this, item);  // the front stays in place: push only appends
    g.lock();
    items_.pop_front();
    completed_.fetch_add(1, std::memory_order_acq_rel);
    if (waiters_ != 0) {
      g.unlock();
      done_cv_.notify_all();
      g.lock();
    }
  }
}

void Device::run_item(StreamQueue& q, QueueItem& item) {
  using Kind = QueueItem::Kind;
  if (item.kind == Kind::kMarker) {
    item.time->store(now_ns(), std::memory_order_release);
    return;
  }
  if (item.kind == Kind::kWait) {
    item.after.queue->wait(item.after.seq);
    return;
  }
  const int64_t start = now_ns();
  try {
    if (item.kind == Kind::kCopy) {
      copy_on_device(*item.dst, item.dst_offset, *item.src, item.src_offset, item.bytes);
    } else {
      if (C10_UNLIKELY(fault_set_.load(std::memory_order_acquire))) {
        std::string message;
        {
          std::lock_guard<std::mutex> g(error_mu_);
          if (fault_after_-- == 0) {
            message.swap(fault_);
            fault_set_.store(false, std::memory_order_release);
          }
        }
        TORCH_CHECK(message.empty(), message);
      }
      launch(*item.kernel, item.runs, item.passed.empty() ? item.runs : item.passed);
      if (item.time) item.time->store(now_ns() - start, std::memory_order_release);
    }
  } catch (const std::exception& e) {
    if (item.time) item.time->store(0, std::memory_order_release);  // no device time to book
    // Kept for the host's next synchronization, named with where it came from (the first wins).
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    const std::string what = item.kind == Kind::kCopy ? std::string("a device-side copy")
                                                       : "kernel " + *item.name;
    std::string message = "fpga:" + std::to_string(index_) + ": " + what + " queued on stream " +
                          std::to_string(q.id()) + " failed: " +
                          (c10_error ? c10_error->what_without_backtrace() : e.what()) +
                          ". Launches are asynchronous: the error is raised at the next synchronization. "
                          "Set ATEN_FPGA_LAUNCH_BLOCKING=1 to raise it at the launch that failed.";
    std::lock_guard<std::mutex> g(error_mu_);
    if (!error_) error_ = std::make_exception_ptr(c10::Error(std::move(message)));
  }
  if (trace_on_.load(std::memory_order_relaxed)) {
    const int64_t end = now_ns();
    std::lock_guard<std::mutex> g(trace_mu_);
    trace_.push_back({q.id(), item.kind == Kind::kCopy ? 'c' : 'k',
                      item.kind == Kind::kCopy ? std::string("copy") : *item.name, start, end});
  }
}

StreamQueue& Device::queue(int64_t stream_id) {
  // The last queue this thread used, per device ordinal: a launch does not search the map.
  thread_local const Device* last_device = nullptr;
  thread_local int64_t last_id = -1;
  thread_local StreamQueue* last = nullptr;
  if (last_device == this && last_id == stream_id) return *last;
  std::lock_guard<std::mutex> g(queues_mu_);
  auto& slot = queues_[stream_id];
  if (!slot) {
    drain_at_exit(this);
    slot = std::make_unique<StreamQueue>(*this, stream_id, by_index_.size());
    by_index_.push_back(slot.get());
    std::lock_guard<std::mutex> c(clock_mu_);
    clocks_.resize(by_index_.size());
  }
  last_device = this;
  last_id = stream_id;
  last = slot.get();
  return *slot;
}

Fence Device::copy_async(Buffer& dst, size_t dst_offset, Buffer& src, size_t src_offset, size_t n, StreamQueue& q) {
  QueueItem item;
  item.kind = QueueItem::Kind::kCopy;
  item.dst = &dst;
  item.src = &src;
  item.dst_offset = dst_offset;
  item.src_offset = src_offset;
  item.bytes = n;
  const Fence f = q.push(std::move(item));
  if (launch_blocking()) wait(f);
  return f;
}

void Device::wait(const Fence& f) {
  if (!f.done()) f.queue->wait(f.seq);
  host_observed(f);
  raise_pending_error();
}

void Device::wait_nothrow(const Fence& f) noexcept {
  if (!f.done()) f.queue->wait(f.seq);
}

void Device::synchronize_nothrow() noexcept {
  std::vector<StreamQueue*> queues;
  {
    std::lock_guard<std::mutex> g(queues_mu_);
    queues = by_index_;
  }
  for (StreamQueue* q : queues) q->wait(q->issued());
}

void Device::synchronize() {
  std::vector<Fence> ends;
  {
    std::lock_guard<std::mutex> g(queues_mu_);
    for (StreamQueue* q : by_index_) ends.push_back({q, q->issued()});
  }
  for (const Fence& f : ends) {
    f.queue->wait(f.seq);
    host_observed(f);
  }
  raise_pending_error();
}

void Device::raise_pending_error() {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> g(error_mu_);
    if (!error_) return;
    std::swap(e, error_);
  }
  std::rethrow_exception(e);
}

void Device::inject_launch_fault(std::string message, int after) {
  TORCH_CHECK(!message.empty(), "inject_launch_fault: give the error's message");
  std::lock_guard<std::mutex> g(error_mu_);
  fault_ = std::move(message);
  fault_after_ = after;
  fault_set_.store(true, std::memory_order_release);
}

void Device::set_trace(bool on) { trace_on_.store(on, std::memory_order_relaxed); }

std::vector<TraceEntry> Device::take_trace() {
  synchronize_nothrow();
  std::lock_guard<std::mutex> g(trace_mu_);
  return std::exchange(trace_, {});
}

void Device::merge_locked(StreamClock& into, const StreamClock& from) {
  if (into.size() < from.size()) into.resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

bool Device::ordered_before(const Fence& writer, const StreamQueue& reader) {
  if (writer.queue == nullptr || writer.queue == &reader) return true;
  const size_t w = writer.queue->index();
  std::lock_guard<std::mutex> g(clock_mu_);
  const StreamClock& r = clocks_[reader.index()];
  return (w < r.size() && r[w] >= writer.seq) || (w < host_clock_.size() && host_clock_[w] >= writer.seq);
}

StreamClock Device::clock_at(const Fence& f) {
  std::lock_guard<std::mutex> g(clock_mu_);
  StreamClock c = clocks_[f.queue->index()];
  if (c.size() <= f.queue->index()) c.resize(f.queue->index() + 1);
  c[f.queue->index()] = std::max(c[f.queue->index()], f.seq);
  return c;
}

void Device::merge_clock(StreamQueue& q, const StreamClock& c) {
  std::lock_guard<std::mutex> g(clock_mu_);
  merge_locked(clocks_[q.index()], c);
}

void Device::host_observed(const Fence& f) {
  if (f.queue == nullptr) return;
  const StreamClock c = clock_at(f);
  std::lock_guard<std::mutex> g(clock_mu_);
  merge_locked(host_clock_, c);
}

}  // namespace aten_fpga
