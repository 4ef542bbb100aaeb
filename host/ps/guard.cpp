// The device guard for PrivateUse1: which fpga device is current, per thread, and streams and
// events (torch.fpga.Stream / Event, torch.Stream(device="fpga"), torch.accelerator).
//
// Every launch completes before its op returns (Device::run waits for its compute units), so the
// host's own order orders all work, across streams too: a stream is a name (an id per device, the
// current one per thread), an event a timestamp taken when it is recorded -- after all the work
// the host issued before it -- and waiting for a stream or an event has nothing left to wait for.
#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <array>
#include <atomic>

#include "runtime.h"

namespace aten_fpga {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

// Each thread's current stream per device (0: the default stream).
c10::StreamId& current_stream_id(c10::DeviceIndex d) {
  thread_local std::array<c10::StreamId, 128> current{};  // DeviceIndex is 8 bits
  return current[static_cast<uint8_t>(d)];
}

struct Event {
  int64_t recorded_ns = 0;  // 0: never recorded
  c10::DeviceIndex device = 0;
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
    return c10::Stream(c10::Stream::UNSAFE, d, current_stream_id(d.index()));
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
    c10::StreamId& id = current_stream_id(s.device_index());
    const c10::Stream old(c10::Stream::UNSAFE, s.device(), id);
    id = s.id();
    return old;
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}

  // --- events ---
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event on fpga:", device_index,
                " recorded on a stream of fpga:", stream.device_index(), "; record it on a stream of its own device");
    if (*event == nullptr) *event = new Event();
    auto* e = static_cast<Event*>(*event);
    e->recorded_ns = now_ns();
    e->device = stream.device_index();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<Event*>(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    const auto* a = static_cast<const Event*>(start);
    const auto* b = static_cast<const Event*>(end);
    TORCH_CHECK(a != nullptr && b != nullptr && a->recorded_ns != 0 && b->recorded_ns != 0,
                "elapsed_time: both events must be recorded first (event.record())");
    return static_cast<double>(b->recorded_ns - a->recorded_ns) / 1e6;
  }
  // A freed block is never in use by a kernel still running (launches complete before their op
  // returns), so tensors used on another stream need no record.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, FpgaGuardImpl);

// tensor.record_stream(s): nothing to record (above); without this it would reach the CPU fallback.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", [](at::Tensor& self, c10::Stream s) {
    TORCH_CHECK(s.device_type() == kType && s.device_index() == self.device().index(), "record_stream: ", self.device(),
                " tensor recorded on a stream of ", s.device());
  });
}

}  // namespace
}  // namespace aten_fpga
