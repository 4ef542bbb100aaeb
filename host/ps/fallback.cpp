#include "fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
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

// convolution_backward takes the bias' sizes where its overrideable twin does not: the bias has
// one element per output channel.
void insert_bias_sizes(torch::jit::Stack& args) {
  const at::Tensor& weight = args[2].toTensor();
  const bool transposed = args[6].toBool();
  const int64_t channels = transposed ? weight.size(1) * args[8].toInt() : weight.size(0);
  args.insert(args.begin() + 3, c10::IValue(std::vector<int64_t>{channels}));
}

// Ops whose every kernel, the CPU's too, throws on a backend it does not know (the
// `*_overrideable` hooks a backend is meant to override): the fallback runs each as its CPU
// equivalent instead, counted as a fallback of the op itself. Those without a table entry are
// registered for "fpga" from this list (their CompositeExplicitAutograd kernel would shadow the
// boxed fallback); a table entry's wrapper registers the op itself, and its fallback (a case its
// kernels do not cover) still comes here.
struct CpuRoute {
  const char* op;              // the overrideable op
  const char* cpu_op;          // what runs on the CPU: the same arguments ...
  const char* cpu_overload;
  void (*adapt)(torch::jit::Stack& args);  // ... but for these differences, if any
  bool table_entry;            // native_functions_fpga.yaml registers the op
};
constexpr CpuRoute kCpuRoutes[] = {
    {"convolution_overrideable", "aten::convolution", "", nullptr, true},
    {"convolution_backward_overrideable", "aten::convolution_backward", "", &insert_bias_sizes, true},
};

// The op's arguments and results moved to the CPU and back: fpga tensors are copied with
// _copy_from (syncing their host shadows), the results go to the first fpga argument's device.
void run_on_cpu(const CpuRoute& route, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  torch::jit::Stack args(stack->end() - nargs, stack->end());
  torch::jit::drop(*stack, nargs);
  std::optional<c10::Device> device;
  for (c10::IValue& v : args) {
    if (v.isTensor() && v.toTensor().is_privateuseone()) {
      if (!device) device = v.toTensor().device();
      v = v.toTensor().cpu();
    }
  }
  TORCH_INTERNAL_ASSERT(device.has_value(), op_name(op), " reached the fpga fallback without an fpga tensor");
  if (route.adapt != nullptr) route.adapt(args);
  const size_t first = stack->size();
  for (c10::IValue& v : args) stack->push_back(std::move(v));
  c10::Dispatcher::singleton().findSchemaOrThrow(route.cpu_op, route.cpu_overload).callBoxed(stack);
  for (auto it = stack->begin() + first; it != stack->end(); ++it) {
    if (it->isTensor() && it->toTensor().defined()) *it = it->toTensor().to(*device);
  }
}

// What the fallback knows of `op`, looked up once per operator (by its schema's address, stable
// for the operator's lifetime) rather than by building its name on every call.
struct OpInfo {
  OpStats* stats;
  const CpuRoute* route;  // nullptr: at::native::cpu_fallback runs it
};

const OpInfo& info_of(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static auto* by_schema = new std::unordered_map<const void*, OpInfo>();
  std::lock_guard<std::mutex> g(mu);
  auto it = by_schema->find(&op.schema());
  if (it == by_schema->end()) {
    const std::string name = op_name(op);
    const CpuRoute* route = nullptr;
    for (const CpuRoute& r : kCpuRoutes) {
      if (name == r.op) route = &r;
    }
    it = by_schema->emplace(&op.schema(), OpInfo{&op_stats(name), route}).first;
  }
  return it->second;
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = info_of(op);
  OpStats& stats = *info.stats;
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
  if (info.route != nullptr) {
    run_on_cpu(*info.route, op, stack);
  } else {
    at::native::cpu_fallback(op, stack);
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const CpuRoute& r : kCpuRoutes) {
    if (!r.table_entry) m.impl(r.op, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  }
}

}  // namespace aten_fpga
