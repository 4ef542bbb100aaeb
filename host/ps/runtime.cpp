#include "runtime.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include "emu_device.h"
#include "xrt_device.h"

namespace aten_fpga {
namespace {

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  TORCH_CHECK(end && *end == '\0' && n > 0, name, "='", v, "' is not a positive integer");
  return static_cast<size_t>(n);
}

struct Devices {
  std::string kind;
  std::vector<std::unique_ptr<Device>> list;
  Devices() {
    const char* k = std::getenv("ATEN_FPGA_DEVICE");
    kind = k == nullptr || *k == '\0' ? "emu" : k;
    if (kind == "emu") {
      const size_t n = env_size("ATEN_FPGA_EMU_DEVICES", 1);
      TORCH_CHECK(n <= 64, "ATEN_FPGA_EMU_DEVICES=", n, ": at most 64 devices");
      // Emulated device memory per device (bytes); 8 GiB by default, like a small Alveo card's DDR.
      const size_t capacity = env_size("ATEN_FPGA_EMU_MEMORY", size_t(8) << 30);
      for (size_t i = 0; i < n; ++i) list.push_back(std::make_unique<EmuDevice>(static_cast<int>(i), capacity));
    } else if (kind == "xrt") {
      const int n = xrt_device_count();
      for (int i = 0; i < n; ++i) list.push_back(make_xrt_device(i));
    } else {
      TORCH_CHECK(false, "ATEN_FPGA_DEVICE='", kind, "': expected emu (the emulated device) or xrt (a card through XRT)");
    }
  }
};

Devices& devices() {
  // Created on first use (a failure is raised again on the next use); never destroyed: tensors
  // may outlive static destruction.
  static Devices* d = new Devices();
  return *d;
}

std::atomic<uint64_t> generation{1};
thread_local c10::DeviceIndex current = 0;

}  // namespace

const std::string& device_kind() { return devices().kind; }

int device_count() { return static_cast<int>(devices().list.size()); }

void check_device_index(int index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "invalid fpga device index ", index, ": there are ",
              device_count(), " fpga devices (set ATEN_FPGA_EMU_DEVICES for more emulated ones)");
}

Device& device(int index) {
  check_device_index(index);
  return *devices().list[index];
}

void load_image(const std::string& path) {
  // Bump before and after: a launch racing with the load never caches a half-loaded image's kernels.
  generation.fetch_add(1);
  for (auto& d : devices().list) d->load_image(path);
  generation.fetch_add(1);
}

uint64_t image_generation() { return generation.load(std::memory_order_acquire); }

c10::DeviceIndex current_device() { return current; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  current = index;
}

}  // namespace aten_fpga
