// batch_norm, layer_norm and group_norm (the table's `host:` entries; ATen's impls are CPU kernels
// with no DispatchStub). The statistics are reduce kernels on the device -- the mean, and the
// variance in one pass without cancellation (reduce/std_var: Chan's pairwise update, accumulated
// in double for float32) -- and the normalization, the running statistics and the gradients are
// pointwise kernels over per-channel (or per-row) vectors broadcast on the device. float16
// computes in float and rounds once, as ATen's CPU kernels do.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <numeric>

#include "FPGAType.h"
#include "fpga_kernel.h"
#include "runtime.h"

namespace aten_fpga {
namespace {

at::Tensor opmath(const at::Tensor& t) { return t.scalar_type() == at::kHalf ? t.to(at::kFloat) : t; }

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Every dim but 1 (the channels), and the shape that broadcasts a per-channel vector over the input.
struct Channels {
  std::vector<int64_t> reduce, shape;
  int64_t n = 1;  // elements per channel
};

Channels channels(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input of 2 or more dims, got ", input.dim());
  Channels c;
  c.shape.assign(input.dim(), 1);
  c.shape[1] = input.size(1);
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d != 1) {
      c.reduce.push_back(d);
      c.n *= input.size(d);
    }
  }
  return c;
}

// 1 / sqrt(var + eps), as ATen's batch_norm computes the inverse standard deviation.
at::Tensor invstd(const at::Tensor& var, double eps) { return at::reciprocal(at::sqrt(at::add(var, eps))); }

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_batch_norm(
    const KernelRef& kernel, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  kernel_for(kernel, input.scalar_type(), input.device());  // KernelUnavailable before any side effect
  const Channels c = channels(input);
  const at::Tensor x = opmath(input);
  at::Tensor mean, istd;
  if (training) {
    mean = at::mean(x, c.reduce);
    const at::Tensor var = at::var(x, c.reduce, /*correction=*/0);  // biased: what normalizes
    istd = invstd(var, eps);
    // running = (1 - momentum) * running + momentum * batch statistic (the variance unbiased).
    if (defined(running_mean)) running_mean->mul_(1 - momentum).add_(mean, momentum);
    if (defined(running_var)) {
      const double unbias = static_cast<double>(c.n) / static_cast<double>(std::max<int64_t>(c.n - 1, 1));
      running_var->mul_(1 - momentum).add_(var, momentum * unbias);
    }
  } else {
    TORCH_CHECK(defined(running_mean) && defined(running_var),
                "batch_norm in eval mode needs running_mean and running_var");
    mean = opmath(*running_mean);
    istd = invstd(opmath(*running_var), eps);
  }
  // out = x * alpha + beta with alpha = invstd * weight, beta = bias - mean * alpha (ATen's form).
  const at::Tensor alpha = defined(weight) ? at::mul(istd, *weight) : istd;
  const at::Tensor shift = at::mul(mean, alpha);
  const at::Tensor beta = defined(bias) ? at::sub(*bias, shift) : at::neg(shift);
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::add_out(out, at::mul(x, alpha.view(c.shape)), beta.view(c.shape));
  if (!training) {
    return {out, at::empty({0}, x.options()), at::empty({0}, x.options())};
  }
  return {out, mean, istd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_batch_norm_backward(
    const KernelRef& kernel, const at::Tensor& grad_out, const at::Tensor& input,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, const std::optional<at::Tensor>& save_mean,
    const std::optional<at::Tensor>& save_invstd, bool train, double eps, std::array<bool, 3> output_mask) {
  kernel_for(kernel, input.scalar_type(), input.device());
  const Channels c = channels(input);
  const at::Tensor x = opmath(input), g = opmath(grad_out);
  const at::Tensor mean = train ? *save_mean : opmath(*running_mean);
  const at::Tensor istd = train ? *save_invstd : invstd(opmath(*running_var), eps);
  const at::Tensor xmu = at::sub(x, mean.view(c.shape));
  const at::Tensor gsum = at::sum(g, c.reduce);
  const at::Tensor dotp = at::sum(at::mul(g, xmu), c.reduce);  // sum(grad * (x - mean)) per channel
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor scale = defined(weight) ? at::mul(istd, *weight) : istd;  // invstd * weight
    grad_input = at::empty_like(input, at::MemoryFormat::Contiguous);
    if (train) {
      // (grad - mean(grad) - (x - mean) * dotp * invstd^2 / n) * invstd * weight, as ATen.
      const double n = static_cast<double>(c.n);
      const at::Tensor k = at::div(at::mul(at::mul(dotp, istd), istd), n);
      const at::Tensor centred = at::sub(at::sub(g, at::div(gsum, n).view(c.shape)), at::mul(xmu, k.view(c.shape)));
      at::mul_out(grad_input, centred, scale.view(c.shape));
    } else {
      at::mul_out(grad_input, g, scale.view(c.shape));
    }
  }
  if (output_mask[1]) grad_weight = at::mul(dotp, istd);
  if (output_mask[2]) grad_bias = gsum;
  return {grad_input, grad_weight, grad_bias};
}

// --- layer_norm: statistics over the trailing normalized dims of each row -----------------------

namespace {

// The trailing dims layer_norm normalizes over, and the leading ones (its rows).
struct Rows {
  std::vector<int64_t> inner, outer;
};

Rows rows(const at::Tensor& input, size_t normalized_dims) {
  TORCH_CHECK(normalized_dims >= 1 && normalized_dims <= static_cast<size_t>(input.dim()),
              "layer_norm: normalized_shape has ", normalized_dims, " dims, the input ", input.dim());
  Rows r;
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_dims);
  for (int64_t d = 0; d < input.dim(); ++d) (d < axis ? r.outer : r.inner).push_back(d);
  return r;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_layer_norm(const KernelRef& kernel,
                                                                      const at::Tensor& input,
                                                                      at::IntArrayRef normalized_shape,
                                                                      const std::optional<at::Tensor>& weight,
                                                                      const std::optional<at::Tensor>& bias,
                                                                      double eps) {
  kernel_for(kernel, input.scalar_type(), input.device());
  const Rows r = rows(input, normalized_shape.size());
  const at::Tensor x = opmath(input);
  const at::Tensor mean = at::mean(x, r.inner, /*keepdim=*/true);
  const at::Tensor rstd = invstd(at::var(x, r.inner, /*correction=*/0, /*keepdim=*/true), eps);
  at::Tensor y = at::mul(at::sub(x, mean), rstd);
  if (defined(weight)) y = at::mul(y, *weight);
  if (defined(bias)) y = at::add(y, *bias);
  return {y.to(input.scalar_type()), mean.to(input.scalar_type()), rstd.to(input.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_layer_norm_backward(
    const KernelRef& kernel, const at::Tensor& grad_out, const at::Tensor& input,
    at::IntArrayRef normalized_shape, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  kernel_for(kernel, input.scalar_type(), input.device());
  const Rows r = rows(input, normalized_shape.size());
  const at::Tensor x = opmath(input), g = opmath(grad_out);
  const at::Tensor xhat = at::mul(at::sub(x, opmath(mean)), opmath(rstd));
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    // rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) over each row, gw = grad * weight.
    const at::Tensor gw = defined(weight) ? at::mul(g, *weight) : g;
    const at::Tensor centred = at::sub(at::sub(gw, at::mean(gw, r.inner, true)),
                                       at::mul(xhat, at::mean(at::mul(gw, xhat), r.inner, true)));
    grad_input = at::mul(centred, opmath(rstd)).to(input.scalar_type());
  }
  // The affine parameters' gradients sum over the rows (none when the input is one row).
  const auto over_rows = [&](const at::Tensor& t) { return r.outer.empty() ? t : at::sum(t, r.outer); };
  if (output_mask[1] && defined(weight)) grad_weight = over_rows(at::mul(g, xhat)).to(weight->scalar_type());
  if (output_mask[2] && defined(bias)) grad_bias = over_rows(g).to(bias->scalar_type());
  return {grad_input, grad_weight, grad_bias};
}

// --- group_norm: layer_norm's statistics within each (sample, group), weights per channel ---------

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_group_norm(const KernelRef& kernel, const at::Tensor& input,
                                                                      const std::optional<at::Tensor>& weight,
                                                                      const std::optional<at::Tensor>& bias, int64_t N,
                                                                      int64_t C, int64_t HxW, int64_t group,
                                                                      double eps) {
  kernel_for(kernel, input.scalar_type(), input.device());
  TORCH_CHECK(group > 0 && C % group == 0, "group_norm: ", C, " channels do not split into ", group, " groups");
  const at::Tensor x = opmath(input).reshape({N, group, C / group * HxW});
  const at::Tensor mean = at::mean(x, 2, /*keepdim=*/true);
  const at::Tensor rstd = invstd(at::var(x, 2, /*correction=*/0, /*keepdim=*/true), eps);
  at::Tensor y = at::mul(at::sub(x, mean), rstd).view({N, C, HxW});
  if (defined(weight)) y = at::mul(y, weight->view({1, C, 1}));
  if (defined(bias)) y = at::add(y, bias->view({1, C, 1}));
  const at::ScalarType dtype = input.scalar_type();
  return {y.view(input.sizes()).to(dtype), mean.view({N, group}).to(dtype), rstd.view({N, group}).to(dtype)};
}


std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_group_norm_backward(
    const KernelRef& kernel, const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, int64_t N, int64_t C, int64_t HxW, int64_t group,
    std::array<bool, 3> output_mask) {
  kernel_for(kernel, input.scalar_type(), input.device());
  TORCH_CHECK(group > 0 && C % group == 0, "group_norm: ", C, " channels do not split into ", group, " groups");
  // [N, group, channels per group, HxW]: statistics are per (N, group), weights per channel.
  const std::vector<int64_t> shape = {N, group, C / group, HxW};
  const at::Tensor x = opmath(input).reshape(shape), g = opmath(grad_out).reshape(shape);
  const at::Tensor r = opmath(rstd).view({N, group, 1, 1});
  const at::Tensor xhat = at::mul(at::sub(x, opmath(mean).view({N, group, 1, 1})), r);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor gw = defined(weight) ? at::mul(g, weight->view({1, group, C / group, 1})) : g;
    const std::vector<int64_t> within = {2, 3};
    const at::Tensor centred = at::sub(at::sub(gw, at::mean(gw, within, true)),
                                       at::mul(xhat, at::mean(at::mul(gw, xhat), within, true)));
    grad_input = at::mul(centred, r).to(input.scalar_type()).view(input.sizes());
  }
  const std::vector<int64_t> per_channel = {0, 3};
  if (output_mask[1]) grad_weight = at::sum(at::mul(g, xhat), per_channel).reshape({C}).to(input.scalar_type());
  if (output_mask[2]) grad_bias = at::sum(g, per_channel).reshape({C}).to(input.scalar_type());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace aten_fpga
