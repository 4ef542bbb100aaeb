// fpga_conv: convolution_overrideable and convolution_backward_overrideable, which is how PyTorch
// hands a convolution on "fpga" to the device. Three shapes, three ways (docs/kernels.md):
//   - depthwise (groups == C == Cout): the im2col engine's dw_window and dw_weight members
//     (kernels/hls/im2col/_window.j2), a sliding window per plane through a line buffer: forward,
//     grad_input (the transposed window) and grad_weight; no GEMM (the members are float32's:
//     float16 and bfloat16 run in them widened, rounded once);
//   - 1x1, stride 1, no padding, one group: the GEMM straight on the NCHW planes, no im2col;
//   - any other: im2col on the device (kernels/hls/im2col) and one batched GEMM over the groups
//     (at::bmm on fpga tensors: one launch of the GEMM kernels, the group as the batch); its
//     backward is the same two GEMMs transposed and col2im for grad_input.
// A depthwise convolution beyond the dw kernels' line buffer, or in an image without them, takes
// the last way. Why im2col + GEMM and not a direct convolution: docs/kernels.md.
//
// The col matrix is [C*K, N, lpitch]: row c*K + k holds window element k of channel c for every
// output pixel of every image, each image's pixels padded to whole port words (lpitch; zeros), so a
// group's rows are one [Cg*K, N*lpitch] matrix and the GEMM's output [Cout, N*lpitch] needs only a
// permutation. conv1d is conv2d over 1-row planes. Transposed convolutions and 3-d ones fall back.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "FPGAType.h"
#include "allocator.h"
#include "fpga_kernel.h"
#include "launch.h"
#include "planes.h"

