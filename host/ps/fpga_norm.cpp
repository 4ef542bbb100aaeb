// batch_norm, layer_norm and group_norm and their backwards (the table's `host:` entries; ATen's
// impls are CPU kernels with no DispatchStub), on the kernels/hls/norm kernels:
//   norm_stats       per row (a channel, a sample's group, a layer_norm row): mean, biased var and
//                    invstd in one pass, the sums about the row's first element in double;
//   norm_affine      the normalization in one streaming pass: ((x - mean[r]) * scale[r] + shift[r]) *
//                    gamma + beta (centred first: a large mean costs the output no digits);
//   norm_grad_stats  the backward's two sums per row: sum(dy * g) and sum(dy * g * (x - mean));
//   norm_backward    grad_in = a[r] * g * dy + b[r] * (x - mean[r]) + c[r];
//   norm_grad_stats_cols  layer_norm's: norm_grad_stats and, in the same pass, the weight's and
//                    bias' gradients (per column, sums over the rows).
// A row is `segs` segments of `len` elements (batch_norm: one per sample of the channel), laid out
// as [planes, pitch] on the device (planes.h). The few per-row vectors between the passes (the
// coefficients from the statistics, weights and running stats) are float32 pointwise kernels.
// float16 computes in float and rounds once, as ATen's CPU kernels do.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <string>
#include <vector>

#include "FPGAType.h"
#include "afpga_abi.h"
#include "allocator.h"
#include "fpga_kernel.h"
#include "launch.h"
#include "planes.h"

namespace aten_fpga {
namespace {

const KernelRef kStats{"norm_stats"};
const KernelRef kAffine{"norm_affine"};
const KernelRef kGradStats{"norm_grad_stats"};
const KernelRef kBackward{"norm_backward"};
const KernelRef kGradStatsCols{"norm_grad_stats_cols"};

constexpr int64_t kMaxColumns = 16384;  // MAX_COLS of kernels/hls/norm: layer_norm's weight on chip
// The kernels' flags: which column vectors they read; `grad` is one plane, repeated; (bit 3 is
// norm_stats' invstd in float) norm_affine reads its per-row shift.
constexpr uint64_t kGamma = 1, kBeta = 2, kRepeatedGrad = 4, kShift = 16;

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// A per-row or per-column vector as the kernels read it: float32, unit stride, on the device.
at::Tensor vec(const at::Tensor& t) { return t.to(at::kFloat).contiguous().view({-1}); }

// The rows a norm kernel walks: row r is `segs` segments of `len` elements, segment s at element
// r * row_stride + s * seg_stride of `data` ([planes, pitch], each segment starting a port word).
struct Rows {
  at::Tensor data;
  int64_t rows, segs, len, row_stride, seg_stride;
  bool repeated = false;  // `data` is one plane, the same for every row and segment (a gradient only)
};

// If every dim of `t` before its last `inner` has stride 0 (the expanded gradient of y.sum()): that
// one plane as [1, pitch]; else undefined.
at::Tensor repeated_plane(const at::Tensor& t, int inner, int64_t pitch, int64_t word) {
  if (t.dim() <= inner) return {};
  at::Tensor plane = t;
  for (int64_t d = 0; d < t.dim() - inner; ++d) {
    if (t.size(d) > 1 && t.stride(d) != 0) return {};
    plane = plane.narrow(d, 0, 1);
  }
  return to_planes(plane, inner, pitch, word);
}

// Port word facts of a kernel: (elements per word of its first port, bytes per word).
std::pair<int64_t, int64_t> words_of(const KernelRef& ref, const at::Tensor& x) {
  const KernelInfo& info = kernel_for(ref, x.scalar_type(), x.device());
  return {port_lanes(info, 0), info.args[0].bytes};
}

// Each of `ports` (in the kernel's order) is data laid out as `r.data` (Data: offset by the rows a
// unit skips), a per-row vector (Row), a column vector (Column: whole, to every unit), a unit's own
// `len` column sums (Partial: [units, len]), or one plane every row reads (Plane: a repeated gradient).
enum class Port { Data, Row, Column, Partial, Plane };
struct Operand {
  at::Tensor t;
  Port kind;
  bool output;
};

// Runs `ref` over the rows of `r` split across the compute units; returns how many ran.
int64_t run_rows(const KernelRef& ref, const at::Tensor& like, const Rows& r, const std::vector<Operand>& ports,
              std::optional<double> eps, uint64_t flags) {
  const c10::Device where = like.device();
  c10::DeviceGuard guard(where);
  KernelLaunch launch(ref, like.scalar_type(), where);
  launch.expect_args(ports.size() + (eps ? 1 : 0) + 6, "rebuild the image (scons) with this host");
  std::vector<Allocation*> allocs;
  for (const Operand& p : ports) {
    Allocation* a = allocation_of(p.t);
    if (p.output) {
      prepare_device_write(a, byte_offset(p.t), p.t.nbytes());
    } else {
      sync_to_device(a);
    }
    allocs.push_back(a);
  }
  int64_t units = 0;
  if (r.rows > 0 && r.segs * r.len > 0) {
    for (const CuRange& cu : launch.split(r.rows, 1, r.segs * r.len)) {
      RunArgs run = launch.add_run();
      for (size_t i = 0; i < ports.size(); ++i) {
        const Operand& p = ports[i];
        const int64_t skip = p.kind == Port::Data  ? cu.begin * r.row_stride
                             : p.kind == Port::Row ? cu.begin
                             : p.kind == Port::Partial ? units * r.len
                                                       : 0;
        run.buffer(allocs[i], byte_offset(p.t) + skip * p.t.element_size());
      }
      if (eps) run.scalar(*eps);
      run.size(cu.size()).size(r.segs).size(r.len).size(r.row_stride).size(r.seg_stride).size(flags);
      ++units;
    }
    launch.run();
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].output) mark_device_written(allocs[i]);
  }
  return units;
}

