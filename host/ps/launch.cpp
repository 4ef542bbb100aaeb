#include "launch.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "allocator.h"
#include "projection.h"
#include "runtime.h"
#include "thread_state.h"

namespace aten_fpga {

const KernelArgInfo& RunArgs::next(bool pointer) {
  const size_t i = args_->size();
  TORCH_CHECK(i < info_->args.size(), info_->name, " takes ", info_->args.size(),
              " arguments; the host passes more (the kernel's ops.yaml and its host driver disagree)");
  const KernelArgInfo& arg = info_->args[i];
  TORCH_CHECK(arg.is_pointer == pointer, info_->name, ": argument ", i, " (", arg.name, ") is a ",
              arg.is_pointer ? "buffer" : "scalar", " but the host passes a ", pointer ? "buffer" : "scalar",
              " (the kernel's ops.yaml and its host driver disagree)");
  return arg;
}

RunArgs& RunArgs::buffer(Allocation* a, size_t byte_offset, size_t bytes) {
  next(true);
  TORCH_INTERNAL_ASSERT(a != nullptr, info_->name, ": a buffer argument has no device allocation");
  args_->push_back({a->buffer.get(), byte_offset, 0});
  const size_t end = bytes < a->requested - std::min(byte_offset, a->requested) ? byte_offset + bytes : a->requested;
  auto span = std::find_if(spans_->begin(), spans_->end(), [a](const BufferSpan& s) { return s.alloc == a; });
  if (span == spans_->end()) {
    spans_->push_back({a, byte_offset, end});
  } else {
    span->begin = std::min(span->begin, byte_offset);
    span->end = std::max(span->end, end);
  }
  return *this;
}

RunArgs& RunArgs::scalar(const c10::Scalar& value) {
  const KernelArgInfo& arg = next(false);
  args_->push_back({nullptr, 0, encode_scalar(value, arg)});
  return *this;
}

RunArgs& RunArgs::bits(uint64_t raw) {
  next(false);
  args_->push_back({nullptr, 0, raw});
  return *this;
}

RunArgs& RunArgs::size(int64_t n) {
  TORCH_INTERNAL_ASSERT(n >= 0, info_->name, ": negative size ", n);
  sizes_->push_back({unit_, static_cast<uint32_t>(args_->size()), n});
  return bits(static_cast<uint64_t>(n));
}

void KernelLaunch::expect_args(size_t n, const char* fix) const {
  TORCH_CHECK(info_->args.size() == n, info_->name, " takes ", info_->args.size(), " arguments; the host passes ", n,
              " (", fix, ")");
}

c10::SmallVector<CuRange, 8> KernelLaunch::split(int64_t items, int64_t granule, int64_t elements_per_item) const {
  c10::SmallVector<CuRange, 8> out;
  if (items <= 0) return out;
  const int64_t elements = items * std::max<int64_t>(1, elements_per_item);
  const int64_t units = std::max<int64_t>(1, std::min<int64_t>({static_cast<int64_t>(info_->cus), items,
                                                                elements / kMinElementsPerCU}));
  const int64_t per_unit = (items + units - 1) / units;
  const int64_t chunk = (per_unit + granule - 1) / granule * granule;
  for (int64_t begin = 0; begin < items; begin += chunk) out.push_back({begin, std::min(items, begin + chunk)});
  return out;
}

namespace {
// The launch's work (stats.h set_work_specs): per unit, the product of the first spec's arguments
// (all of whose names the kernel has), summed over the units.
int64_t launch_work(const KernelInfo& info, const SizeArgs& sizes, size_t units) {
  for (const std::vector<std::string>& spec : work_specs()) {
    int64_t total = 0;
    bool complete = true;
    for (uint32_t u = 0; u < units && complete; ++u) {
      int64_t product = 1;
      for (const std::string& name : spec) {
        const bool pow2 = name.rfind("2^", 0) == 0;
        const std::string_view want = pow2 ? std::string_view(name).substr(2) : std::string_view(name);
        auto it = std::find_if(sizes.begin(), sizes.end(),
                               [&](const SizeArg& s) { return s.unit == u && info.args[s.arg].name == want; });
        if (it == sizes.end()) {
          complete = false;
          break;
        }
        product *= pow2 ? (int64_t(1) << std::min<int64_t>(it->value, 62)) : it->value;
      }
      total += product;
    }
    if (complete) return total;
  }
  return 0;
}

// The launch's sizes by argument name: one value where every unit had the same, else their sum.
LaunchSizes launch_sizes(const KernelInfo& info, const SizeArgs& sizes) {
  LaunchSizes out;
  c10::SmallVector<std::pair<int64_t, bool>, 16> sum_shared;  // per name: the units' sum, all equal
  for (const SizeArg& s : sizes) {
    const std::string& name = info.args[s.arg].name;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == name; });
    if (it == out.end()) {
      out.emplace_back(name, s.value);
      sum_shared.push_back({s.value, true});
    } else {
      auto& [sum, shared] = sum_shared[static_cast<size_t>(it - out.begin())];
      sum += s.value;
      shared = shared && it->second == s.value;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!sum_shared[i].second) out[i].second = sum_shared[i].first;
  }
  return out;
}

