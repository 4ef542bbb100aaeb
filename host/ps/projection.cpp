#include "projection.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

namespace aten_fpga {

namespace {
struct Table {
  std::string platform;
  std::unordered_map<std::string, KernelProjection> kernels;
};
std::mutex mu;
std::shared_ptr<const Table> table;  // replaced whole, so a reader holds a consistent one

double interpolate(const std::vector<double>& at_pow2, int64_t bytes) {
  if (at_pow2.empty()) return 0;
  const double b = static_cast<double>(std::max<int64_t>(bytes, 1));
  const size_t i = std::min(at_pow2.size() - 1, static_cast<size_t>(std::floor(std::log2(b))));
  if (i + 1 >= at_pow2.size()) return at_pow2.back() * b / std::ldexp(1.0, static_cast<int>(i));
  const double lo = std::ldexp(1.0, static_cast<int>(i));
  return at_pow2[i] + (at_pow2[i + 1] - at_pow2[i]) * (b - lo) / lo;
}
}  // namespace

void set_projection(std::string platform, std::unordered_map<std::string, KernelProjection> kernels) {
  auto t = kernels.empty() ? nullptr : std::make_shared<const Table>(Table{std::move(platform), std::move(kernels)});
  std::lock_guard<std::mutex> g(mu);
  table = std::move(t);
}

std::unordered_map<std::string, c10::IValue> projection_kwargs(const std::string& kernel, int64_t bytes,
                                                               int64_t work) {
  std::unordered_map<std::string, c10::IValue> out{{"bytes", bytes}, {"work", work}};
  std::shared_ptr<const Table> t;
  {
    std::lock_guard<std::mutex> g(mu);
    t = table;
  }
  if (!t) return out;
  auto it = t->kernels.find(kernel);
  if (it == t->kernels.end()) return out;
  const KernelProjection& k = it->second;
  const double seconds = std::max(interpolate(k.seconds_at_pow2, bytes),
                                  k.fixed_seconds + k.seconds_per_work * static_cast<double>(work));
  out.emplace("platform", t->platform);
  out.emplace("projected_us", seconds * 1e6);
  return out;
}

}  // namespace aten_fpga