namespace aten_fpga {
namespace {

// The convolution's shape with conv1d as conv2d over planes of one row.
struct Conv {
  int64_t n, c, h, w, cout, groups, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  int64_t k() const { return kh * kw; }
  int64_t cg() const { return c / groups; }
  std::vector<int64_t> out_sizes(int64_t spatial) const {
    return spatial == 1 ? std::vector<int64_t>{n, cout, ow} : std::vector<int64_t>{n, cout, oh, ow};
  }
};

Conv shape_of(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
              at::IntArrayRef dilation, bool transposed, int64_t groups, const char* op) {
  const int64_t spatial = input.dim() - 2;
  if (transposed) throw KernelUnavailable(std::string(op) + ": transposed convolution");
  if (spatial < 1 || spatial > 2) throw KernelUnavailable(std::string(op) + " over " + std::to_string(spatial) + " dims");
  if ((input.scalar_type() != at::kFloat && input.scalar_type() != at::kHalf) ||
      weight.scalar_type() != input.scalar_type()) {
    throw KernelUnavailable(std::string(op) + " on " + c10::toString(input.scalar_type()) + " and " +
                            c10::toString(weight.scalar_type()));
  }
  // at::convolution has checked the arguments against each other (ConvUtils' check_shape_forward).
  auto at2 = [&](at::IntArrayRef v, int64_t i) { return spatial == 1 ? (i == 0 ? 1 : v[0]) : v[i]; };
  auto pad2 = [&](int64_t i) { return spatial == 1 ? (i == 0 ? 0 : padding[0]) : padding[i]; };
  Conv s;
  s.n = input.size(0);
  s.c = input.size(1);
  s.h = spatial == 1 ? 1 : input.size(2);
  s.w = input.size(-1);
  s.cout = weight.size(0);
  s.groups = groups;
  s.kh = spatial == 1 ? 1 : weight.size(2);
  s.kw = weight.size(-1);
  s.sh = at2(stride, 0);
  s.sw = at2(stride, 1);
  s.ph = pad2(0);
  s.pw = pad2(1);
  s.dh = at2(dilation, 0);
  s.dw = at2(dilation, 1);
  s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
  s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
  if (s.h * s.w > kMaxPlane || s.kh * s.oh + s.kw * s.ow > kMaxGeom) {
    throw KernelUnavailable(std::string(op) + " over a " + std::to_string(s.h) + "x" + std::to_string(s.w) +
                            " plane (im2col holds up to " + std::to_string(kMaxPlane) + " elements on chip)");
  }
  return s;
}

// The window geometry: per (window row i, output row y) the input row's offset h*W or -1 (padding),
// then per (window column j, output column x) the input column or -1.
std::vector<int32_t> window(const Conv& s) {
  std::vector<int32_t> g;
  g.reserve(s.kh * s.oh + s.kw * s.ow);
  for (int64_t i = 0; i < s.kh; ++i) {
    for (int64_t y = 0; y < s.oh; ++y) {
      const int64_t h = y * s.sh - s.ph + i * s.dh;
      g.push_back(h >= 0 && h < s.h ? static_cast<int32_t>(h * s.w) : -1);
    }
  }
  for (int64_t j = 0; j < s.kw; ++j) {
    for (int64_t x = 0; x < s.ow; ++x) {
      const int64_t w = x * s.sw - s.pw + j * s.dw;
      g.push_back(w >= 0 && w < s.w ? static_cast<int32_t>(w) : -1);
    }
  }
  return g;
}

// One run of im2col (`to_col`) or col2im over the N*C planes of `s`. im2col reads `image` (any
// layout: made [planes, ipitch] on the device) and returns col [C*K, N, lpitch]; col2im reads
// `col` so laid out and returns the image as [N*C, ipitch] rows.
at::Tensor window_kernel(const KernelRef& kernel, const Conv& s, const at::Tensor& src, bool to_col) {
  const c10::Device where = src.device();
  c10::DeviceGuard guard(where);
  KernelLaunch launch(kernel, src.scalar_type(), where);
  const int64_t lanes = port_lanes(launch.info(), 0), word = launch.info().args[0].bytes;
  const int64_t ipitch = round_up(s.h * s.w, lanes), lpitch = round_up(s.oh * s.ow, lanes);
  const int64_t planes = s.n * s.c;
  at::Tensor in;
  if (to_col) {
    in = to_planes(src.dim() == 3 ? src.unsqueeze(2) : src, 2, ipitch, word);
  } else {
    in = src.is_contiguous() && static_cast<int64_t>(byte_offset(src)) % word == 0 ? src : src.contiguous();
  }
  const at::Tensor geom = geometry_tensor(window(s), where);
  const at::Tensor out = to_col ? at::empty({s.c * s.k(), s.n, lpitch}, src.options())
                                : at::empty({planes, ipitch}, src.options());
  if (planes == 0 || out.numel() == 0) return out;
  Allocation* a_in = allocation_of(in);
  Allocation* a_geom = allocation_of(geom);
  Allocation* a_out = allocation_of(out);
  sync_to_device(a_in);
  sync_to_device(a_geom);
  prepare_device_write(a_out, byte_offset(out), out.nbytes());
  const size_t es = src.element_size();
  for (const CuRange& r : launch.split(planes, 1, s.h * s.w * s.k())) {
    // The image side of a unit starts at its first plane; the col side is addressed by plane index.
    const size_t image_off = r.begin * ipitch * es;
    launch.add_run()
        .buffer(a_in, byte_offset(in) + (to_col ? image_off : 0))
        .buffer(a_geom, byte_offset(geom))
        .buffer(a_out, byte_offset(out) + (to_col ? 0 : image_off))
        .size(r.begin).size(r.size()).size(s.c).size(s.n).size(ipitch)
        .size(s.oh).size(s.ow).size(lpitch).size(s.kh).size(s.kw).size(0).size(0).size(0);  // the dw members'
  }
  launch.run();
  mark_device_written(a_out);
  return out;
}

const KernelRef kIm2col{"im2col"};
const KernelRef kDwWindow{"dw_window"};
const KernelRef kDwWeight{"dw_weight"};

// grad_output [N, Cout, OH, OW] as the GEMM's [Cout, N, lpitch] (padding zero): im2col with a 1x1
// window, which is exactly that permutation.
at::Tensor output_as_col(const Conv& s, const at::Tensor& grad_output) {
  Conv one = s;
  one.c = s.cout;
  one.h = s.oh;
  one.w = s.ow;
  one.kh = one.kw = one.sh = one.sw = one.dh = one.dw = 1;
  one.ph = one.pw = 0;
  return window_kernel(kIm2col, one, grad_output, true);
}

// --- depthwise: kernels/hls/im2col/_window.j2 ------------------------------------------------------------

// The dw kernels' capacities (MAX_ROWS, MAX_WIDTH, MAX_TAPS, MAX_GEOM in its template).
constexpr int64_t kDwRows = 8, kDwWidth = 1024, kDwTaps = 64, kDwGeom = 4096;

bool depthwise(const Conv& s) { return s.groups == s.c && s.cout == s.c && s.groups > 1; }

// One axis of a window: per (tap t, output index o) the source index it reads, or -1. Forward:
// o*stride - pad + t*dil. Transposed (grad_input: the output is the input's axis, the source
// grad_output's): the source index y with y*stride - pad + t*dil == o.
std::vector<int32_t> taps(int64_t k, int64_t outs, int64_t srcs, int64_t stride, int64_t pad, int64_t dil,
                          bool transposed) {
  std::vector<int32_t> v;
  v.reserve(k * outs);
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t o = 0; o < outs; ++o) {
      int64_t src = o * stride - pad + t * dil;
      if (transposed) {
        const int64_t num = o + pad - t * dil;
        src = num >= 0 && num % stride == 0 ? num / stride : -1;
      }
      v.push_back(src >= 0 && src < srcs ? static_cast<int32_t>(src) : -1);
    }
  }
  return v;
}

