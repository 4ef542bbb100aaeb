#include "generator.h"

#include <ATen/Utils.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime.h"

namespace aten_fpga {

FpgaGeneratorImpl::FpgaGeneratorImpl(c10::DeviceIndex index, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void FpgaGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;  // a new seed restarts the stream
}

uint64_t FpgaGeneratorImpl::seed() {
  std::random_device rd;
  const uint64_t s = (static_cast<uint64_t>(rd()) << 32) | rd();
  set_current_seed(s);
  return s;
}

void FpgaGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(new_state.numel() == 16, "fpga generator state: expected 16 bytes (seed, offset), got ",
              new_state.numel(), "; pass a tensor from torch.fpga.get_rng_state() or Generator.get_state()");
  uint64_t v[2];
  std::memcpy(v, new_state.data(), sizeof(v));
  seed_ = v[0];
  offset_ = v[1];
}

c10::intrusive_ptr<c10::TensorImpl> FpgaGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({16}, at::kByte, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  const uint64_t v[2] = {seed_, offset_};
  std::memcpy(state.data_ptr(), v, sizeof(v));
  return state.getIntrusivePtr();
}

FpgaGeneratorImpl* FpgaGeneratorImpl::clone_impl() const {
  auto* g = new FpgaGeneratorImpl(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& default_fpga_generator(c10::DeviceIndex index) {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (int i = 0; i < device_count(); ++i) {
      v.push_back(at::make_generator<FpgaGeneratorImpl>(static_cast<c10::DeviceIndex>(i)));
    }
    return v;
  }();
  const int i = index < 0 ? current_device() : index;
  check_device_index(i);
  return gens[i];
}

}  // namespace aten_fpga
