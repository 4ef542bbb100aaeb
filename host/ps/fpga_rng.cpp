// fpga_rng: the random ops (uniform_, normal_, exponential_, bernoulli_, random_) as the rng
// kernels (kernels/hls/rng). Each launch takes (seed, offset) from the tensor's device generator
// (or the one passed) and advances its offset by one; the kernel computes element i from
// philox(seed, (i, offset)), so the values depend on the seed and the sequence of random ops,
// not on how the range is split across compute units. They are not the CPU's values: the CPU
// generator is a Mersenne Twister (docs/rng.md).
#include <ATen/ATen.h>
#include <ATen/core/DistributionsHelper.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <mutex>

#include "FPGAType.h"
#include "allocator.h"
#include "generator.h"
#include "launch.h"

namespace aten_fpga {
namespace {


// Fills `self` with the kernel's distribution, `params` being the op's scalars after seed and offset.
at::Tensor& fill_random(const KernelRef& kernel, at::Tensor& self, const std::optional<at::Generator>& gen,
                        std::initializer_list<c10::Scalar> params) {
  KernelLaunch launch(kernel, self.scalar_type(), self.device());
  launch.expect_args(1 + 2 + params.size() + 2, "kernels/hls/rng/ops.yaml and fpga_rng.cpp disagree");
  const int64_t n = self.numel();
  if (n == 0) return self;
  c10::DeviceGuard guard(self.device());
  auto* g = at::get_generator_or_default<FpgaGeneratorImpl>(gen, default_fpga_generator(self.device().index()));
  std::pair<uint64_t, uint64_t> state;
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    state = g->next_launch();
  }
  // The output port: self when it is dense, aligned to the port word and ends in whole words
  // (or at its allocation's end, whose padding takes the last word's spill); else a temporary.
  const int64_t esize = self.element_size();
  const int64_t word = std::max<int64_t>(launch.info().args[0].bytes, esize);
  Allocation* a = allocation_of(self);
  const size_t end = byte_offset(self) + n * esize;
  const bool direct = self.is_contiguous() && byte_offset(self) % word == 0 && (end % word == 0 || end == a->requested);
  at::Tensor out = direct ? self : at::empty(self.sizes(), self.options());
  Allocation* o = allocation_of(out);
  prepare_device_write(o, byte_offset(out), n * esize);
  for (const CuRange& r : launch.split(n, word / esize)) {
    RunArgs args = launch.add_run();
    args.buffer(o, byte_offset(out) + r.begin * esize)
        .scalar(static_cast<int64_t>(state.first))
        .scalar(static_cast<int64_t>(state.second));
    for (const c10::Scalar& p : params) args.scalar(p);
    args.size(r.begin).size(r.size());
  }
  launch.run();
  mark_device_written(o);
  if (!direct) self.copy_(out);  // on the device
  return self;
}

// ATen's bounds for random_: the largest value a dtype holds exactly (floating: 2^digits).
int64_t max_random(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return int64_t(1) << std::numeric_limits<float>::digits;
    case at::kDouble: return int64_t(1) << std::numeric_limits<double>::digits;
    case at::kHalf: return int64_t(1) << 11;
    case at::kInt: return std::numeric_limits<int32_t>::max();
    case at::kLong: return std::numeric_limits<int64_t>::max();
    case at::kBool: return 1;
    default: throw KernelUnavailable(std::string("random_ of ") + c10::toString(t));
  }
}

}  // namespace

at::Tensor& fpga_uniform_(const KernelRef& kernel, at::Tensor& self, double from, double to,
                          std::optional<at::Generator> generator) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  return fill_random(kernel, self, generator, {from, to});
}

at::Tensor& fpga_normal_(const KernelRef& kernel, at::Tensor& self, double mean, double std,
                         std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return fill_random(kernel, self, generator, {mean, std});
}

at::Tensor& fpga_exponential_(const KernelRef& kernel, at::Tensor& self, double lambd,
                              std::optional<at::Generator> generator) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  return fill_random(kernel, self, generator, {lambd});
}

at::Tensor& fpga_bernoulli_(const KernelRef& kernel, at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return fill_random(kernel, self, generator, {p});
}

// random_ in [from, to): `range` = to - from, 0 meaning all 2^64 values.
at::Tensor& fpga_random_from(const KernelRef& kernel, at::Tensor& self, int64_t from, std::optional<int64_t> to,
                             std::optional<at::Generator> generator) {
  const int64_t last = to.has_value() ? *to - 1 : max_random(self.scalar_type());
  TORCH_CHECK(from <= last, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", last + 1);
  const uint64_t range = static_cast<uint64_t>(last) - static_cast<uint64_t>(from) + 1;
  return fill_random(kernel, self, generator, {from, static_cast<int64_t>(range)});
}

at::Tensor& fpga_random_to(const KernelRef& kernel, at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  return fpga_random_from(kernel, self, 0, to, generator);
}

at::Tensor& fpga_random_(const KernelRef& kernel, at::Tensor& self, std::optional<at::Generator> generator) {
  return fpga_random_from(kernel, self, 0, std::nullopt, generator);
}

}  // namespace aten_fpga