// The dw kernels' geometry of `s` (transposed: grad_input's), or empty when the kernel cannot hold it:
// rows [kh][out rows], cols [kw][out cols], need [out rows] (source rows loaded before the row).
struct DwGeometry {
  std::vector<int32_t> g;
  int64_t height, width, oh, ow;  // the source plane and the output plane
};

std::optional<DwGeometry> dw_geometry(const Conv& s, bool transposed) {
  DwGeometry d;
  d.height = transposed ? s.oh : s.h;
  d.width = transposed ? s.ow : s.w;
  d.oh = transposed ? s.h : s.oh;
  d.ow = transposed ? s.w : s.ow;
  if (s.k() > kDwTaps || d.width > kDwWidth || d.ow > kDwWidth || s.kh * d.oh + s.kw * d.ow + d.oh > kDwGeom) {
    return std::nullopt;
  }
  d.g = taps(s.kh, d.oh, d.height, s.sh, s.ph, s.dh, transposed);
  const std::vector<int32_t> cols = taps(s.kw, d.ow, d.width, s.sw, s.pw, s.dw, transposed);
  d.g.insert(d.g.end(), cols.begin(), cols.end());
  int64_t need = 0;
  for (int64_t a = 0; a < d.oh; ++a) {
    int64_t lo = INT64_MAX;
    for (int64_t i = 0; i < s.kh; ++i) {
      const int32_t h = d.g[i * d.oh + a];
      if (h >= 0) {
        lo = std::min<int64_t>(lo, h);
        need = std::max<int64_t>(need, h + 1);
      }
    }
    if (lo != INT64_MAX && lo < need - kDwRows) return std::nullopt;  // the row's window spans more than the buffer
    d.g.push_back(static_cast<int32_t>(need));
  }
  return d;
}

// One dw_window or dw_weight run over `units` work items (planes for dw_window, channels for dw_weight), each
// costing about `work` elements: `inputs` in the kernel's order before geom, then `out`, written
// whole. Every input is contiguous on the device.
void dw_run(KernelLaunch& launch, const Conv& s, const DwGeometry& d, std::initializer_list<at::Tensor> inputs,
            const at::Tensor& out, int64_t units, int64_t work, int64_t flags) {
  std::vector<at::Tensor> ins(inputs);
  ins.push_back(geometry_tensor(d.g, out.device()));
  for (const at::Tensor& t : ins) sync_to_device(allocation_of(t));
  Allocation* a_out = allocation_of(out);
  prepare_device_write(a_out, byte_offset(out), out.nbytes());
  for (const CuRange& r : launch.split(units, 1, work)) {
    RunArgs run = launch.add_run();
    for (const at::Tensor& t : ins) run.buffer(allocation_of(t), byte_offset(t));
    run.buffer(a_out, byte_offset(out))
        .size(r.begin).size(r.size()).size(s.c).size(s.n).size(0).size(d.oh).size(d.ow).size(0)
        .size(s.kh).size(s.kw).size(d.height).size(d.width).size(flags);  // ipitch, lpitch: im2col's
  }
  launch.run();
  mark_device_written(a_out);
}

