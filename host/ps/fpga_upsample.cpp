// fpga_upsample: 2-D nearest, bilinear and bicubic upsampling (the segmentation heads, image
// models' resizing) from the gather, pointwise and GEMM kernels, one spatial dim at a time.
//   forward, nearest    index_select of the source rows, then columns (exact)
//   forward, bilinear   along W, then H: x[.., i0] * l0 + x[.., i1] * l1 (index_select, mul, add),
//                       ATen's separable formula h0 (w0 x00 + w1 x01) + h1 (w0 x10 + w1 x11)
//   forward, bicubic    the same with four taps, summed in tap order as ATen's formula,
//                       sum_j h_j (((w0 x_j0 + w1 x_j1) + w2 x_j2) + w3 x_j3): within float32
//                       rounding of ATen's CPU loop (not bit exact, docs/kernels.md)
//   backward (both)     the transposed interpolation: A_h^T @ grad @ A_w (matmul: bmm/mm), with
//                       A the [out, in] matrix of the weights above
// Indices and weights are ATen's own (ATen/native/UpSample.h), computed on the host: O(H + W)
// numbers. The backward sums each input pixel's contributions in the GEMM's order, not ATen's (a
// float32 rounding apart), and a non-finite gradient reaches the whole row and column of its
// pixel's neighbours through the zeros of A.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
#include <c10/core/DeviceGuard.h>

#include "FPGAType.h"
#include "fpga_kernel.h"

namespace aten_fpga {
namespace {

// One spatial dim's interpolation: out index o reads sum_j in[index[j][o]] * weight[j][o], summed
// in j order (ATen's); nearest has one tap and no weights.
struct Taps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<float>> weight;
};

Taps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  const float ratio = at::native::area_pixel_compute_scale<float>(in, out, align_corners, scale);
  Taps t{std::vector<std::vector<int64_t>>(2), std::vector<std::vector<float>>(2)};
  for (int64_t o = 0; o < out; ++o) {
    int64_t i0, i1;
    float l0, l1;
    at::native::compute_source_index_and_lambda<float, float>(i0, i1, l0, l1, ratio, o, in, out, align_corners);
    t.index[0].push_back(i0), t.index[1].push_back(i1), t.weight[0].push_back(l0), t.weight[1].push_back(l1);
  }
  return t;
}

// ATen's cubic taps (UpSampleKernel.cpp, HelperInterpCubic): the four source pixels around the
// cubic source index, clamped to the edge, with Keys' coefficients (A = -0.75) of its fraction.
Taps cubic_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  const float ratio = at::native::area_pixel_compute_scale<float>(in, out, align_corners, scale);
  Taps t{std::vector<std::vector<int64_t>>(4), std::vector<std::vector<float>>(4)};
  for (int64_t o = 0; o < out; ++o) {
    const float real = at::native::area_pixel_compute_source_index<float>(ratio, o, align_corners, /*cubic=*/true);
    int64_t i;
    float lambda, w[4];
    at::native::guard_index_and_lambda(real, in, i, lambda);
    at::native::get_cubic_upsample_coefficients<float>(w, lambda);
    for (int j = 0; j < 4; ++j) {
      t.index[j].push_back(std::max(std::min(i + j - 1, in - 1), int64_t{0}));
      t.weight[j].push_back(w[j]);
    }
  }
  return t;
}

Taps nearest_taps(int64_t in, int64_t out, std::optional<double> scale) {
  Taps t{std::vector<std::vector<int64_t>>(1), {}};  // no weights: nearest
  for (int64_t o = 0; o < out; ++o) t.index[0].push_back(at::native::nearest_idx(o, in, out, scale));
  return t;
}

at::Tensor on(const at::Tensor& like, std::vector<int64_t> v) {
  return at::tensor(v, at::kLong).to(like.device());
}

// The taps' weights as a [1, ..., n, (1)] tensor of like's dtype on its device, broadcasting along dim.
at::Tensor weights(const at::Tensor& like, const std::vector<float>& w, int64_t dim) {
  std::vector<int64_t> shape(like.dim(), 1);
  shape[dim] = static_cast<int64_t>(w.size());
  return at::tensor(w, at::kFloat).to(like.scalar_type()).view(shape).to(like.device());
}

at::Tensor interpolate(const at::Tensor& x, const Taps& t, int64_t dim) {
  at::Tensor acc = at::index_select(x, dim, on(x, t.index[0]));
  if (t.weight.empty()) return acc;  // nearest
  acc = acc * weights(x, t.weight[0], dim);
  for (size_t j = 1; j < t.index.size(); ++j)
    acc = acc + at::index_select(x, dim, on(x, t.index[j])) * weights(x, t.weight[j], dim);
  return acc;
}

// A: [out, in] with A[o, index[j][o]] += weight[j][o] (like's dtype, on its device).
at::Tensor matrix(const at::Tensor& like, const Taps& t, int64_t in) {
  const int64_t out = static_cast<int64_t>(t.index[0].size());
  at::Tensor a = at::zeros({out, in}, at::kFloat);
  auto acc = a.accessor<float, 2>();
  for (size_t j = 0; j < t.index.size(); ++j)
    for (int64_t o = 0; o < out; ++o) acc[o][t.index[j][o]] += t.weight.empty() ? 1.0f : t.weight[j][o];
  return a.to(like.scalar_type()).to(like.device());
}

