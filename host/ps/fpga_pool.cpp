// fpga_pool: the table's pooling entries (max_pool2d_with_indices, avg_pool2d, _adaptive_avg_pool2d
// and their backwards), run by the kernels/hls/pool kernels; and the plane layout the window
// drivers share (planes.h).
//
// Every pooling is one walk: output pixel (y, x) of a plane takes the window elements (i, j),
// i < nh[y], j < nw[x], at plane address hoff[y] + i*dh + wcol[x] + j*dw. The host folds kernel
// size, stride, padding, dilation, ceil_mode, count_include_pad, divisor_override and the adaptive
// windows into that per-row and per-column geometry, exactly as ATen's CPU kernels bound their
// loops, so the kernel adds and compares the same elements in the same order (bit exact).
#include <ATen/ATen.h>
#include <ATen/native/AdaptivePooling.h>
#include <ATen/native/Pool.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <vector>

#include "FPGAType.h"
#include "allocator.h"
#include "fpga_kernel.h"
#include "launch.h"
#include "planes.h"

namespace aten_fpga {

// --- The plane layout (planes.h) ------------------------------------------------------------------

int64_t port_lanes(const KernelInfo& info, size_t arg) {
  const KernelArgInfo& a = info.args.at(arg);
  return std::max(1, a.bytes / std::max(1, a.elem_bytes));
}

namespace {
// Strides of `sizes` as [planes, pitch] rows whose last `inner` dims make a plane.
std::vector<int64_t> plane_strides(at::IntArrayRef sizes, int inner, int64_t pitch) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (d + 1 == sizes.size() - inner) s = pitch;  // the first dim outside the plane steps planes
    strides[d] = s;
    s *= sizes[d];
  }
  return strides;
}
}  // namespace

at::Tensor to_planes(const at::Tensor& x, int inner, int64_t pitch, int64_t word_bytes) {
  const std::vector<int64_t> strides = plane_strides(x.sizes(), inner, pitch);
  int64_t plane = 1, planes = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d >= x.dim() - inner ? plane : planes) *= x.size(d);
  bool direct = pitch == plane && static_cast<int64_t>(byte_offset(x)) % word_bytes == 0;
  for (int64_t d = 0; d < x.dim() && direct; ++d) direct = x.size(d) == 1 || x.stride(d) == strides[d];
  if (direct) return x.as_strided({planes, pitch}, {pitch, 1});
  at::Tensor rows = at::empty({planes, pitch}, x.options());
  rows.as_strided(x.sizes(), strides).copy_(x);  // on the device
  return rows;
}

at::Tensor from_planes(const at::Tensor& rows, at::IntArrayRef sizes, int inner, int64_t pitch) {
  at::Tensor t = rows.as_strided(sizes, plane_strides(sizes, inner, pitch), rows.storage_offset());
  return t.is_contiguous() ? t : t.contiguous();  // contiguous() copies on the device
}

at::Tensor geometry_tensor(const std::vector<int32_t>& g, c10::Device where) {
  at::Tensor host = at::from_blob(const_cast<int32_t*>(g.data()), {static_cast<int64_t>(g.size())}, at::kInt);
  return host.to(where);  // a few hundred bytes to the device
}

// --- Pooling ----------------------------------------------------------------------------------------

namespace {

// One axis of the window geometry: per output index (offset of the first element, elements, divisor).
struct Axis {
  std::vector<int32_t> g;  // 3 per output
  int64_t extent = 0;      // the largest window: the kernel's kh / kw
  void add(int64_t start, int64_t n, int64_t div, int64_t scale) {
    g.insert(g.end(), {static_cast<int32_t>(start * scale), static_cast<int32_t>(n), static_cast<int32_t>(div)});
    extent = std::max(extent, n);
  }
};

// ATen's cpu_max_pool bounds: from the first in-bounds element, every dilation-th up to the end.
Axis max_axis(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d, int64_t scale) {
  Axis a;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * s - p;
    const int64_t end = std::min(start + (k - 1) * d + 1, in);
    while (start < 0) start += d;
    a.add(start, start < end ? (end - start + d - 1) / d : 0, 1, scale);
  }
  a.extent = k;
  return a;
}

