#include "fallback.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
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

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_name(op);
  switch (policy()) {
    case Policy::Silent:
      break;
    case Policy::Warn: {
      static std::mutex mu;
      static std::unordered_set<std::string> warned;
      std::lock_guard<std::mutex> g(mu);
      if (warned.insert(name).second) {
        TORCH_WARN("aten_fpga: ", name, " has no FPGA kernel and runs on the CPU (ATEN_FPGA_FALLBACK=warn)");
      }
      break;
    }
    case Policy::Error:
      TORCH_CHECK(false, "aten_fpga: ", name, " has no FPGA kernel (ATEN_FPGA_FALLBACK=error). Add it to "
                  "native_functions_fpga.yaml, or unset ATEN_FPGA_FALLBACK to run it on the CPU.");
  }
  op_stats(name).cpu_fallbacks.fetch_add(1, std::memory_order_relaxed);
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace aten_fpga
