// The GEMM driver's entry for fused GEMMs (host/ps/fpga_gemm.cpp, launched by fpga_fused.cpp).
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "launch.h"

namespace aten_fpga {

// c = alpha * a @ b + beta * self on `launch`, a fused GEMM kernel (aten_fpga/compile): a [m, k]
// and b [k, n] (or batches of them, [batch, m, k] and [batch, k, n]) are addressed as the table's
// GEMM does; `inputs` are the epilogue's operands (self among them), `outputs` c -- contiguous
// [m, n] or [batch, m, n] -- then the epilogue's further outputs and reductions. Ports are
// contiguous and start on a port word. With `band_strides` (each port's elements per row of c) it
// runs in bands of rows on the kernel's compute units, else whole on one.
void run_fused_gemm(KernelLaunch& launch, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha,
                    const c10::Scalar& beta, const std::vector<at::Tensor>& inputs,
                    const std::vector<at::Tensor>& outputs, const std::vector<int64_t>& band_strides);

}  // namespace aten_fpga
