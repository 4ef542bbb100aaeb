// Per-op accounting: how often each ATen op ran as an FPGA kernel and how often it fell back to
// the CPU. Counters are atomics reached through a reference cached per call site, so counting an
// FPGA launch costs one relaxed increment.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace aten_fpga {

struct OpStats {
  std::atomic<int64_t> fpga_runs{0};
  std::atomic<int64_t> cpu_fallbacks{0};
};

// The counters of one op ("add.out"), created on first use; the reference stays valid.
OpStats& op_stats(const std::string& op);

struct OpCounts {
  int64_t fpga_runs;
  int64_t cpu_fallbacks;
};
std::map<std::string, OpCounts> stats_snapshot();
void reset_stats();

}  // namespace aten_fpga
