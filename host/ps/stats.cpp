#include "stats.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace aten_fpga {
namespace {
std::mutex mu;
std::unordered_map<std::string, std::unique_ptr<OpStats>>& table() {
  static auto* t = new std::unordered_map<std::string, std::unique_ptr<OpStats>>();
  return *t;
}
}  // namespace

OpStats& op_stats(const std::string& op) {
  std::lock_guard<std::mutex> g(mu);
  auto& slot = table()[op];
  if (!slot) slot = std::make_unique<OpStats>();
  return *slot;
}

std::map<std::string, OpCounts> stats_snapshot() {
  std::lock_guard<std::mutex> g(mu);
  std::map<std::string, OpCounts> out;
  for (const auto& kv : table()) {
    const OpCounts c{kv.second->fpga_runs.load(), kv.second->cpu_fallbacks.load()};
    if (c.fpga_runs || c.cpu_fallbacks) out.emplace(kv.first, c);
  }
  return out;
}

void reset_stats() {
  std::lock_guard<std::mutex> g(mu);
  for (auto& kv : table()) {
    kv.second->fpga_runs = 0;
    kv.second->cpu_fallbacks = 0;
  }
}

}  // namespace aten_fpga