// ATen's cpu_avg_pool bounds: the padded window's size (count_include_pad), then clipped.
Axis avg_axis(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, bool include_pad, int64_t scale) {
  Axis a;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * s - p;
    int64_t end = std::min(start + k, in + p);
    const int64_t padded = end - start;
    start = std::max<int64_t>(start, 0);
    end = std::min(end, in);
    const int64_t n = std::max<int64_t>(end - start, 0);
    a.add(start, n, std::max<int64_t>(include_pad ? padded : n, 1), scale);  // an empty window gives 0
  }
  a.extent = k;
  return a;
}

// ATen's adaptive windows: [floor(o*in/out), ceil((o+1)*in/out)).
Axis adaptive_axis(int64_t in, int64_t out, int64_t scale) {
  Axis a;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = at::native::start_index(o, out, in), end = at::native::end_index(o, out, in);
    a.add(start, end - start, end - start, scale);
  }
  return a;
}

struct Walk {
  Axis rows, cols;
  int64_t dh, dw;  // the row step (dilation * W) and the column step
  bool split;      // divide by the row divisor, then the column one (adaptive), not by their product
};

int64_t plane_of(const at::Tensor& t) { return t.size(-2) * t.size(-1); }

// Runs a pool kernel over every plane of `in` (forward: the input; backward: grad_output, with
// `indices` for max) into new [planes, pitch] rows. Returns (rows of the first output, rows of the
// indices when the kernel writes them); `opix` / `ipix` are the output / input plane sizes.
std::pair<at::Tensor, at::Tensor> run_pool(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& first,
                                           const at::Tensor* indices, const Walk& w, int64_t oh, int64_t ow,
                                           bool forward) {
  const c10::Device where = self.device();
  c10::DeviceGuard guard(where);
  KernelLaunch launch(kernel, self.scalar_type(), where);
  const int64_t h = self.size(-2), wd = self.size(-1), ipix = h * wd, opix = oh * ow;
  if (ipix > kMaxPlane || oh > kMaxSide || ow > kMaxSide) {
    throw KernelUnavailable(launch.info().name + " over a " + std::to_string(h) + "x" + std::to_string(wd) +
                            " plane (the kernel holds up to " + std::to_string(kMaxPlane) + " elements on chip)");
  }
  const int64_t lanes = port_lanes(launch.info(), 0), word = launch.info().args[0].bytes;
  const int64_t ipitch = round_up(ipix, lanes), opitch = round_up(opix, lanes);
  const int64_t planes = ipix == 0 ? 0 : self.numel() / ipix;
  const bool has_geom = indices == nullptr || forward;  // max_pool2d_backward reads indices instead
  // Ports in order: [in | grad], [geom | indices], out rows (+ indices rows for max forward).
  const at::Tensor src = to_planes(first, 2, forward ? ipitch : opitch, word);
  std::vector<int32_t> geom(w.rows.g);
  geom.insert(geom.end(), w.cols.g.begin(), w.cols.g.end());
  const at::Tensor second = has_geom ? geometry_tensor(geom, where) : to_planes(*indices, 2, opitch, launch.info().args[1].bytes);
  const at::Tensor out = at::empty({planes, forward ? opitch : ipitch}, self.options());
  const bool writes_indices = forward && indices != nullptr;
  const at::Tensor idx = writes_indices ? at::empty({planes, opitch}, self.options().dtype(at::kLong)) : at::Tensor();
  if (planes == 0) return {out, idx};

  Allocation* a_src = allocation_of(src);
  Allocation* a_second = allocation_of(second);
  Allocation* a_out = allocation_of(out);
  Allocation* a_idx = writes_indices ? allocation_of(idx) : nullptr;
  sync_to_device(a_src);
  sync_to_device(a_second);
  prepare_device_write(a_out, byte_offset(out), out.nbytes());
  if (a_idx) prepare_device_write(a_idx, byte_offset(idx), idx.nbytes());
  const int64_t src_pitch = forward ? ipitch : opitch, out_pitch = forward ? opitch : ipitch;
  const size_t es = self.element_size();
  for (const CuRange& r : launch.split(planes, 1, ipix)) {
    RunArgs run = launch.add_run();
    run.buffer(a_src, byte_offset(src) + r.begin * src_pitch * es);
    run.buffer(a_second, byte_offset(second) + (has_geom ? 0 : r.begin * opitch * sizeof(int64_t)));
    run.buffer(a_out, byte_offset(out) + r.begin * out_pitch * es);
    if (a_idx) run.buffer(a_idx, byte_offset(idx) + r.begin * opitch * sizeof(int64_t));
    run.size(r.size()).size(ipitch).size(oh).size(ow).size(opitch).size(w.rows.extent).size(w.cols.extent);
    run.size(w.dh).size(w.dw).size(w.split ? 1 : 0);
  }
  launch.run();
  mark_device_written(a_out);
  if (a_idx) mark_device_written(a_idx);
  return {out, idx};
}

