// The process-wide runtime: the devices ("fpga:0..N-1") and the image loaded on them.
#pragma once

#include <c10/core/Device.h>

#include "device.h"

namespace aten_fpga {

// Number of devices: ATEN_FPGA_EMU_DEVICES (default 1) emulated devices.
int device_count();
// The device layer object of fpga:index (created on first use).
Device& device(int index);
// Load an image (emulated .so or xclbin) on every device.
void load_image(const std::string& path);
// The current device of this thread (torch.fpga.set_device / device guard).
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
void check_device_index(int index);

}  // namespace aten_fpga
