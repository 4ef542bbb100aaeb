// The boxed CPU fallback for every op without an FPGA kernel, counted per op. The CPU kernel runs
// on the fpga tensors' host shadows in place (each synced for the span it reads, marked newer on the
// host where written), so the fallback is coherent with the device and its arguments alias one
// another as on the device; new results are copied to the device.
#pragma once

#include <ATen/native/CPUFallback.h>

namespace aten_fpga {

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Run one op through the fallback from a typed kernel (a table op whose dtype has no kernel).
template <class Op, class... Args>
decltype(auto) cpu_fallback_call(Args&&... args) {
  return at::native::call_fallback_fn<&cpu_fallback, Op>::call(std::forward<Args>(args)...);
}

}  // namespace aten_fpga
