// PrivateUse1 hooks: what ATen asks of an accelerator beyond the dispatcher (availability, device
// of a pointer, the default generator: each device's Philox generator, host/ps/generator.h; pinned
// host memory, host/ps/pinned.h).
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "generator.h"
#include "pinned.h"
#include "runtime.h"

namespace aten_fpga {
namespace {

struct FpgaHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex index) const override { return index >= 0 && index < device_count(); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_current_device(index); }
  bool isPinnedPtr(const void* p) const override { return find_pinned(p).buffer != nullptr; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_fpga_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<FpgaGeneratorImpl>(index < 0 ? current_device() : index);
  }
};

struct Register {
  Register() { at::RegisterPrivateUse1HooksInterface(new FpgaHooks()); }
} register_hooks;

}  // namespace
}  // namespace aten_fpga
