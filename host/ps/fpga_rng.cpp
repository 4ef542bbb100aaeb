// fpga_rng: the generating kernels, whose element i is a function of i and the scalars alone.
//   uniform_, normal_, exponential_, bernoulli_, random_   kernels/hls/rng
//   arange (start, end, step, out)                         kernels/hls/range
//   randperm (generator, out)                              kernels/hls/randperm (a shuffle, one CU)
// Each random launch takes (seed, offset) from the tensor's device generator (or the one passed)
// and advances its offset by one; the rng kernels compute element i from philox(seed, (i, offset)),
// so the values depend on the seed and the sequence of random ops, not on how the range is split
// across compute units. They are not the CPU's values: the CPU generator is a Mersenne Twister
// (docs/rng.md).
#include <ATen/ATen.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/RangeUtils.h>
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


// Runs a generating kernel into `self` (any shape; element i in its row-major order): `scalars`
// are the kernel's, in order; the range [0, numel) is split across compute units at port words.
void generate(KernelLaunch& launch, at::Tensor& self, c10::ArrayRef<c10::Scalar> scalars) {
  const int64_t n = self.numel();
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
    args.buffer(o, byte_offset(out) + r.begin * esize);
    for (const c10::Scalar& p : scalars) args.scalar(p);
    args.size(r.begin).size(r.size());
  }
  launch.run();
  mark_device_written(o);
  if (!direct) self.copy_(out);  // on the device
}

// (seed, offset) for one launch from `gen` or the device's default generator.
std::pair<uint64_t, uint64_t> next_launch(const std::optional<at::Generator>& gen, c10::Device device) {
  auto* g = at::get_generator_or_default<FpgaGeneratorImpl>(gen, default_fpga_generator(device.index()));
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->next_launch();
}

// ATen's distribution templates (ATen/native/DistributionTemplates.h) check and normalize a random
// op's arguments -- random_'s bounds against the dtype (and moved to values it holds), uniform_'s
// range clamped to it, the warnings -- return early for an empty tensor, and then call a kernel
// functor they construct themselves. Ours (Draw*) hands the scalars it was called with to the host
// function, which launches the rng kernel with them: the checks, messages and bounds are ATen's.
struct Drawn {
  bool due = false;  // the template reached its kernel call
  c10::SmallVector<c10::Scalar, 2> params;
};
thread_local Drawn* t_drawn = nullptr;

// Points t_drawn at one launch's Drawn while ATen's template runs.
struct DrawScope {
  explicit DrawScope(Drawn* d) { t_drawn = d; }
  ~DrawScope() { t_drawn = nullptr; }
};

void draw(std::initializer_list<c10::Scalar> params) {
  t_drawn->due = true;
  t_drawn->params.assign(params.begin(), params.end());
}

template <typename RNG>
struct DrawUniform {
  void operator()(at::TensorIteratorBase&, double from, double to, std::optional<at::Generator>) { draw({from, to}); }
};
template <typename RNG>
struct DrawNormal {
  void operator()(const at::TensorBase&, double mean, double std, std::optional<at::Generator>) { draw({mean, std}); }
};
template <typename RNG>
struct DrawExponential {
  void operator()(at::TensorIteratorBase&, double lambd, std::optional<at::Generator>) { draw({lambd}); }
};
template <typename RNG>
struct DrawBernoulli {
  void operator()(const at::TensorBase&, double p, std::optional<at::Generator>) { draw({p}); }
};
// random_ in [from, from + range), range 0 meaning all 2^64 values (the kernel's scalars).
template <typename RNG>
struct DrawRandom {
  void operator()(at::TensorIteratorBase&, uint64_t range, int64_t from, std::optional<at::Generator>) {
    draw({from, static_cast<int64_t>(range)});
  }
  void operator()(at::TensorIteratorBase&, std::optional<at::Generator>) {
    draw({std::numeric_limits<int64_t>::lowest(), int64_t(0)});
  }
};

// Fills `self` with the kernel's distribution, with the scalars ATen's template `checked` (a call
// of one, given self) settles on. The kernel is looked up first: a dtype without one falls back to
// the CPU before the template has warned (it would warn twice).
template <class Checked>
at::Tensor& fill_random(const KernelRef& kernel, at::Tensor& self, const std::optional<at::Generator>& gen,
                        size_t nparams, Checked&& checked) {
  KernelLaunch launch(kernel, self.scalar_type(), self.device());
  launch.expect_args(1 + 2 + nparams + 2, "kernels/hls/rng/ops.yaml and fpga_rng.cpp disagree");
  Drawn drawn;
  {
    DrawScope scope(&drawn);
    checked();
  }
  if (!drawn.due) return self;  // an empty tensor
  c10::DeviceGuard guard(self.device());
  const std::pair<uint64_t, uint64_t> state = next_launch(gen, self.device());
  c10::SmallVector<c10::Scalar, 6> scalars{static_cast<int64_t>(state.first), static_cast<int64_t>(state.second)};
  scalars.append(drawn.params.begin(), drawn.params.end());
  generate(launch, self, scalars);
  return self;
}

}  // namespace

namespace templates = at::native::templates;

at::Tensor& fpga_uniform_(const KernelRef& kernel, at::Tensor& self, double from, double to,
                          std::optional<at::Generator> generator) {
  return fill_random(kernel, self, generator, 2, [&] {
    templates::uniform_impl_<DrawUniform, FpgaGeneratorImpl>(self, from, to, generator);
  });
}