at::Tensor empty_like_rows(const Rows& r) { return at::empty_like(r.data, at::MemoryFormat::Contiguous); }

// norm_stats: (mean, biased var, invstd = 1 / sqrt(var + eps)) per row, float32. invstd as ATen
// computes it, from the float variance (one beyond float's range makes it 0): batch_norm's in
// double, layer_norm's and group_norm's in float (`float_rstd`).
std::tuple<at::Tensor, at::Tensor, at::Tensor> stats(const Rows& r, double eps, bool float_rstd) {
  const auto opts = r.data.options().dtype(at::kFloat);
  at::Tensor mean = at::empty({r.rows}, opts), var = at::empty({r.rows}, opts), invstd = at::empty({r.rows}, opts);
  run_rows(kStats, r.data, r,
           {{r.data, Port::Data, false}, {mean, Port::Row, true}, {var, Port::Row, true}, {invstd, Port::Row, true}},
           eps, float_rstd ? 8 : 0);
  return {mean, var, invstd};
}

// norm_affine: rows of ((x - mean[r]) * scale[r] + shift[r]) * gamma + beta (gamma, beta
// undefined: absent; shift undefined: 0). An absent vector's port gets another row vector, unread.
at::Tensor affine(const Rows& r, const at::Tensor& mean, const at::Tensor& scale, const at::Tensor& shift,
                  const at::Tensor& gamma, const at::Tensor& beta) {
  at::Tensor out = empty_like_rows(r);
  const uint64_t flags = (shift.defined() ? kShift : 0) | (gamma.defined() ? kGamma : 0) | (beta.defined() ? kBeta : 0);
  run_rows(kAffine, r.data, r,
           {{r.data, Port::Data, false}, {mean, Port::Row, false}, {scale, Port::Row, false},
            {shift.defined() ? shift : mean, Port::Row, false},
            {gamma.defined() ? gamma : scale, Port::Column, false}, {beta.defined() ? beta : scale, Port::Column, false},
            {out, Port::Data, true}},
           std::nullopt, flags);
  return out;
}

// A gradient's port: its rows, or its one repeated plane.
Operand gradient(const Rows& g) { return {g.data, g.repeated ? Port::Plane : Port::Data, false}; }
uint64_t repeated(const Rows& g) { return g.repeated ? kRepeatedGrad : 0; }

