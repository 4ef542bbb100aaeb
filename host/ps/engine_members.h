// Engine members, for both devices: a member (v_add_float32) is a kernel the host asks for by name
// that the image runs as one opcode of an engine kernel (e_binary), as its member table says
// (xclbin.h). The device lists it as a kernel of its own, with the member's arguments, and
// Device::run translates its runs into the engine's (defined here).
#pragma once

#include <string>
#include <unordered_map>

#include "device.h"
#include "xclbin.h"

namespace aten_fpga {

// Adds the members of `image` (read from `path`) to `kernels`, the device's kernels by name, its
// engines among them. A kernel of the member's name already there -- one the image holds itself --
// wins. Members point at their engine's entry: `kernels` must not move its elements afterwards (an
// unordered_map keeps them in place).
void add_members(const xclbin::Image& image, const std::string& path,
                 std::unordered_map<std::string, KernelInfo>& kernels);

}  // namespace aten_fpga