// Contiguous NCHW (conv1d: N, C, 1, W) on the device, its storage a kernel can address.
at::Tensor nchw(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return c.dim() == 3 ? c.unsqueeze(2) : c;
}

// The depthwise window over `src` planes into a fresh [N, C, oh, ow] tensor; `weight` [C, 1, kh, kw].
// Without a bias the kernel's bias port points at the weight, unread (flags 0).
at::Tensor dw_window(KernelLaunch& launch, const Conv& s, const DwGeometry& d, const at::Tensor& src,
                     const at::Tensor& weight, const at::Tensor& bias) {
  at::Tensor out = at::empty({s.n, s.c, d.oh, d.ow}, src.options());
  if (out.numel() == 0) return out;
  const at::Tensor w = weight.contiguous();
  dw_run(launch, s, d, {nchw(src), w, bias.defined() ? bias.contiguous() : w}, out, s.n * s.c,
         d.height * d.width + s.k() * d.oh * d.ow, bias.defined() ? 1 : 0);
  return out;
}

// grad_weight [C, 1, kh, kw] of a depthwise convolution: per channel, the correlation of its
// grad_output planes with its input planes, summed over the batch in order.
at::Tensor dw_weight(KernelLaunch& launch, const Conv& s, const DwGeometry& d, const at::Tensor& input,
                     const at::Tensor& grad_output, at::IntArrayRef sizes) {
  at::Tensor out = at::empty(sizes, input.options());
  if (s.n == 0 || out.numel() == 0) return out.zero_();
  dw_run(launch, s, d, {nchw(input), nchw(grad_output)}, out, s.c, s.n * (s.h * s.w + s.k() * s.oh * s.ow), 0);
  return out;
}

// --- 1x1: the GEMM on the NCHW planes -----------------------------------------------------------

bool pointwise_conv(const Conv& s) {
  return s.groups == 1 && s.k() == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
}

// x [N, C, ...] as [N, C, pixels] (a view where the strides allow: channels_last is the GEMM's
// transposed operand).
at::Tensor as_rows(const at::Tensor& x) { return x.flatten(2); }

// x [N, C, ...] as [C, N*pixels]: the images' planes side by side (a device copy unless N == 1).
at::Tensor batch_side_by_side(const at::Tensor& x) { return as_rows(x).transpose(0, 1).reshape({x.size(1), -1}); }

// Below this many pixels a plane, a 1x1 convolution is one product over the planes side by side
// rather than one per image: a product per image re-reads the weight for a few columns, and the
// GEMM's PE array has tens of columns (the emulator's 16 x 44: [576, 96] x [96, 4 x 4] took 7.4 ms
// per image, 0.5 ms side by side; at 784 pixels per image 7.7 ms against 16.9).
constexpr int64_t kWidePlane = 64;

// Whether the loaded image holds `kernel` for `dtype` (a plan's image may lack the dw members:
// the convolution then takes im2col + the GEMM).
bool has_kernel(const KernelRef& kernel, at::ScalarType dtype, c10::Device where) {
  try {
    kernel_for(kernel, dtype, where);
    return true;
  } catch (const KernelUnavailable&) {
    return false;
  }
}

