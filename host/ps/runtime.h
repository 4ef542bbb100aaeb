// The process-wide runtime: the devices ("fpga:0..N-1") and the image loaded on them.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "device.h"

namespace aten_fpga {

// Which device layer serves "fpga": ATEN_FPGA_DEVICE=emu (default) or xrt.
const std::string& device_kind();
// Number of devices: ATEN_FPGA_EMU_DEVICES (default 1) emulated devices, or XRT's devices.
int device_count();
// The device layer object of fpga:index (created on first use).
Device& device(int index);
// Load an image (emulated .so or xclbin) on every device.
void load_image(const std::string& path);
// Changes with every load_image: caches of kernels found in an image compare against it.
uint64_t image_generation();
// The current device of this thread (torch.fpga.set_device / device guard).
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
void check_device_index(int index);

}  // namespace aten_fpga
