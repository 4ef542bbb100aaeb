#include "fallback.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "stats.h"

namespace aten_fpga {
namespace {

enum class Policy { Silent, Warn, Error };

Policy policy() {
  static const Policy p = [] {
    const char* v = std::getenv("ATEN_FPGA_FALLBACK");
    if (v == nullptr || !std::strcmp(v, "") || !std::strcmp(v, "silent")) return Policy::Silent;
    if (!std::strcmp(v, "warn")) return Policy::Warn;
    if (!std::strcmp(v, "error")) return Policy::Error;
    TORCH_CHECK(false, "ATEN_FPGA_FALLBACK='", v, "': expected silent, warn or error");
  }();
  return p;
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.operator_name();
  std::string name = n.name.rfind("aten::", 0) == 0 ? n.name.substr(6) : n.name;
  return n.overload_name.empty() ? name : name + "." + n.overload_name;
}

// The counters of `op`, looked up once per operator (by its schema's address, stable for the
// operator's lifetime) rather than by building its name on every call.
OpStats& stats_of(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static auto* by_schema = new std::unordered_map<const void*, OpStats*>();
  std::lock_guard<std::mutex> g(mu);
  OpStats*& slot = (*by_schema)[&op.schema()];
  if (slot == nullptr) slot = &op_stats(op_name(op));
  return *slot;
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  OpStats& stats = stats_of(op);
  switch (policy()) {
    case Policy::Silent:
      break;
    case Policy::Warn: {
      static std::mutex mu;
      static std::unordered_set<const OpStats*> warned;
      std::lock_guard<std::mutex> g(mu);
      if (warned.insert(&stats).second) {
        // verbatim: the message is for users; where in our C++ it was raised is not
        c10::warn(c10::Warning(c10::UserWarning(), {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                               "aten_fpga: " + stats.name + " has no FPGA kernel and runs on the CPU (ATEN_FPGA_FALLBACK=warn)",
                               /*verbatim=*/true));
      }
      break;
    }
    case Policy::Error:
      TORCH_CHECK(false, "aten_fpga: ", stats.name, " has no FPGA kernel (ATEN_FPGA_FALLBACK=error). Add it to "
                  "native_functions_fpga.yaml, or unset ATEN_FPGA_FALLBACK to run it on the CPU.");
  }
  stats.cpu_fallbacks.fetch_add(1, std::memory_order_relaxed);
  OpScope scope(stats);  // its copies to and from the CPU count for this op
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace aten_fpga
