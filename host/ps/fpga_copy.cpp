// fpga_copy: the driver of the strided copy kernels (kernels/hls/copy). A kernel walks an N-dim
// strided input (n0 innermost .. n4, element strides s0..s4) and writes rows of n0 elements every
// `pitch` elements of the output. The driver turns a copy into that shape: it orders the dims by
// the output's strides (a transposed or channels-last output is dense in that order), merges dims
// that are contiguous in both tensors, and splits into several launches only the output dims
// that no single pitch describes (or dims beyond the kernel's five).
#include "fpga_copy.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/copy_native.h>
#include <torch/library.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "FPGAType.h"
#include "allocator.h"
#include "launch.h"

namespace aten_fpga {
namespace {

constexpr int kDims = 5;  // afpga::copy::DIMS

struct Dim {
  int64_t n, in, out;  // size, input and output element strides
};

// The copy kernels by source dtype: v_copy_<src>_<dst>.
const KernelRef* copy_kernel(at::ScalarType src) {
  static const KernelRef f32{"copy_float32"}, f64{"copy_float64"}, f16{"copy_float16"}, i32{"copy_int32"},
      i64{"copy_int64"}, b{"copy_bool"};
  switch (src) {
    case at::kFloat: return &f32;
    case at::kDouble: return &f64;
    case at::kHalf: return &f16;
    case at::kInt: return &i32;
    case at::kLong: return &i64;
    case at::kBool: return &b;
    default: return nullptr;
  }
}


// Runs `dims` (innermost first; the output rows at dims[0], dims[1..] at one pitch) as one launch
// per outer index beyond what a launch can describe. in_off/out_off: element offsets.
void launch(const KernelRef& ref, c10::ArrayRef<c10::Scalar> scalars, const at::Tensor& src, const at::Tensor& dst,
            std::vector<Dim> dims, int64_t in_off, int64_t out_off) {
  // The output's rows: dims[0] is contiguous (or a row of one element) and each further dim must
  // step by the rows below it; the first dim that does not is run as separate launches.
  if (dims.empty() || dims[0].out != 1) dims.insert(dims.begin(), Dim{1, 0, 1});
  size_t fits = dims.size() > 1 ? 2 : 1;
  const int64_t pitch = dims.size() > 1 ? dims[1].out : dims[0].n;
  int64_t rows = dims.size() > 1 ? dims[1].n : 1;
  while (fits < dims.size() && fits < static_cast<size_t>(kDims) && dims[fits].out == pitch * rows) {
    rows *= dims[fits].n;
    ++fits;
  }
  if (fits < dims.size()) {  // the outermost dim that does not fit: one launch per index
    const Dim outer = dims.back();
    dims.pop_back();
    for (int64_t i = 0; i < outer.n; ++i) launch(ref, scalars, src, dst, dims, in_off + i * outer.in, out_off + i * outer.out);
    return;
  }
  uint64_t n[kDims], s[kDims];
  int64_t total = 1;
  for (int d = 0; d < kDims; ++d) {
    n[d] = d < static_cast<int>(dims.size()) ? dims[d].n : 1;
    s[d] = d < static_cast<int>(dims.size()) ? dims[d].in : 0;
    total *= static_cast<int64_t>(n[d]);
  }
  KernelLaunch run(ref, dst.scalar_type(), dst.device());
  run.expect_args(2 + scalars.size() + 2 * kDims + 3, "kernels/hls/copy/ops.yaml and fpga_copy.cpp disagree");
  Allocation* in = allocation_of(src);
  Allocation* out = allocation_of(dst);
  const size_t in_bytes = byte_offset(src) + in_off * src.element_size();
  const size_t out_bytes = byte_offset(dst) + out_off * dst.element_size();
  for (const CuRange& r : run.split(total)) {
    RunArgs args = run.add_run();
    args.buffer(in, in_bytes).buffer(out, out_bytes);
    for (const c10::Scalar& v : scalars) args.scalar(v);
    for (int d = 0; d < kDims; ++d) args.size(static_cast<int64_t>(n[d]));
    for (int d = 0; d < kDims; ++d) args.size(static_cast<int64_t>(s[d]));
    args.size(pitch).size(r.begin).size(r.size());
  }
  run.run();
}

// The dims of a copy of `src` into `dst` (same shape), innermost first: size-1 dims dropped,
// ordered by the output's strides, merged where both tensors are contiguous across them. The
// `keep` innermost dims stay as they are (tril/triu need the matrix's row and column).
std::vector<Dim> plan(const at::Tensor& src, const at::Tensor& dst, int keep) {
  const int64_t nd = dst.dim();
  std::vector<Dim> fixed, dims;
  for (int64_t d = 0; d < nd; ++d) {
    const Dim x{dst.size(d), src.stride(d), dst.stride(d)};
    if (d >= nd - keep) {
      fixed.insert(fixed.begin(), x);
    } else if (x.n != 1) {
      dims.push_back(x);
    }
  }
  // Innermost (smallest output stride) first; a stable order keeps ties as the tensor has them.
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.out > b.out; });
  std::reverse(dims.begin(), dims.end());
  std::vector<Dim> merged = fixed;
  for (const Dim& x : dims) {
    if (static_cast<int>(merged.size()) > keep && !merged.empty()) {
      Dim& last = merged.back();
      if (x.out == last.n * last.out && x.in == last.n * last.in) {
        last.n *= x.n;
        continue;
      }
    }
    merged.push_back(x);
  }
  return merged;
}

