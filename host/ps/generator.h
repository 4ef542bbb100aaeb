// The device's random number generator: Philox4x32-10 state (seed, offset) per fpga device. The
// rng kernels (kernels/hls/rng) are counter-based: a launch evaluates philox(seed, (index,
// offset)) for each element index, and the generator advances `offset` by one per launch, so
// the streams depend on the seed and the sequence of random ops only -- not on the number of
// compute units or the XCL_OPT level. It is torch.Generator(device="fpga") and the default
// generator ATen's PrivateUse1 hooks return (torch.manual_seed seeds it).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>

namespace aten_fpga {

class FpgaGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit FpgaGeneratorImpl(c10::DeviceIndex index = -1, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;  // a nondeterministic seed, set and returned
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  // The state is 16 bytes, a uint8 CPU tensor: seed then offset, little endian.
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // (seed, offset) for one launch, advancing the offset. Callers hold the generator's mutex_.
  std::pair<uint64_t, uint64_t> next_launch() { return {seed_, offset_++}; }

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  FpgaGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The default generator of fpga device `index` (-1: the current device).
const at::Generator& default_fpga_generator(c10::DeviceIndex index);

}  // namespace aten_fpga