// norm_grad_stats: (sum(dy * g), sum(dy * g * (x - mean[r]))) per row, g = gamma or 1; `grad`
// laid out as `x`.
std::pair<at::Tensor, at::Tensor> grad_stats(const Rows& grad, const Rows& x, const at::Tensor& mean,
                                             const at::Tensor& gamma) {
  const auto opts = x.data.options().dtype(at::kFloat);
  at::Tensor sum_dy = at::empty({x.rows}, opts), sum_dy_xmu = at::empty({x.rows}, opts);
  run_rows(kGradStats, x.data, x,
           {gradient(grad), {x.data, Port::Data, false}, {mean, Port::Row, false},
            {gamma.defined() ? gamma : mean, Port::Column, false}, {sum_dy, Port::Row, true},
            {sum_dy_xmu, Port::Row, true}},
           std::nullopt, (gamma.defined() ? kGamma : 0) | repeated(grad));
  return {sum_dy, sum_dy_xmu};
}

// norm_backward: rows of a[r] * g * dy + b[r] * (x - mean[r]) + c[r].
at::Tensor backward(const Rows& grad, const Rows& x, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                    const at::Tensor& mean, const at::Tensor& gamma) {
  at::Tensor out = empty_like_rows(x);
  run_rows(kBackward, x.data, x,
           {gradient(grad), {x.data, Port::Data, false}, {a, Port::Row, false},
            {b, Port::Row, false}, {c, Port::Row, false}, {mean, Port::Row, false},
            {gamma.defined() ? gamma : a, Port::Column, false}, {out, Port::Data, true}},
           std::nullopt, (gamma.defined() ? kGamma : 0) | repeated(grad));
  return out;
}

// norm_grad_stats_cols: norm_grad_stats' row sums (g = gamma), and per column the sums over the
// rows of dy * (x - mean[r]) * invstd[r] and of dy (rows of at least AFPGA_REDUCE_PARTIALS words:
// layer_rows' min_words). Returns (sum_dy, sum_dy_xmu, grad_gamma, grad_beta).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> grad_stats_cols(const Rows& grad, const Rows& x,
                                                                              const at::Tensor& mean,
                                                                              const at::Tensor& invstd,
                                                                              const at::Tensor& gamma) {
  const int cus = kernel_for(kGradStatsCols, x.data.scalar_type(), x.data.device()).cus;
  const auto opts = x.data.options().dtype(at::kFloat);
  at::Tensor sum_dy = at::empty({x.rows}, opts), sum_dy_xmu = at::empty({x.rows}, opts);
  at::Tensor gg = at::empty({cus, x.len}, opts), gb = at::empty({cus, x.len}, opts);
  const int64_t units = run_rows(
      kGradStatsCols, x.data, x,
      {gradient(grad), {x.data, Port::Data, false}, {mean, Port::Row, false}, {invstd, Port::Row, false},
       {gamma.defined() ? gamma : mean, Port::Column, false}, {sum_dy, Port::Row, true},
       {sum_dy_xmu, Port::Row, true}, {gg, Port::Partial, true}, {gb, Port::Partial, true}},
      std::nullopt, (gamma.defined() ? kGamma : 0) | repeated(grad));
  if (units == 1) return {sum_dy, sum_dy_xmu, gg[0], gb[0]};
  // Zero units: empty sums.
  return {sum_dy, sum_dy_xmu, gg.narrow(0, 0, units).sum(0), gb.narrow(0, 0, units).sum(0)};
}

void check(const at::Tensor& input, const char* op) {
  const at::ScalarType t = input.scalar_type();
  if (t != at::kFloat && t != at::kHalf) throw KernelUnavailable(std::string(op) + " on " + c10::toString(t));
  if (input.numel() == 0) throw KernelUnavailable(std::string(op) + " of an empty input");
}

// --- batch_norm: a row per channel ------------------------------------------------------------------

// The channels of an [N, C, *] input as rows. With planes of at least a port word, each sample's
// plane of the channel is a segment (the input as it is when contiguous); smaller planes (a [N, C]
// input, 1x1 maps) are gathered into one [C, N * plane] row per channel on the device.
struct ChannelRows {
  Rows rows;
  bool gathered;
};