at::Tensor& fpga_normal_(const KernelRef& kernel, at::Tensor& self, double mean, double std,
                         std::optional<at::Generator> generator) {
  return fill_random(kernel, self, generator, 2, [&] {
    templates::normal_impl_<DrawNormal, FpgaGeneratorImpl>(self, mean, std, generator);
  });
}

at::Tensor& fpga_exponential_(const KernelRef& kernel, at::Tensor& self, double lambd,
                              std::optional<at::Generator> generator) {
  return fill_random(kernel, self, generator, 1, [&] {
    templates::exponential_impl_<DrawExponential, FpgaGeneratorImpl>(self, lambd, generator);
  });
}

at::Tensor& fpga_bernoulli_(const KernelRef& kernel, at::Tensor& self, double p, std::optional<at::Generator> generator) {
  return fill_random(kernel, self, generator, 1, [&] {
    templates::bernoulli_impl_<DrawBernoulli, FpgaGeneratorImpl>(self, p, generator);
  });
}

at::Tensor& fpga_random_from(const KernelRef& kernel, at::Tensor& self, int64_t from, std::optional<int64_t> to,
                             std::optional<at::Generator> generator) {
  return fill_random(kernel, self, generator, 2, [&] {
    templates::random_from_to_impl<DrawRandom, FpgaGeneratorImpl>(self, from, to, generator);
  });
}

at::Tensor& fpga_random_to(const KernelRef& kernel, at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  return fpga_random_from(kernel, self, 0, to, generator);
}

// random_() draws from [0, 2^digits] (floating) or [0, max] (integral): ATen's random_from_to_impl
// with from = 0 and no `to` settles on that range.
at::Tensor& fpga_random_(const KernelRef& kernel, at::Tensor& self, std::optional<at::Generator> generator) {
  return fpga_random_from(kernel, self, 0, std::nullopt, generator);
}

// arange(start, end, step, out=): out[i] = start + step * i, in ATen's accumulate type (double;
// float for float16), n elements as ATen counts them. An integer dtype runs only where double is
// exact (integer start and step, every value within 2^53); beyond, the counted fallback.
at::Tensor& fpga_arange_out(const KernelRef& kernel, const at::Scalar& start, const at::Scalar& end,
                            const at::Scalar& step, at::Tensor& out) {
  KernelLaunch launch(kernel, out.scalar_type(), out.device());
  launch.expect_args(1 + 2 + 2, "kernels/hls/range/ops.yaml and fpga_rng.cpp disagree");
  const bool integral = c10::isIntegralType(out.scalar_type(), /*includeBool=*/false);
  const int64_t n = out.scalar_type() == at::kLong ? at::native::compute_arange_size<int64_t>(start, end, step)
                                                   : at::native::compute_arange_size<double>(start, end, step);
  // ATen's accumulate-type values of start and step (an integer dtype truncates them).
  const double first = integral ? static_cast<double>(start.to<int64_t>()) : start.to<double>();
  const double stride = integral ? static_cast<double>(step.to<int64_t>()) : step.to<double>();
  if (integral) {
    const double exact = 9007199254740992.0;  // 2^53
    const double last = first + stride * static_cast<double>(n > 0 ? n - 1 : 0);
    if (std::abs(static_cast<double>(start.to<int64_t>())) > exact || std::abs(stride) > exact ||
        std::abs(last) > exact) {
      throw KernelUnavailable("arange with integers beyond 2^53");
    }
  }
  if (out.numel() != n) {
    if (out.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ", out.numel(),
                 " which does not match the computed number of elements ", n, ". Note that this may occur as a "
                 "result of rounding error. The out tensor will be resized to a tensor of shape (", n, ",).");
    }
    out.resize_({n});
  }
  if (n == 0) return out;
  c10::DeviceGuard guard(out.device());
  const c10::Scalar scalars[] = {first, stride};
  generate(launch, out, scalars);
  return out;
}

// randperm(n, generator=, out=): the identity shuffled by Fisher-Yates on the device, each swap
// position a Philox draw (kernels/hls/include/aten_fpga_randperm.h). One launch, one compute unit:
// the swaps form one chain, so the permutation depends only on (seed, offset), whatever the image.
at::Tensor& fpga_randperm_out(const KernelRef& kernel, int64_t n, std::optional<at::Generator> generator,
                              at::Tensor& out) {
  KernelLaunch launch(kernel, out.scalar_type(), out.device());
  launch.expect_args(1 + 2 + 1, "kernels/hls/randperm/ops.yaml and fpga_rng.cpp disagree");
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(!generator.has_value() || !generator->defined() || out.device() == generator->device(),
              "Expected a '", out.device(), "' generator device but found '", generator->device(), "'");
  TORCH_CHECK(out.scalar_type() != at::kInt || n - 1 <= std::numeric_limits<int32_t>::max(),
              "n is too large for result tensor type: '", out.toString(), "'");
  out.resize_({n});
  if (n == 0) return out;
  c10::DeviceGuard guard(out.device());
  const std::pair<uint64_t, uint64_t> state = next_launch(generator, out.device());
  const bool direct = out.is_contiguous();
  at::Tensor dst = direct ? out : at::empty({n}, out.options());
  Allocation* o = allocation_of(dst);
  prepare_device_write(o, byte_offset(dst), n * dst.element_size());
  launch.add_run()
      .buffer(o, byte_offset(dst))
      .scalar(static_cast<int64_t>(state.first))
      .scalar(static_cast<int64_t>(state.second))
      .size(n);
  launch.run();
  mark_device_written(o);
  if (!direct) out.copy_(dst);
  return out;
}

}  // namespace aten_fpga