// Writes `src` (same shape as dst, any strides) into `dst` through kernel `ref`.
void run_copy(const KernelRef& ref, c10::ArrayRef<c10::Scalar> scalars, const at::Tensor& dst, const at::Tensor& src,
              int keep) {
  c10::DeviceGuard guard(dst.device());
  const auto [in_off, in_n] = byte_span(src);
  sync_to_device(allocation_of(src), in_off, in_n);
  // A destination with gaps (a diagonal) does not overwrite its span: the rest must be current.
  Allocation* out = allocation_of(dst);
  const auto [out_off, out_n] = byte_span(dst);
  if (!dst.is_non_overlapping_and_dense()) sync_to_device(out, out_off, out_n);
  launch(ref, scalars, src, dst, plan(src, dst, keep), 0, 0);
  mark_device_written(out, out_off, out_n);
}

// Throws KernelUnavailable unless the image has `ref` for dst's dtype (before any side effect).
void require(const KernelRef* ref, const at::Tensor& dst, const char* what) {
  if (ref == nullptr) throw KernelUnavailable(std::string(what) + " of " + c10::toString(dst.scalar_type()));
  kernel_for(*ref, dst.scalar_type(), dst.device());
}

// Same dtype, same sizes and strides, no gaps: the copy is one block of bytes.
bool block_copyable(const at::Tensor& src, const at::Tensor& dst) {
  return src.dtype() == dst.dtype() && src.strides() == dst.strides() && src.sizes() == dst.sizes() &&
         src.is_non_overlapping_and_dense() && at::get_overlap_status(src, dst) == at::MemOverlapStatus::No;
}

}  // namespace

void device_copy(const at::Tensor& dst, const at::Tensor& src) {
  // The copy kernels move bytes: a lazily conjugated or negated source (or destination) is resolved
  // by the CPU's copy on the host path instead.
  if (src.is_conj() != dst.is_conj() || src.is_neg() != dst.is_neg()) throw KernelUnavailable("copy resolving conj/neg");
  if (dst.numel() == 0 || dst.is_same(src)) return;
  if (src.device() != dst.device()) throw KernelUnavailable("copy between devices");
  if (block_copyable(src, dst)) {  // a device-to-device DMA
    copy_valid_bytes(allocation_of(dst), byte_offset(dst), allocation_of(src), byte_offset(src),
                     src.numel() * src.element_size());
    return;
  }
  if (src.is_complex() && src.scalar_type() == dst.scalar_type()) {
    // A complex tensor is a real one with a last dim of two parts: the real copy kernels move it.
    device_copy(at::view_as_real(dst), at::view_as_real(src.expand(dst.sizes())));
    return;
  }
  const KernelRef* ref = copy_kernel(src.scalar_type());
  require(ref, dst, (std::string("copy_") + c10::toString(src.scalar_type())).c_str());
  at::assert_no_internal_overlap(dst);
  at::Tensor from = src.expand(dst.sizes());
  if (at::get_overlap_status(from, dst) != at::MemOverlapStatus::No) {
    // Reading what this copy writes: gather the source first.
    at::Tensor t = at::empty(dst.sizes(), from.options());
    run_copy(*ref, {}, t, from, 0);
    from = t;
    ref = copy_kernel(from.scalar_type());
  }
  run_copy(*ref, {}, dst, from, 0);
}

namespace {

at::Tensor& triangle(const KernelRef& kernel, const at::Tensor& self, int64_t diagonal, at::Tensor& out,
                     const char* name) {
  TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  kernel_for(kernel, self.scalar_type(), self.device());  // KernelUnavailable before any side effect
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  const c10::Scalar k[] = {diagonal};
  const bool direct = out.is_contiguous() && at::get_overlap_status(self, out) == at::MemOverlapStatus::No;
  at::Tensor dst = direct ? out : at::empty(self.sizes(), self.options());
  run_copy(kernel, k, dst, self, 2);
  if (!direct) out.copy_(dst);
  return out;
}

}  // namespace

at::Tensor& fpga_copy_(const KernelRef&, at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.device() == src.device() && src.is_conj() == self.is_conj() && src.is_neg() == self.is_neg()) {
    device_copy(self, src);
    return self;
  }
  // To or from the CPU, between two devices, or resolving a lazy conjugation or negation: ATen's
  // copy_ hands it to _copy_from (copy.cpp), which goes through the host shadows (the CPU's copy
  // resolves the bits).
  // The boxed fallback cannot: moving a conjugated tensor to the CPU clones it, which copies.
  return at::native::copy_(self, src, non_blocking);
}

at::Tensor& fpga_tril_out(const KernelRef& kernel, const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return triangle(kernel, self, diagonal, out, "tril");
}

at::Tensor& fpga_triu_out(const KernelRef& kernel, const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return triangle(kernel, self, diagonal, out, "triu");
}

}  // namespace aten_fpga
