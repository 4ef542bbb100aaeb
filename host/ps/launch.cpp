#include "launch.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <deque>
#include <memory>

#include "allocator.h"
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
  return RunArgs(*info_, args, spans_);
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
  // The launch as a named range in torch.profiler (nothing to make when no profiler is active).
  if (auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::FUNCTION); C10_UNLIKELY(callbacks)) {
    at::RecordFunction range(std::move(*callbacks));
    range.before(std::string_view(info_->name));
    device_->run(*info_, runs);
  } else {
    device_->run(*info_, runs);
  }
  int64_t bytes = 0;
  for (const BufferSpan& s : spans_) bytes += static_cast<int64_t>(s.end > s.begin ? s.end - s.begin : 0);
  spans_.clear();
  record_launch(info_->name, bytes);
  booking_.done();
  units_ = 0;
}

}  // namespace aten_fpga
