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

// The fused attention hook as the CPU's flash attention: (query, key, value, attn_bias, dropout_p,
// is_causal, return_debug_mask, scale) -> (query, key, value, dropout_p, is_causal, attn_mask, scale);
// its (output, logsumexp) get the hook's other results: no sequence offsets or RNG state (no
// dropout on the CPU path), the lengths of query and key, no debug mask.
void attention_args(torch::jit::Stack& a) { a = {a[0], a[1], a[2], a[4], a[5], a[3], a[7]}; }
void attention_results(const torch::jit::Stack& a, torch::jit::Stack& r) {
  const at::Tensor none;
  r.insert(r.end(), {none, none, a[0].toTensor().size(-2), a[1].toTensor().size(-2), none, none, none});
}
// Its backward: (grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
// cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, scale) -> (grad_out,
// query, key, value, out, logsumexp, dropout_p, is_causal, attn_mask, scale); the CPU's gives no
// gradient of attn_bias.
void attention_backward_args(torch::jit::Stack& a) {
  const auto mask = a[5].toBoolList();
  TORCH_CHECK(!mask.get(3), "aten_fpga: _scaled_dot_product_fused_attention_overrideable_backward runs on the "
              "CPU's flash attention, which gives no gradient of attn_bias; pass an attn_bias that does not "
              "require grad");
  // No bias: an undefined tensor (or, from Python, an empty one) is no mask.
  const bool bias = a[4].isTensor() && a[4].toTensor().defined() && a[4].toTensor().numel() > 0;
  a = {a[0], a[1], a[2], a[3], a[6], a[7], a[12], a[13], bias ? a[4] : c10::IValue(), a[16]};
}
void attention_backward_results(const torch::jit::Stack&, torch::jit::Stack& r) { r.emplace_back(at::Tensor()); }

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
  // The CPU op's results (given its arguments) completed to the op's.
  void (*complete)(const torch::jit::Stack& args, torch::jit::Stack& results);
  bool table_entry;  // native_functions_fpga.yaml registers the op
};
constexpr CpuRoute kCpuRoutes[] = {
    {"convolution_overrideable", "aten::convolution", "", nullptr, nullptr, true},
    {"convolution_backward_overrideable", "aten::convolution_backward", "", &insert_bias_sizes, nullptr, true},
    {"_scaled_dot_product_fused_attention_overrideable", "aten::_scaled_dot_product_flash_attention_for_cpu", "",
     &attention_args, &attention_results, false},
    {"_scaled_dot_product_fused_attention_overrideable_backward",
     "aten::_scaled_dot_product_flash_attention_for_cpu_backward", "", &attention_backward_args,
     &attention_backward_results, false},
};

// The op's arguments and results moved to the CPU and back: fpga tensors are copied with
// _copy_from (syncing their host shadows), the results go to the first fpga argument's device.
void run_on_cpu(const CpuRoute& route, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  torch::jit::Stack args(stack->end() - nargs, stack->end());
  torch::jit::drop(*stack, nargs);
  std::optional<c10::Device> device;
  for (c10::IValue& v : args) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_privateuseone()) {
      if (!device) device = v.toTensor().device();
      v = v.toTensor().cpu();
    }
  }
  TORCH_INTERNAL_ASSERT(device.has_value(), op_name(op), " reached the fpga fallback without an fpga tensor");
  if (route.adapt != nullptr) route.adapt(args);
  torch::jit::Stack results(args);
  c10::Dispatcher::singleton().findSchemaOrThrow(route.cpu_op, route.cpu_overload).callBoxed(&results);
  if (route.complete != nullptr) route.complete(args, results);
  for (c10::IValue& v : results) {
    if (v.isTensor() && v.toTensor().defined()) v = v.toTensor().to(*device);
    stack->push_back(std::move(v));
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

// Ops whose kernel for every backend calls a CPU-only DispatchStub or refuses other device types
// itself (found by the op_db sweep, docs/conformance.md): registered for "fpga" as the fallback.
constexpr const char* kBackendBlindOps[] = {"conj_physical_", "mode.values"};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const CpuRoute& r : kCpuRoutes) {
    if (!r.table_entry) m.impl(r.op, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  }
  for (const char* op : kBackendBlindOps) m.impl(op, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace aten_fpga
