// The XRT device: an Alveo card (or XRT's emulation) driven through XRT's native C++ API
// (xrt::device, xrt::xclbin, xrt::kernel, xrt::bo, xrt::run). Compiled in where scons finds
// libxrt-dev (site_scons/afpga/xrt.py); selected at run time by ATEN_FPGA_DEVICE=xrt.
#pragma once

#include <memory>

#include "device.h"

namespace aten_fpga {

// Whether this build has the XRT device.
bool xrt_built();
// The devices XRT enumerates; under XCL_EMULATION_MODE, which provides device 0 without
// enumerating it, one.
int xrt_device_count();
std::unique_ptr<Device> make_xrt_device(int index);

}  // namespace aten_fpga
