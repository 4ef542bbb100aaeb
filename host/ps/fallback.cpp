#include "fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "allocator.h"
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

// An op's fpga tensor arguments as CPU tensors over their allocations' host shadows, so that the
// CPU runs the op on the fpga tensors' own bytes: one CPU storage per allocation, each argument
// with its own sizes, strides and storage offset in it. ATen's CPU kernel then sees the arguments
// overlap as they do on the device: it refuses what it refuses on any device (an input overlapping
// the out= tensor), allows what it allows (fill_ of an expanded tensor), and writes the shadow in
// place. (Copies to the CPU, as at::native::cpu_fallback makes, hid both: each copy is a tensor of
// its own, and the copy back into an expanded tensor is refused.)
class HostRun {
 public:
  // The CPU argument for `t`: itself unless it is an fpga tensor; the span the view reads synced
  // to the host first. The same tensor passed twice gets one CPU tensor (ATen's is_same holds).
  at::Tensor to_host(const at::Tensor& t, bool written) {
    if (!t.defined() || !t.is_privateuseone()) return t;
    if (!device_) device_ = t.device();
    for (Arg& a : args_) {
      if (a.fpga.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        a.written |= written;
        return a.host;
      }
    }
    Allocation* alloc = allocation_of(t);
    const auto [offset, n] = byte_span(t);
    sync_to_host(alloc, offset, n);
    at::Tensor host = at::detail::make_tensor<c10::TensorImpl>(host_storage(t, alloc),
                                                               c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
    host.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    host._set_conj(t.is_conj());
    host._set_neg(t.is_neg());
    args_.push_back({t, host, written});
    return host;
  }

  // A Device argument naming an fpga device: the results go there, the CPU op gets the CPU.
  c10::IValue to_host(const c10::Device& d) {
    if (!d.is_privateuseone()) return d;
    if (!device_) device_ = d;
    return c10::Device(c10::kCPU);
  }

  // ATen refuses a written-to tensor on another device than the inputs ("Expected all tensors to
  // be on the same device"); the CPU would write a CPU out= tensor in place without a word.
  void check_written_device(const at::Tensor& t) const {
    if (!t.defined() || !device_ || t.device() == *device_) return;
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", *device_,
                " and ", t.device(), "!");
  }

  // After the CPU op: what it wrote in the shadows is newer on the host. A written tensor it resized
  // (an out= tensor) takes the new shape on the device too, and its values, when its CPU storage
  // had to grow into new memory. `ok`: the op returned (a failing op may have written part of its
  // outputs, as on the CPU; only those are marked).
  void commit(bool ok) {
    for (const Arg& a : args_) {
      if (!a.written) continue;
      const bool same_place = on_shadow(a);
      if (ok && !same_layout(a.host, a.fpga)) {
        at::Tensor t = a.fpga;
        t.set_(t.storage(), a.host.storage_offset(), a.host.sizes(), a.host.strides());
      }
      if (same_place) {
        const auto [offset, n] = byte_span(a.fpga);
        mark_host_written(allocation_of(a.fpga), offset, n);
      } else if (ok) {
        a.fpga.copy_(a.host);
      }
    }
  }

  // A result as the fpga op gives it: a CPU tensor over a shadow (a view of an argument) as the
  // same view of the fpga storage, any other CPU tensor copied to the device.
  at::Tensor result(const at::Tensor& r) const {
    if (!r.defined() || !r.is_cpu() || !device_) return r;
    for (const Arg& a : args_) {
      if (r.has_storage() && r.storage().is_alias_of(a.host.storage()) && on_shadow(a)) {
        at::Tensor view = a.fpga.as_strided(r.sizes(), r.strides(), r.storage_offset());
        view._set_conj(r.is_conj());
        view._set_neg(r.is_neg());
        return view;
      }
    }
    return r.to(*device_);
  }

  const std::optional<c10::Device>& device() const { return device_; }

 private:
  struct Arg {
    at::Tensor fpga, host;
    bool written;
  };

  // The CPU storage over the host shadow of t's allocation, shared by every argument in it. It may
  // grow (an out= tensor resized by the CPU kernel): into new CPU memory, which commit() copies.
  c10::Storage host_storage(const at::Tensor& t, Allocation* alloc) {
    const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
    for (const Arg& a : args_) {
      if (a.fpga.storage().unsafeGetStorageImpl() == s) return a.host.storage();
    }
    void* shadow = alloc != nullptr ? alloc->buffer->host : nullptr;
    return c10::Storage(c10::Storage::use_byte_size_t(), t.storage().nbytes(),
                        c10::DataPtr(shadow, shadow, &c10::detail::deleteNothing, c10::Device(c10::kCPU)),
                        c10::GetCPUAllocator(), /*resizable=*/true);
  }