ChannelRows channel_rows(const at::Tensor& x, int64_t lanes, int64_t word, bool gradient = false) {
  TORCH_CHECK(x.dim() >= 2, "batch_norm: expected an input of 2 or more dims, got ", x.dim());
  const int64_t n = x.size(0), c = x.size(1), plane = x.numel() / (n * c);
  const int inner = static_cast<int>(x.dim()) - 2;
  if (plane >= lanes) {
    const int64_t pitch = round_up(plane, lanes);
    const at::Tensor one = gradient ? repeated_plane(x, inner, pitch, word) : at::Tensor();
    return {{one.defined() ? one : to_planes(x, inner, pitch, word), c, n, plane, pitch, c * pitch, one.defined()}, false};
  }
  const int64_t pitch = round_up(n * plane, lanes);
  return {{to_planes(x.transpose(0, 1), inner + 1, pitch, word), c, 1, n * plane, pitch, 0}, true};
}

// Rows laid out as channel_rows(x) made them, back as a contiguous tensor of x's sizes.
at::Tensor from_channel_rows(const at::Tensor& out, const at::Tensor& x, const ChannelRows& cr) {
  const int inner = static_cast<int>(x.dim()) - 2;
  if (!cr.gathered) return from_planes(out, x.sizes(), inner, cr.rows.row_stride);
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  std::swap(sizes[0], sizes[1]);
  return from_planes(out, sizes, inner + 1, cr.rows.row_stride).transpose(0, 1).contiguous();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_batch_norm(
    const KernelRef& kernel, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  check(input, "batch_norm");
  kernel_for(kernel, input.scalar_type(), input.device());  // KernelUnavailable before any side effect
  const auto [lanes, word] = words_of(kAffine, input);
  TORCH_CHECK(training || (defined(running_mean) && defined(running_var)),
              "batch_norm in eval mode needs running_mean and running_var");
  const ChannelRows cr = channel_rows(input, lanes, word);
  const int64_t n = cr.rows.segs * cr.rows.len;  // elements per channel
  at::Tensor mean, istd;
  if (training) {
    at::Tensor var;
    std::tie(mean, var, istd) = stats(cr.rows, eps, false);
    // running = (1 - momentum) * running + momentum * batch statistic (the variance unbiased).
    if (defined(running_mean)) running_mean->mul_(1 - momentum).add_(mean, momentum);
    if (defined(running_var)) {
      const double unbias = static_cast<double>(n) / static_cast<double>(std::max<int64_t>(n - 1, 1));
      running_var->mul_(1 - momentum).add_(var, momentum * unbias);
    }
  } else {
    mean = vec(*running_mean);
    istd = at::add(vec(*running_var), eps).rsqrt_();
  }
  // out = (x - mean) * (invstd * weight) + bias: ATen's x * alpha + (bias - mean * alpha), centred.
  const at::Tensor alpha = defined(weight) ? at::mul(istd, vec(*weight)) : istd;
  const at::Tensor beta = defined(bias) ? vec(*bias) : at::Tensor();
  const at::Tensor out = from_channel_rows(affine(cr.rows, mean, alpha, beta, {}, {}), input, cr);
  if (!training) {
    const auto none = input.options();
    return {out, at::empty({0}, none), at::empty({0}, none)};
  }
  return {out, mean.to(input.scalar_type()), istd.to(input.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_batch_norm_backward(
    const KernelRef& kernel, const at::Tensor& grad_out, const at::Tensor& input,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, const std::optional<at::Tensor>& save_mean,
    const std::optional<at::Tensor>& save_invstd, bool train, double eps, std::array<bool, 3> output_mask) {
  check(input, "batch_norm_backward");
  kernel_for(kernel, input.scalar_type(), input.device());
  if (grad_out.scalar_type() != input.scalar_type()) throw KernelUnavailable("batch_norm_backward of mixed dtypes");
  const auto [lanes, word] = words_of(kBackward, input);
  const ChannelRows cx = channel_rows(input, lanes, word), cg = channel_rows(grad_out, lanes, word, true);
  const at::Tensor mean = vec(train ? *save_mean : *running_mean);
  const at::Tensor istd = train ? vec(*save_invstd) : at::add(vec(*running_var), eps).rsqrt_();
  const auto [sum_dy, dotp] = grad_stats(cg.rows, cx.rows, mean, {});
  const double n = static_cast<double>(cx.rows.segs * cx.rows.len);
  const at::Tensor gw = at::mul(dotp, istd);  // grad_weight: sum(grad * (x - mean)) * invstd
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor scale = defined(weight) ? at::mul(istd, vec(*weight)) : istd;  // invstd * weight
    at::Tensor b, c;
    if (train) {
      // grad_in = (grad - sum_dy / n - (x - mean) * dotp * invstd^2 / n) * invstd * weight.
      b = at::mul(gw, istd).mul_(scale).mul_(-1.0 / n);
      c = at::mul(sum_dy, scale).mul_(-1.0 / n);
    } else {
      b = at::zeros_like(scale);
      c = b;
    }
    grad_input = from_channel_rows(backward(cg.rows, cx.rows, scale, b, c, mean, {}), input, cx);
  }
  const at::ScalarType wtype = defined(weight) ? weight->scalar_type() : input.scalar_type();
  if (output_mask[1]) grad_weight = gw.to(wtype);
  if (output_mask[2]) grad_bias = sum_dy.to(wtype);
  return {grad_input, grad_weight, grad_bias};
}

// --- layer_norm: a row per sample, over the trailing normalized dims ---------------------------------

namespace {

// The input as [outer, inner] rows, inner = the normalized dims; each row at least `min_words` port
// words long (padded).
Rows layer_rows(const at::Tensor& x, size_t normalized_dims, int64_t lanes, int64_t word, int64_t min_words = 1,
                bool gradient = false) {
  TORCH_CHECK(normalized_dims >= 1 && normalized_dims <= static_cast<size_t>(x.dim()),
              "layer_norm: normalized_shape has ", normalized_dims, " dims, the input ", x.dim());
  int64_t inner = 1;
  for (int64_t d = x.dim() - static_cast<int64_t>(normalized_dims); d < x.dim(); ++d) inner *= x.size(d);
  const int64_t pitch = round_up(std::max(inner, min_words * lanes), lanes);
  const int nd = static_cast<int>(normalized_dims);
  const at::Tensor one = gradient ? repeated_plane(x, nd, pitch, word) : at::Tensor();
  return {one.defined() ? one : to_planes(x, nd, pitch, word), x.numel() / inner, 1, inner, pitch, 0, one.defined()};
}

// The per-row statistics' shape: the input's leading dims, then 1 per normalized dim.
std::vector<int64_t> stat_sizes(const at::Tensor& x, size_t normalized_dims) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
  for (size_t i = 0; i < normalized_dims; ++i) s[s.size() - 1 - i] = 1;
  return s;
}

// A column vector for the kernels (layer_norm's weight, bias), or undefined.
at::Tensor columns(const std::optional<at::Tensor>& t, int64_t len, const char* op) {
  if (!defined(t)) return {};
  if (len > kMaxColumns) {
    throw KernelUnavailable(std::string(op) + " with " + std::to_string(len) + " normalized elements (the kernel holds " +
                            std::to_string(kMaxColumns) + " weights on chip)");
  }
  return vec(*t);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_layer_norm(const KernelRef& kernel,
                                                                      const at::Tensor& input,
                                                                      at::IntArrayRef normalized_shape,
                                                                      const std::optional<at::Tensor>& weight,
                                                                      const std::optional<at::Tensor>& bias,
                                                                      double eps) {
  check(input, "layer_norm");
  kernel_for(kernel, input.scalar_type(), input.device());
  const auto [lanes, word] = words_of(kAffine, input);
  const Rows r = layer_rows(input, normalized_shape.size(), lanes, word);
  const at::Tensor gamma = columns(weight, r.len, "layer_norm"), beta = columns(bias, r.len, "layer_norm");
  const auto [mean, var, rstd] = stats(r, eps, true);
  // (x - mean) * rstd * weight + bias: ATen's (x * rstd + (-mean * rstd)) * weight + bias, centred.
  const at::Tensor out = affine(r, mean, rstd, {}, gamma, beta);
  const auto sizes = stat_sizes(input, normalized_shape.size());
  const at::ScalarType dtype = input.scalar_type();
  return {from_planes(out, input.sizes(), static_cast<int>(normalized_shape.size()), r.row_stride),
          mean.to(dtype).view(sizes), rstd.to(dtype).view(sizes)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_layer_norm_backward(
    const KernelRef& kernel, const at::Tensor& grad_out, const at::Tensor& input,
    at::IntArrayRef normalized_shape, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  check(input, "layer_norm_backward");
  kernel_for(kernel, input.scalar_type(), input.device());
  if (grad_out.scalar_type() != input.scalar_type()) throw KernelUnavailable("layer_norm_backward of mixed dtypes");
  const auto [lanes, word] = words_of(kBackward, input);
  const size_t nd = normalized_shape.size();
  // Rows of at least AFPGA_REDUCE_PARTIALS words when norm_grad_stats_cols runs: it adds each row
  // into the column sums on chip, one word per cycle.
  const bool params = (output_mask[1] && defined(weight)) || (output_mask[2] && defined(bias));
  kernel_for(params ? kGradStatsCols : kGradStats, input.scalar_type(), input.device());
  const int64_t min_words = params ? AFPGA_REDUCE_PARTIALS : 1;
  const Rows x = layer_rows(input, nd, lanes, word, min_words), g = layer_rows(grad_out, nd, lanes, word, min_words, true);
  const at::Tensor gamma = columns(weight, x.len, "layer_norm_backward");
  if (params && x.len > kMaxColumns) {
    throw KernelUnavailable("layer_norm_backward with " + std::to_string(x.len) + " normalized elements");
  }
  const at::Tensor m = vec(mean), r = vec(rstd);
  // The row sums db = sum(dy * w) and ds = sum(dy * w * (x - mean)) (ATen's, centred), with the
  // weight's and bias' gradients (per column: sums of dy * xhat and of dy) in the same pass.
  at::Tensor db, ds, grad_input, grad_weight, grad_bias;
  if (params) {
    at::Tensor gg, gb;
    std::tie(db, ds, gg, gb) = grad_stats_cols(g, x, m, r, gamma);
    if (output_mask[1] && defined(weight)) grad_weight = gg.view(weight->sizes()).to(weight->scalar_type());
    if (output_mask[2] && defined(bias)) grad_bias = gb.view(bias->sizes()).to(bias->scalar_type());
  } else if (output_mask[0]) {
    std::tie(db, ds) = grad_stats(g, x, m, gamma);
  }
  if (output_mask[0]) {
    // grad_in = rstd * (dy * w) - (x - mean) * ds * rstd^3 / N - db * rstd / N.
    const double n = static_cast<double>(x.len);
    const at::Tensor b = at::mul(ds, r).mul_(r).mul_(r).mul_(-1.0 / n);
    const at::Tensor c = at::mul(db, r).mul_(-1.0 / n);
    grad_input = from_planes(backward(g, x, r, b, c, m, gamma), input.sizes(), static_cast<int>(nd), x.row_stride);
  }
  return {grad_input, grad_weight, grad_bias};
}

// --- group_norm: statistics per (sample, group), the affine per channel -------------------------------

namespace {

// The input as [N * C, pitch] planes: rows of a (sample, group)'s Cg planes for the statistics,
// rows of one plane for the per-channel passes.
struct GroupRows {
  Rows groups, planes;
};

GroupRows group_rows(const at::Tensor& x, int64_t n, int64_t c, int64_t hw, int64_t group, int64_t lanes, int64_t word,
                     bool gradient = false) {
  TORCH_CHECK(group > 0 && c % group == 0, "group_norm: ", c, " channels do not split into ", group, " groups");
  TORCH_CHECK(x.numel() == n * c * hw, "group_norm: an input of ", x.sizes(), " is not N=", n, " C=", c, " HxW=", hw);
  const int64_t pitch = round_up(hw, lanes), cg = c / group;
  const at::Tensor planes = x.reshape({n * c, hw});
  const at::Tensor one = gradient ? repeated_plane(planes, 1, pitch, word) : at::Tensor();
  const at::Tensor data = one.defined() ? one : to_planes(planes, 1, pitch, word);
  return {{data, n * group, cg, hw, cg * pitch, pitch, one.defined()}, {data, n * c, 1, hw, pitch, 0, one.defined()}};
}

// A [N, G] statistic per channel plane: [N * C].
at::Tensor per_plane(const at::Tensor& t, int64_t n, int64_t c, int64_t group) {
  return t.view({n, group, 1}).expand({n, group, c / group}).reshape({n * c});
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_group_norm(const KernelRef& kernel, const at::Tensor& input,
                                                                      const std::optional<at::Tensor>& weight,
                                                                      const std::optional<at::Tensor>& bias, int64_t N,
                                                                      int64_t C, int64_t HxW, int64_t group,
                                                                      double eps) {
  check(input, "group_norm");
  kernel_for(kernel, input.scalar_type(), input.device());
  const auto [lanes, word] = words_of(kAffine, input);
  const GroupRows gr = group_rows(input, N, C, HxW, group, lanes, word);
  const auto [mean, var, rstd] = stats(gr.groups, eps, true);
  // Per channel plane: (x - mean) * (rstd * w[c]) + b[c] (ATen's x * scale + (b[c] - mean * scale), centred).
  at::Tensor scale = per_plane(rstd, N, C, group);
  if (defined(weight)) scale = at::mul(scale.view({N, C}), vec(*weight)).view({N * C});
  const at::Tensor shift = defined(bias) ? vec(*bias).repeat({N}) : at::Tensor();
  const at::Tensor out = affine(gr.planes, per_plane(mean, N, C, group), scale, shift, {}, {});
  const at::ScalarType dtype = input.scalar_type();
  return {from_planes(out, {N * C, HxW}, 1, gr.planes.row_stride).view(input.sizes()),
          mean.to(dtype).view({N, group}), rstd.to(dtype).view({N, group})};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_native_group_norm_backward(
    const KernelRef& kernel, const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, int64_t N, int64_t C, int64_t HxW, int64_t group,
    std::array<bool, 3> output_mask) {
  check(input, "group_norm_backward");
  kernel_for(kernel, input.scalar_type(), input.device());
  if (grad_out.scalar_type() != input.scalar_type()) throw KernelUnavailable("group_norm_backward of mixed dtypes");
  const auto [lanes, word] = words_of(kBackward, input);
  const GroupRows x = group_rows(input, N, C, HxW, group, lanes, word), g = group_rows(grad_out, N, C, HxW, group, lanes, word, true);
  const int64_t cg = C / group;
  const at::Tensor m = per_plane(vec(mean), N, C, group), r = per_plane(vec(rstd), N, C, group);
  // Per channel plane: db = sum(dy), ds = sum(dy * (x - mean)).
  const auto [db, ds] = grad_stats(g.planes, x.planes, m, {});
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    // grad_in = rstd * w * dy - (x - mean) * rstd^3 / M * sum_c(w * ds) - rstd / M * sum_c(w * db),
    // the sums over the group's channels, M = Cg * HxW (ATen's closed form).
    const at::Tensor w = defined(weight) ? vec(*weight) : at::ones({C}, m.options());
    const auto group_sum = [&](const at::Tensor& t) {
      return per_plane(at::mul(t.view({N, C}), w).view({N, group, cg}).sum(2), N, C, group);
    };
    const double M = static_cast<double>(cg * HxW);
    const at::Tensor a = at::mul(r.view({N, C}), w).view({N * C});
    const at::Tensor b = at::mul(group_sum(ds), r).mul_(r).mul_(r).mul_(-1.0 / M);
    const at::Tensor c = at::mul(group_sum(db), r).mul_(-1.0 / M);
    grad_input = from_planes(backward(g.planes, x.planes, a, b, c, m, {}), {N * C, HxW}, 1, x.planes.row_stride)
                     .view(input.sizes());
  }
  const at::ScalarType dtype = input.scalar_type();
  if (output_mask[1]) grad_weight = at::mul(ds, r).view({N, C}).sum(0).to(dtype);
  if (output_mask[2]) grad_bias = db.view({N, C}).sum(0).to(dtype);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace aten_fpga