// self's kernel exists and self is [N, C, H, W] on the device (checked before any side effect).
void check_input(const KernelRef& kernel, const at::Tensor& t, const char* op) {
  if (!t.is_privateuseone()) throw KernelUnavailable(std::string(op) + " of a CPU tensor");
  kernel_for(kernel, t.scalar_type(), t.device());  // KernelUnavailable before any side effect
  TORCH_CHECK(t.dim() == 4, op, "(): expected a 4-D input (N, C, H, W), got ", t.dim(), " dims");
}

at::Tensor& forward(const char* op, const at::Tensor& self, at::IntArrayRef output_size,
                    const Taps& h, const Taps& w, at::Tensor& out) {
  TORCH_CHECK(output_size.size() == 2, op, "(): output_size must have 2 elements, got ", output_size.size());
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, {self.size(0), self.size(1), output_size[0], output_size[1]});
  if (out.numel() == 0) return out;
  out.copy_(interpolate(interpolate(self, w, 3), h, 2));  // on the device
  return out;
}

at::Tensor& backward(const KernelRef& kernel, const char* op, const at::Tensor& grad_output, at::IntArrayRef input_size,
                     const Taps& h, const Taps& w, at::Tensor& grad_input) {
  check_input(kernel, grad_output, op);
  TORCH_CHECK(input_size.size() == 4, op, "(): input_size must have 4 elements, got ", input_size.size());
  c10::DeviceGuard guard(grad_output.device());
  at::native::resize_output(grad_input, input_size);
  if (grad_input.numel() == 0) return grad_input;
  const at::Tensor ah = matrix(grad_output, h, input_size[2]);  // [Ho, Hi]
  const at::Tensor aw = matrix(grad_output, w, input_size[3]);  // [Wo, Wi]
  grad_input.copy_(at::matmul(at::matmul(ah.t(), grad_output), aw));
  return grad_input;
}

}  // namespace

at::Tensor& fpga_upsample_bilinear2d_out(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef output_size,
                                         bool align_corners, std::optional<double> scales_h,
                                         std::optional<double> scales_w, at::Tensor& out) {
  check_input(kernel, self, "upsample_bilinear2d");
  return forward("upsample_bilinear2d", self, output_size,
                 linear_taps(self.size(2), output_size[0], align_corners, scales_h),
                 linear_taps(self.size(3), output_size[1], align_corners, scales_w), out);
}

at::Tensor& fpga_upsample_bilinear2d_backward_out(const KernelRef& kernel, const at::Tensor& grad_output,
                                                  at::IntArrayRef output_size, at::IntArrayRef input_size,
                                                  bool align_corners, std::optional<double> scales_h,
                                                  std::optional<double> scales_w, at::Tensor& grad_input) {
  TORCH_CHECK(input_size.size() == 4 && output_size.size() == 2,
              "upsample_bilinear2d_backward(): expected input_size of 4 and output_size of 2 elements");
  return backward(kernel, "upsample_bilinear2d_backward", grad_output, input_size,
                  linear_taps(input_size[2], output_size[0], align_corners, scales_h),
                  linear_taps(input_size[3], output_size[1], align_corners, scales_w), grad_input);
}

at::Tensor& fpga_upsample_bicubic2d_out(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef output_size,
                                        bool align_corners, std::optional<double> scales_h,
                                        std::optional<double> scales_w, at::Tensor& out) {
  check_input(kernel, self, "upsample_bicubic2d");
  TORCH_CHECK(output_size.size() == 2, "upsample_bicubic2d(): output_size must have 2 elements, got ",
              output_size.size());
  return forward("upsample_bicubic2d", self, output_size,
                 cubic_taps(self.size(2), output_size[0], align_corners, scales_h),
                 cubic_taps(self.size(3), output_size[1], align_corners, scales_w), out);
}

at::Tensor& fpga_upsample_bicubic2d_backward_out(const KernelRef& kernel, const at::Tensor& grad_output,
                                                 at::IntArrayRef output_size, at::IntArrayRef input_size,
                                                 bool align_corners, std::optional<double> scales_h,
                                                 std::optional<double> scales_w, at::Tensor& grad_input) {
  TORCH_CHECK(input_size.size() == 4 && output_size.size() == 2,
              "upsample_bicubic2d_backward(): expected input_size of 4 and output_size of 2 elements");
  return backward(kernel, "upsample_bicubic2d_backward", grad_output, input_size,
                  cubic_taps(input_size[2], output_size[0], align_corners, scales_h),
                  cubic_taps(input_size[3], output_size[1], align_corners, scales_w), grad_input);
}

at::Tensor& fpga_upsample_nearest2d_out(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef output_size,
                                        std::optional<double> scales_h, std::optional<double> scales_w,
                                        at::Tensor& out) {
  check_input(kernel, self, "upsample_nearest2d");
  return forward("upsample_nearest2d", self, output_size, nearest_taps(self.size(2), output_size[0], scales_h),
                 nearest_taps(self.size(3), output_size[1], scales_w), out);
}

at::Tensor& fpga_upsample_nearest2d_backward_out(const KernelRef& kernel, const at::Tensor& grad_output,
                                                 at::IntArrayRef output_size, at::IntArrayRef input_size,
                                                 std::optional<double> scales_h, std::optional<double> scales_w,
                                                 at::Tensor& grad_input) {
  TORCH_CHECK(input_size.size() == 4 && output_size.size() == 2,
              "upsample_nearest2d_backward(): expected input_size of 4 and output_size of 2 elements");
  return backward(kernel, "upsample_nearest2d_backward", grad_output, input_size,
                  nearest_taps(input_size[2], output_size[0], scales_h),
                  nearest_taps(input_size[3], output_size[1], scales_w), grad_input);
}

}  // namespace aten_fpga
