// fpga_conv: convolution_overrideable and convolution_backward_overrideable, which is how PyTorch
// hands a convolution on "fpga" to the device. A convolution is im2col on the device
// (kernels/hls/im2col) and a GEMM per group (at::bmm on fpga tensors: the GEMM kernels, or the
// counted fallback where the image has none); its backward is the same two GEMMs transposed and
// col2im for grad_input. Why im2col + GEMM and not a direct convolution: docs/kernels.md.
//
// The col matrix is [C*K, N, lpitch]: row c*K + k holds window element k of channel c for every
// output pixel of every image, each image's pixels padded to whole port words (lpitch; zeros), so a
// group's rows are one [Cg*K, N*lpitch] matrix and the GEMM's output [Cout, N*lpitch] needs only a
// permutation. conv1d is conv2d over 1-row planes. Transposed convolutions and 3-d ones fall back.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

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
        .size(s.oh).size(s.ow).size(lpitch).size(s.kh).size(s.kw);
  }
  launch.run();
  mark_device_written(a_out);
  return out;
}

const KernelRef kIm2col{"im2col"};

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

}  // namespace

at::Tensor fpga_convolution(const KernelRef& kernel, const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups) {
  const Conv s = shape_of(input, weight, stride, padding, dilation, transposed, groups, "convolution");
  const at::Tensor col = window_kernel(kernel, s, input, true);  // [C*K, N, lpitch]
  const int64_t lpitch = col.size(2), g = s.groups;
  const at::Tensor w = weight.reshape({g, s.cout / g, s.cg() * s.k()});
  const at::Tensor a = col.view({g, s.cg() * s.k(), s.n * lpitch});
  // The bias is the GEMM's c (beta = 1): added in the accumulator and rounded once, as ATen's
  // float16 convolutions are (an add after a rounded product is off by ulps where they cancel).
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor prod = has_bias ? at::baddbmm(bias->view({g, s.cout / g, 1}).expand({g, s.cout / g, s.n * lpitch}), w, a)
                                   : at::bmm(w, a);  // [G, Cout/G, N*lpitch]
  // [Cout, N, pixels] -> [N, Cout, pixels]: a strided view the output copy gathers.
  const at::Tensor view = prod.view({s.cout, s.n, lpitch}).narrow(2, 0, s.oh * s.ow).permute({1, 0, 2})
                              .view(s.out_sizes(input.dim() - 2));
  at::Tensor out = at::empty(s.out_sizes(input.dim() - 2), input.options());
  out.copy_(view);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fpga_convolution_backward(
    const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const Conv s = shape_of(input, weight, stride, padding, dilation, transposed, groups, "convolution_backward");
  if (grad_output.scalar_type() != input.scalar_type()) throw KernelUnavailable("convolution_backward of mixed dtypes");
  const int64_t g = s.groups, rows = s.cg() * s.k();
  const at::Tensor go4 = grad_output.dim() == 3 ? grad_output.unsqueeze(2) : grad_output;
  const at::Tensor go = output_as_col(s, go4);  // [Cout, N, lpitch]
  const int64_t lpitch = go.size(2);
  const at::Tensor gog = go.view({g, s.cout / g, s.n * lpitch});
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor w = weight.reshape({g, s.cout / g, rows});
    const at::Tensor gcol = at::bmm(w.transpose(1, 2), gog).contiguous();  // [G, Cg*K, N*lpitch]
    const at::Tensor img = window_kernel(kernel, s, gcol.view({s.c * s.k(), s.n, lpitch}), false);
    grad_input = from_planes(img, input.sizes(), input.dim() == 3 ? 1 : 2, img.size(1));
  }
  if (output_mask[1]) {
    const at::Tensor col = window_kernel(kIm2col, s, input, true).view({g, rows, s.n * lpitch});
    grad_weight = at::bmm(gog, col.transpose(1, 2)).reshape(weight.sizes());  // [G, Cout/G, Cg*K]
  }
  if (output_mask[2]) {
    grad_bias = input.dim() == 3 ? grad_output.sum({0, 2}) : grad_output.sum({0, 2, 3});
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace aten_fpga
