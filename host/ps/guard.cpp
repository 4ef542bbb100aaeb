// The device guard for PrivateUse1: which fpga device is current, per thread, and streams and
// events (torch.fpga.Stream / Event, torch.Stream(device="fpga"), torch.accelerator).
//
// A stream is a queue of device work (device.h): launches issued under it run in order, after the
// host returned. An event's record queues a marker, which takes the time the stream reaches it (so
// elapsed_time is device time); its wait queues a wait for that marker on another stream.
#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <array>
#include <atomic>

#include "allocator.h"
#include "runtime.h"

namespace aten_fpga {

void give_back(void* ctx);  // allocator.cpp: the deleter of its DataPtrs

namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

// Each thread's current stream per device (0: the default stream).
c10::StreamId& current_id(c10::DeviceIndex d) {
  thread_local std::array<c10::StreamId, 128> current{};  // DeviceIndex is 8 bits
  return current[static_cast<uint8_t>(d)];
}

StreamQueue& queue_of(const c10::Stream& s) { return device(s.device_index()).queue(s.id()); }

struct Event {
  Fence fence;  // the marker
  std::shared_ptr<std::atomic<int64_t>> time;  // when the stream reached it (0: not yet)
  StreamClock clock;  // what the stream was ordered after there (the sanitizer's)
  c10::DeviceIndex device = 0;
  bool recorded = false;
};

struct FpgaGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    const c10::Device old = getDevice();
    if (d.index() != old.index()) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) set_current_device(d.index());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(device_count());
    } catch (...) {
      return 0;
    }
  }

  // --- streams ---
  static c10::Device resolved(c10::Device d) { return d.has_index() ? d : c10::Device(kType, current_device()); }
  c10::Stream getStream(c10::Device d) const override {
    d = resolved(d);
    return c10::Stream(c10::Stream::UNSAFE, d, current_id(d.index()));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, resolved(d)); }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    static std::atomic<c10::StreamId> next{1};
    return c10::Stream(c10::Stream::UNSAFE, resolved(d), next.fetch_add(1));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    return getNewStream(d, 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::StreamId& id = current_id(s.device_index());
    const c10::Stream old(c10::Stream::UNSAFE, s.device(), id);
    id = s.id();
    return old;
  }
  bool queryStream(const c10::Stream& s) const override {
    const StreamQueue& q = queue_of(s);
    return q.completed() == q.issued();
  }
  void synchronizeStream(const c10::Stream& s) const override {
    StreamQueue& q = queue_of(s);
    device(s.device_index()).wait({&q, q.issued()});
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    device(index < 0 ? current_device() : index).synchronize();
  }

  // --- events ---
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event on fpga:", device_index,
                " recorded on a stream of fpga:", stream.device_index(), "; record it on a stream of its own device");
    if (*event == nullptr) *event = new Event();
    auto* e = static_cast<Event*>(*event);
    QueueItem marker;
    marker.kind = QueueItem::Kind::kMarker;
    marker.time = std::make_shared<std::atomic<int64_t>>(0);
    e->time = marker.time;
    e->fence = queue_of(stream).push(std::move(marker));
    e->clock = device(stream.device_index()).clock_at(e->fence);
    e->device = stream.device_index();
    e->recorded = true;
  }
  void block(void* event, const c10::Stream& stream) const override {
    const auto* e = static_cast<const Event*>(event);
    if (e == nullptr || !e->recorded) return;  // as CUDA: waiting for an unrecorded event is a no-op
    StreamQueue& q = queue_of(stream);
    if (e->fence.queue != &q) {
      QueueItem wait;
      wait.kind = QueueItem::Kind::kWait;
      wait.after = e->fence;
      q.push(std::move(wait));
    }
    device(stream.device_index()).merge_clock(q, e->clock);
  }
  bool queryEvent(void* event) const override {
    const auto* e = static_cast<const Event*>(event);
    return e == nullptr || !e->recorded || e->fence.done();
  }
  void synchronizeEvent(void* event) const override {
    const auto* e = static_cast<const Event*>(event);
    if (e != nullptr && e->recorded) device(e->device).wait(e->fence);
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<Event*>(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    const auto* a = static_cast<const Event*>(start);
    const auto* b = static_cast<const Event*>(end);
    TORCH_CHECK(a != nullptr && b != nullptr && a->recorded && b->recorded,
                "elapsed_time: both events must be recorded first (event.record())");
    device(a->device).wait(a->fence);  // their times are the device's: taken when it reached them
    device(b->device).wait(b->fence);
    return static_cast<double>(b->time->load() - a->time->load()) / 1e6;
  }
  // The block must not be reused until the stream's work queued so far completes (the caching
  // allocator waits for its uses; launches record theirs themselves).
  void recordDataPtrOnStream(const c10::DataPtr& p, const c10::Stream& s) const override {
    if (p.get_deleter() != &give_back) return;
    StreamQueue& q = queue_of(s);
    use_on_device(static_cast<Allocation*>(p.get_context()), {&q, q.issued()});
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, FpgaGuardImpl);

// tensor.record_stream(s): the block stays in use until s's work queued so far completes (without
// this it would reach the CPU fallback).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", [](at::Tensor& self, c10::Stream s) {
    TORCH_CHECK(s.device_type() == kType && s.device_index() == self.device().index(), "record_stream: ", self.device(),
                " tensor recorded on a stream of ", s.device());
    if (Allocation* a = allocation_of(self)) {
      StreamQueue& q = queue_of(s);
      use_on_device(a, {&q, q.issued()});
    }
  });
}

}  // namespace

int64_t current_stream_id(int index) { return current_id(static_cast<c10::DeviceIndex>(index)); }

}  // namespace aten_fpga