std::vector<int64_t> with_plane(const at::Tensor& self, int64_t oh, int64_t ow) {
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - 2);
  sizes.push_back(oh);
  sizes.push_back(ow);
  return sizes;
}

// ATen's argument normalization of the 2-d poolings: one value means both dims; stride defaults to
// the kernel size.
struct PoolArgs {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1, oh, ow;
};

PoolArgs pool_args(const at::Tensor& self, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p,
                   at::IntArrayRef d, bool ceil_mode) {
  TORCH_CHECK(k.size() == 1 || k.size() == 2, "pool2d: kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(s.empty() || s.size() == 1 || s.size() == 2, "pool2d: stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(p.size() == 1 || p.size() == 2, "pool2d: padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(d.empty() || d.size() == 1 || d.size() == 2, "pool2d: dilation must be either a single int, or a tuple of two ints");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "pool2d: expected a 3D or 4D input, got ", self.dim(), "D");
  PoolArgs a;
  a.kh = k[0];
  a.kw = k.size() == 1 ? a.kh : k[1];
  a.sh = s.empty() ? a.kh : s[0];
  a.sw = s.empty() ? a.kw : s.size() == 1 ? a.sh : s[1];
  a.ph = p[0];
  a.pw = p.size() == 1 ? a.ph : p[1];
  if (!d.empty()) {
    a.dh = d[0];
    a.dw = d.size() == 1 ? a.dh : d[1];
  }
  const int64_t h = self.size(-2), w = self.size(-1);
  a.oh = at::native::pooling_output_shape<int64_t>(h, a.kh, a.ph, a.sh, a.dh, ceil_mode);
  a.ow = at::native::pooling_output_shape<int64_t>(w, a.kw, a.pw, a.sw, a.dw, ceil_mode);
  at::native::pool2d_shape_check(self, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw,
                                 self.dim() == 4 ? self.size(1) : self.size(0), h, w, a.oh, a.ow,
                                 self.suggest_memory_format());
  return a;
}

Walk max_walk(const at::Tensor& self, const PoolArgs& a) {
  const int64_t w = self.size(-1);
  return {max_axis(self.size(-2), a.oh, a.kh, a.sh, a.ph, a.dh, w), max_axis(w, a.ow, a.kw, a.sw, a.pw, a.dw, 1),
          a.dh * w, a.dw, false};
}

Walk avg_walk(const at::Tensor& self, const PoolArgs& a, bool include_pad, std::optional<int64_t> divisor) {
  const int64_t w = self.size(-1);
  Walk walk{avg_axis(self.size(-2), a.oh, a.kh, a.sh, a.ph, include_pad, w),
            avg_axis(w, a.ow, a.kw, a.sw, a.pw, include_pad, 1), w, 1, false};
  if (divisor.has_value()) {
    TORCH_CHECK(*divisor != 0, "divisor must be not zero");
    for (size_t i = 2; i < walk.rows.g.size(); i += 3) walk.rows.g[i] = static_cast<int32_t>(*divisor);
    for (size_t i = 2; i < walk.cols.g.size(); i += 3) walk.cols.g[i] = 1;
  }
  return walk;
}

Walk adaptive_walk(const at::Tensor& self, int64_t oh, int64_t ow) {
  const int64_t w = self.size(-1);
  return {adaptive_axis(self.size(-2), oh, w), adaptive_axis(w, ow, 1), w, 1, true};
}

void check_float(const at::Tensor& t, const char* op) {
  if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kHalf) {
    throw KernelUnavailable(std::string(op) + " on " + c10::toString(t.scalar_type()));
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fpga_max_pool2d(const KernelRef& kernel, const at::Tensor& self,
                                                   at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                   at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  check_float(self, "max_pool2d");
  const PoolArgs a = pool_args(self, kernel_size, stride, padding, dilation, ceil_mode);
  const at::Tensor none;
  auto [out, idx] = run_pool(kernel, self, self, &none, max_walk(self, a), a.oh, a.ow, true);
  const int64_t opitch = out.size(1);
  const auto sizes = with_plane(self, a.oh, a.ow);
  return {from_planes(out, sizes, 2, opitch), from_planes(idx, sizes, 2, opitch)};
}

at::Tensor fpga_max_pool2d_backward(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                    at::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices) {
  check_float(self, "max_pool2d_backward");
  const PoolArgs a = pool_args(self, kernel_size, stride, padding, dilation, ceil_mode);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(with_plane(self, a.oh, a.ow)) && indices.sizes() == grad_output.sizes(),
              "max_pool2d_backward: grad_output ", grad_output.sizes(), " and indices ", indices.sizes(),
              " must have the pooled shape ", with_plane(self, a.oh, a.ow));
  if (grad_output.scalar_type() != self.scalar_type()) throw KernelUnavailable("max_pool2d_backward of mixed dtypes");
  auto out = run_pool(kernel, self, grad_output, &indices, max_walk(self, a), a.oh, a.ow, false).first;
  return from_planes(out, self.sizes(), 2, out.size(1));
}

at::Tensor fpga_avg_pool2d(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef kernel_size,
                           at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  check_float(self, "avg_pool2d");
  const PoolArgs a = pool_args(self, kernel_size, stride, padding, {}, ceil_mode);
  auto out = run_pool(kernel, self, self, nullptr, avg_walk(self, a, count_include_pad, divisor_override), a.oh,
                      a.ow, true).first;
  return from_planes(out, with_plane(self, a.oh, a.ow), 2, out.size(1));
}

at::Tensor fpga_avg_pool2d_backward(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                    bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  check_float(self, "avg_pool2d_backward");
  const PoolArgs a = pool_args(self, kernel_size, stride, padding, {}, ceil_mode);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(with_plane(self, a.oh, a.ow)), "avg_pool2d_backward: grad_output ",
              grad_output.sizes(), " must have the pooled shape ", with_plane(self, a.oh, a.ow));
  if (grad_output.scalar_type() != self.scalar_type()) throw KernelUnavailable("avg_pool2d_backward of mixed dtypes");
  auto out = run_pool(kernel, self, grad_output, nullptr, avg_walk(self, a, count_include_pad, divisor_override),
                      a.oh, a.ow, false).first;
  return from_planes(out, self.sizes(), 2, out.size(1));
}

at::Tensor fpga_adaptive_avg_pool2d(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef output_size) {
  check_float(self, "adaptive_avg_pool2d");
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ",
              self.sizes());
  for (int64_t d = 1; d < self.dim(); ++d) {
    TORCH_CHECK(self.size(d) > 0, "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ", self.sizes(), " with dimension ", d, " being empty");
  }
  const int64_t oh = output_size[0], ow = output_size[1];
  auto out = run_pool(kernel, self, self, nullptr, adaptive_walk(self, oh, ow), oh, ow, true).first;
  return from_planes(out, with_plane(self, oh, ow), 2, out.size(1));
}

at::Tensor fpga_adaptive_avg_pool2d_backward(const KernelRef& kernel, const at::Tensor& grad_output,
                                             const at::Tensor& self) {
  check_float(self, "adaptive_avg_pool2d_backward");
  const int64_t oh = grad_output.size(-2), ow = grad_output.size(-1);
  if (grad_output.scalar_type() != self.scalar_type()) throw KernelUnavailable("adaptive_avg_pool2d_backward of mixed dtypes");
  auto out = run_pool(kernel, self, grad_output, nullptr, adaptive_walk(self, oh, ow), oh, ow, false).first;
  return from_planes(out, self.sizes(), 2, out.size(1));
}

}  // namespace aten_fpga
