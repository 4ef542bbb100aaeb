// PrivateUse1 hooks: what ATen asks of an accelerator beyond the dispatcher (availability, device
// of a pointer, the default generator). Random ops fall back to the CPU, whose generator serves.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/CPUGeneratorImpl.h>

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
  bool isPinnedPtr(const void*) const override { return false; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    // One generator per device; fpga random ops run through the CPU fallback, which draws from
    // the CPU generator, so these only carry seeds (torch.fpga.manual_seed).
    static std::vector<at::Generator> gens = [] {
      std::vector<at::Generator> v;
      for (int i = 0; i < device_count(); ++i) v.push_back(at::make_generator<at::CPUGeneratorImpl>(0));
      return v;
    }();
    const int i = index < 0 ? current_device() : index;
    check_device_index(i);
    return gens[i];
  }
};

struct Register {
  Register() { at::RegisterPrivateUse1HooksInterface(new FpgaHooks()); }
} register_hooks;

}  // namespace
}  // namespace aten_fpga