  // Does a's CPU tensor still sit on its allocation's shadow (its storage did not move)?
  static bool on_shadow(const Arg& a) {
    Allocation* alloc = allocation_of(a.fpga);
    return alloc != nullptr && a.host.storage().data() == alloc->buffer->host;
  }

  static bool same_layout(const at::Tensor& a, const at::Tensor& b) {
    return a.sizes().equals(b.sizes()) && a.strides().equals(b.strides()) && a.storage_offset() == b.storage_offset();
  }

  std::vector<Arg> args_;
  std::optional<c10::Device> device_;
};

// Runs `run` (the CPU op, given the stack) with the op's arguments on the stack as HostRun's CPU
// tensors, then puts its results back as the fpga op gives them: a result aliasing a written
// argument is that argument (the original fpga tensor or list), any other as HostRun::result.
template <class Run>
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, Run&& run) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t begin = stack->size() - nargs;
  const std::vector<c10::IValue> given(stack->begin() + begin, stack->end());
  HostRun host;
  for (size_t i = 0; i < nargs; ++i) {
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    const bool written = alias != nullptr && alias->isWrite();
    c10::IValue& v = (*stack)[begin + i];
    if (v.isTensor()) {
      v = host.to_host(v.toTensor(), written);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorVector()) list.push_back(host.to_host(t, written));
      v = list;
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorVector()) {
        list.push_back(t.has_value() ? std::optional<at::Tensor>(host.to_host(*t, written)) : std::nullopt);
      }
      v = list;
    } else if (v.isDevice()) {
      v = host.to_host(v.toDevice());
    }
  }
  for (size_t i = 0; i < nargs; ++i) {
    const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite()) continue;
    if (given[i].isTensor()) host.check_written_device(given[i].toTensor());
    if (given[i].isTensorList()) {
      for (const at::Tensor& t : given[i].toTensorVector()) host.check_written_device(t);
    }
  }
  try {
    run(stack);
  } catch (...) {
    host.commit(false);
    throw;
  }
  host.commit(true);
  const size_t nret = schema.returns().size();
  for (size_t r = 0; r < nret; ++r) {
    c10::IValue& v = (*stack)[stack->size() - nret + r];
    const c10::AliasInfo* alias = schema.returns()[r].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      for (size_t i = 0; i < nargs; ++i) {
        const c10::AliasInfo* arg_alias = schema.arguments()[i].alias_info();
        if (arg_alias != nullptr && *arg_alias == *alias) v = given[i];
      }
    } else if (v.isTensor()) {
      v = host.result(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorVector()) list.push_back(host.result(t));
      v = list;
    }
  }
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

// A route's CPU op on the op's arguments (as run_on_host gives them), adapted and completed.
void run_route(const CpuRoute& route, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_host(op, stack, [&](torch::jit::Stack* s) {
    const size_t nargs = op.schema().arguments().size();
    torch::jit::Stack args(s->end() - nargs, s->end());
    torch::jit::drop(*s, nargs);
    if (route.adapt != nullptr) route.adapt(args);
    torch::jit::Stack results(args);
    c10::Dispatcher::singleton().findSchemaOrThrow(route.cpu_op, route.cpu_overload).callBoxed(&results);
    if (route.complete != nullptr) route.complete(args, results);
    s->insert(s->end(), results.begin(), results.end());
  });
}

// What the fallback knows of `op`, looked up once per operator (by its schema's address, stable
// for the operator's lifetime) rather than by building its name on every call.
struct OpInfo {
  OpStats* stats;
  const CpuRoute* route;  // nullptr: its CPU kernel runs it
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
    run_route(*info.route, op, stack);
  } else {
    run_on_host(op, stack, [&](torch::jit::Stack* s) { op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), s); });
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

namespace {

// Quantized and sparse tensors have no kernels on "fpga", and the fallback runs dense strided
// tensors only: every op reaching one says so, rather than PyTorch's "Could not run ... with
// arguments from the 'Sparsefpga' backend".
[[noreturn]] void unsupported(const c10::OperatorHandle& op, const char* what, const char* fix) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "aten_fpga: ", what, " tensors are not supported on fpga (", op_name(op),
                              " was called with one); ", fix, " See docs/user-guide.md, \"Limits\".");
}
void quantized(const c10::OperatorHandle& op, torch::jit::Stack*) {
  unsupported(op, "quantized", "keep them on the CPU, or dequantize() them before .to(\"fpga\").");
}
void sparse(const c10::OperatorHandle& op, torch::jit::Stack*) {
  unsupported(op, "sparse", "keep them on the CPU, or to_dense() them before .to(\"fpga\").");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized>()); }
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse>()); }
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse>()); }

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