// Argument lists reused per thread, one set per nesting depth (a driver preparing its operands may
// launch copy kernels of its own): a launch allocates nothing once they have grown.
struct ThreadRuns {
  std::deque<std::vector<std::vector<KernelArg>>> by_depth;  // grows without moving the outer ones
  size_t depth = 0;
};
inline ThreadRuns& thread_runs() { return ThreadState<ThreadRuns>::get(); }

// This thread's argument lists for a launch at the next depth.
std::vector<std::vector<KernelArg>>& enter() {
  ThreadRuns& t = thread_runs();
  const size_t depth = t.depth++;
  if (t.by_depth.size() <= depth) t.by_depth.resize(depth + 1);
  return t.by_depth[depth];
}
}  // namespace

KernelLaunch::KernelLaunch(const KernelRef& ref, at::ScalarType dtype, c10::Device where)
    : info_(&kernel_for(ref, dtype, where)), device_(&aten_fpga::device(where.index())), runs_(&enter()) {}

KernelLaunch::KernelLaunch(const KernelInfo& info, c10::Device where)
    : info_(&info), device_(&aten_fpga::device(where.index())), runs_(&enter()) {}

KernelLaunch::~KernelLaunch() { --thread_runs().depth; }

RunArgs KernelLaunch::add_run() {
  auto& runs = *runs_;
  if (runs.size() <= units_) runs.emplace_back();
  std::vector<KernelArg>& args = runs[units_++];
  args.clear();
  return RunArgs(*info_, args, spans_, sizes_, static_cast<uint32_t>(units_ - 1));
}

void KernelLaunch::run() {
  if (units_ == 0) return;
  auto& runs = *runs_;
  runs.resize(units_);
  for (size_t u = 0; u < units_; ++u) {
    TORCH_CHECK(runs[u].size() == info_->args.size(), info_->name, " takes ", info_->args.size(),
                " arguments; compute unit ", u, " was given ", runs[u].size(),
                " (the kernel's ops.yaml and its host driver disagree)");
  }
  int64_t bytes = 0;
  for (const BufferSpan& s : spans_) bytes += static_cast<int64_t>(s.end > s.begin ? s.end - s.begin : 0);
  spans_.clear();
  const int64_t work = launch_work(*info_, sizes_, units_);
  // The launch as a named range in torch.profiler (nothing to make when no profiler is active),
  // carrying its projected seconds on a card (projection.h) as keyword inputs (record_shapes=True).
  if (auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::FUNCTION); C10_UNLIKELY(callbacks)) {
    at::RecordFunction range(std::move(*callbacks));
    if (range.needsInputs()) {
      const std::unordered_map<std::string, c10::IValue> kwargs = projection_kwargs(info_->name, bytes, work);
      range.before(std::string_view(info_->name), &kwargs);
    } else {
      range.before(std::string_view(info_->name));
    }
    device_->run(*info_, runs);
  } else {
    device_->run(*info_, runs);
  }
  if (C10_UNLIKELY(record_sizes())) {
    LaunchSizes sizes = launch_sizes(*info_, sizes_);
    record_launch(info_->name, bytes, work, &sizes);
  } else {
    record_launch(info_->name, bytes, work);
  }
  sizes_.clear();
  booking_.done();
  units_ = 0;
}

}  // namespace aten_fpga