// The dtype the dw members compute a depthwise convolution of `dtype` in, if the image holds them:
// its own, or float32 for float16 and bfloat16 (their own members do not fit beside the table:
// docs/kernels.md). Widened, the window's products and sums are float32's and the result is
// rounded once, as the im2col + GEMM path (float32 accumulation) rounds it.
std::optional<at::ScalarType> dw_dtype(at::ScalarType dtype, c10::Device where, bool backward) {
  const auto held = [&](at::ScalarType t) {
    return has_kernel(kDwWindow, t, where) && (!backward || has_kernel(kDwWeight, t, where));
  };
  if (held(dtype)) return dtype;
  if ((dtype == at::kHalf || dtype == at::kBFloat16) && held(at::kFloat)) return at::kFloat;
  return std::nullopt;
}

}  // namespace

at::Tensor fpga_convolution(const KernelRef& kernel, const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups) {
  const Conv s = shape_of(input, weight, stride, padding, dilation, transposed, groups, "convolution");
  const int64_t spatial = input.dim() - 2;
  const bool has_bias = bias.has_value() && bias->defined();
  const at::ScalarType dtype = input.scalar_type();
  const std::optional<at::ScalarType> dw = depthwise(s) ? dw_dtype(dtype, input.device(), false) : std::nullopt;
  if (dw.has_value()) {
    if (const std::optional<DwGeometry> d = dw_geometry(s, false)) {
      KernelLaunch launch(kDwWindow, *dw, input.device());
      return dw_window(launch, s, *d, input.to(*dw), weight.to(*dw), has_bias ? bias->to(*dw) : at::Tensor())
          .view(s.out_sizes(spatial)).to(dtype);
    }
  }
  if (pointwise_conv(s)) {
    const int64_t px = s.oh * s.ow;
    const at::Tensor w = weight.reshape({s.cout, s.c});
    if (px < kWidePlane) {  // one [Cout, C] x [C, N*pixels] product over the planes side by side
      const at::Tensor x = batch_side_by_side(input);
      const at::Tensor prod = has_bias ? at::addmm(bias->view({s.cout, 1}).expand({s.cout, s.n * px}), w, x) : at::mm(w, x);
      at::Tensor out = at::empty(s.out_sizes(spatial), input.options());
      out.copy_(prod.view({s.cout, s.n, px}).permute({1, 0, 2}).view(s.out_sizes(spatial)));
      return out;
    }
    // [Cout, C] x [N][C, pixels] -> [N][Cout, pixels], the weight broadcast over the batch
    // (stride 0) and the product already NCHW; the bias is the GEMM's c, as below.
    const at::Tensor wb = w.unsqueeze(0).expand({s.n, s.cout, s.c});
    const at::Tensor x = as_rows(input);
    const at::Tensor prod = has_bias ? at::baddbmm(bias->view({1, s.cout, 1}).expand({s.n, s.cout, px}), wb, x)
                                     : at::bmm(wb, x);
    return prod.view(s.out_sizes(spatial));
  }
  const at::Tensor col = window_kernel(kernel, s, input, true);  // [C*K, N, lpitch]
  const int64_t lpitch = col.size(2), g = s.groups;
  const at::Tensor w = weight.reshape({g, s.cout / g, s.cg() * s.k()});
  const at::Tensor a = col.view({g, s.cg() * s.k(), s.n * lpitch});
  // The bias is the GEMM's c (beta = 1): added in the accumulator and rounded once, as ATen's
  // float16 convolutions are (an add after a rounded product is off by ulps where they cancel).
  const at::Tensor prod = has_bias ? at::baddbmm(bias->view({g, s.cout / g, 1}).expand({g, s.cout / g, s.n * lpitch}), w, a)
                                   : at::bmm(w, a);  // [G, Cout/G, N*lpitch]: one launch for every group
  // [Cout, N, pixels] -> [N, Cout, pixels]: a strided view the output copy gathers.
  const at::Tensor view = prod.view({s.cout, s.n, lpitch}).narrow(2, 0, s.oh * s.ow).permute({1, 0, 2})
                              .view(s.out_sizes(spatial));
  at::Tensor out = at::empty(s.out_sizes(spatial), input.options());
  out.copy_(view);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_convolution_backward(
    const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const Conv s = shape_of(input, weight, stride, padding, dilation, transposed, groups, "convolution_backward");
  if (grad_output.scalar_type() != input.scalar_type()) throw KernelUnavailable("convolution_backward of mixed dtypes");
  const int64_t spatial = input.dim() - 2;
  const at::ScalarType dtype = input.scalar_type();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[2]) {
    grad_bias = spatial == 1 ? grad_output.sum({0, 2}) : grad_output.sum({0, 2, 3});
  }
  const std::optional<at::ScalarType> dw = depthwise(s) ? dw_dtype(dtype, input.device(), true) : std::nullopt;
  if (dw.has_value()) {
    const std::optional<DwGeometry> back = output_mask[0] ? dw_geometry(s, true) : std::nullopt;
    const std::optional<DwGeometry> fwd = output_mask[1] ? dw_geometry(s, false) : std::nullopt;
    if (back.has_value() == output_mask[0] && fwd.has_value() == output_mask[1]) {
      const at::Tensor go = (grad_output.dim() == 3 ? grad_output.unsqueeze(2) : grad_output).to(*dw);
      if (output_mask[0]) {
        KernelLaunch launch(kDwWindow, *dw, input.device());
        grad_input = dw_window(launch, s, *back, go, weight.to(*dw), at::Tensor()).view(input.sizes()).to(dtype);
      }
      if (output_mask[1]) {
        KernelLaunch launch(kDwWeight, *dw, input.device());
        grad_weight = dw_weight(launch, s, *fwd, input.to(*dw), go, weight.sizes()).to(dtype);
      }
      return {grad_input, grad_weight, grad_bias};
    }
  }
  if (pointwise_conv(s)) {
    const int64_t px = s.oh * s.ow;
    const at::Tensor w = weight.reshape({s.cout, s.c});
    const bool wide = px < kWidePlane;
    const at::Tensor g2 = wide || output_mask[1] ? batch_side_by_side(grad_output) : at::Tensor();  // [Cout, N*pixels]
    if (output_mask[0] && wide) {  // [C, Cout] x [Cout, N*pixels], back to [N, C, pixels]
      at::Tensor gi = at::empty(input.sizes(), input.options());
      gi.view({s.n, s.c, px}).copy_(at::mm(w.t(), g2).view({s.c, s.n, px}).permute({1, 0, 2}));
      grad_input = gi;
    } else if (output_mask[0]) {  // [C, Cout] x [N][Cout, pixels]
      grad_input = at::bmm(w.t().unsqueeze(0).expand({s.n, s.c, s.cout}), as_rows(grad_output)).view(input.sizes());
    }
    if (output_mask[1]) {  // [Cout, N*pixels] x [N*pixels, C]: the batch summed in the GEMM's accumulator
      grad_weight = at::mm(g2, batch_side_by_side(input).t()).view(weight.sizes());
    }
    return {grad_input, grad_weight, grad_bias};
  }
  const int64_t g = s.groups, rows = s.cg() * s.k();
  const at::Tensor go4 = grad_output.dim() == 3 ? grad_output.unsqueeze(2) : grad_output;
  const at::Tensor go = output_as_col(s, go4);  // [Cout, N, lpitch]
  const int64_t lpitch = go.size(2);
  const at::Tensor gog = go.view({g, s.cout / g, s.n * lpitch});
  if (output_mask[0]) {
    const at::Tensor w = weight.reshape({g, s.cout / g, rows});
    const at::Tensor gcol = at::bmm(w.transpose(1, 2), gog).contiguous();  // [G, Cg*K, N*lpitch]
    const at::Tensor img = window_kernel(kernel, s, gcol.view({s.c * s.k(), s.n, lpitch}), false);
    grad_input = from_planes(img, input.sizes(), spatial == 1 ? 1 : 2, img.size(1));
  }
  if (output_mask[1]) {
    const at::Tensor col = window_kernel(kIm2col, s, input, true).view({g, rows, s.n * lpitch});
    grad_weight = at::bmm(gog, col.transpose(1, 2)).reshape(weight.sizes());  // [G, Cout/G, Cg*K]
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace aten_fpga
