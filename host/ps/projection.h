// A launch's projected seconds on a card, for its torch.profiler range. The model is Python's
// (aten_fpga/projection.py): it installs, per kernel of the loaded image, its launch's seconds
// sampled at every power of two of bytes and its compute array's seconds per unit of work; a
// launch here is interpolated between the samples. Nothing is projected until one is installed.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace aten_fpga {

struct KernelProjection {
  std::vector<double> seconds_at_pow2;  // [i]: a launch spanning 2^i bytes
  double fixed_seconds = 0;             // launch latency and pipeline fill
  double seconds_per_work = 0;          // the compute array's (launch_work units), 0 if none
};

// Replaces the table (an empty one removes it); `platform` names the card it projects.
void set_projection(std::string platform, std::unordered_map<std::string, KernelProjection> kernels);

// The range's keyword inputs: the launch's bytes and work, and, for a kernel the table holds, the
// platform and projected microseconds.
std::unordered_map<std::string, c10::IValue> projection_kwargs(const std::string& kernel, int64_t bytes, int64_t work);

}  // namespace aten_fpga
