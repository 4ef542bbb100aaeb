// fpga_gemm: the host functions of the table's gemm entries (mm, addmm, bmm, baddbmm, addmv, dot,
// addr and their out= and in-place overloads). Each states its op as one batched product
//   out[b] = alpha * a[b] @ b[b] + beta * self[b]      a: [batch, m, k], b: [batch, k, n]
// and runs it on the one gemm kernel (kernels/hls/gemm), which reads a and b in place: a stored
// transposed (weight.t(), the gradients' transposes) is a flag and a pitch, not a copy. Only an
// operand the kernel cannot address -- neither of its two inner strides is 1, or, at XCL_OPT 4,
// its rows are not whole 512-bit words -- is packed on the device first. Inputs made by other
// kernels stay on the device; nothing is synced to the host.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>

#include "FPGAType.h"
#include "allocator.h"
#include "fpga_gemm.h"
#include "launch.h"

namespace aten_fpga {
namespace {

// Rows of c a compute unit gets at least, and in multiples of: a whole tile of the dataflow
// kernels, and whole port words where a transposed a is addressed by row (XCL_OPT 4).
constexpr int64_t kRowGranule = 64;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// How the kernel addresses a [batch, rows, cols] operand: element (b, r, c) at
// base + b * batch_stride + (transposed ? c * ld + r : r * ld + c).
struct Operand {
  at::Tensor t;  // the tensor read (the operand itself, or its packed copy)
  bool transposed;
  int64_t ld, batch_stride;
};

// `lanes` elements per port word: rows (or columns, when transposed) must start whole words
// and every word the kernel reads must lie inside the storage.
bool addressable(const at::Tensor& t, bool transposed, int64_t ld, int64_t lanes) {
  if (lanes == 1) return true;
  const int64_t lines = transposed ? t.size(2) : t.size(1), length = transposed ? t.size(1) : t.size(2);
  const int64_t last = t.storage_offset() + (t.size(0) - 1) * t.stride(0) + (lines - 1) * ld + round_up(length, lanes);
  // One batch item's stride is never used (a 2-D operand's, made 3-D, is whatever unsqueeze gave).
  return ld % lanes == 0 && (t.size(0) == 1 || t.stride(0) % lanes == 0) && t.storage_offset() % lanes == 0 &&
         last * t.element_size() <= static_cast<int64_t>(t.storage().nbytes());
}

Operand operand(const at::Tensor& t, int64_t lanes) {
  const int64_t rows = t.size(1), cols = t.size(2);
  const int64_t batch_stride = t.size(0) == 1 ? 0 : t.stride(0);
  // A dim of size 1 has any stride: either layout serves; a pitch at least the line keeps the
  // kernel's addressing within the operand.
  if (t.stride(2) == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? round_up(cols, lanes) : t.stride(1);
    if (ld >= cols && addressable(t, false, ld, lanes)) return {t, false, ld, batch_stride};
  }
  if (t.stride(1) == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? round_up(rows, lanes) : t.stride(2);
    if (ld >= rows && addressable(t, true, ld, lanes)) return {t, true, ld, batch_stride};
  }
  // Pack on the device: [batch, rows, ld] with ld whole words (the kernel ignores the padding).
  const int64_t ld = round_up(cols, lanes);
  at::Tensor packed = at::empty({t.size(0), rows, ld}, t.options());
  packed.narrow(2, 0, cols).copy_(t);
  return {packed, false, ld, t.size(0) == 1 ? 0 : rows * ld};
}

bool same_storage(const at::Tensor& x, const at::Tensor& y) {
  return x.storage().is_alias_of(y.storage());
}

// out = alpha * a @ b + beta * self for [batch, m, k] x [batch, k, n] -> [batch, m, n] views of
// the op's tensors (`self` already expanded to out's shape, or undefined when beta is 0). `launch`
// was made first, so that an image without the kernel falls back before any side effect.
// A fused GEMM (run_fused_gemm) passes its epilogue's ports, read and written: its kernel reads
// self from one of them, so self is undefined even where beta is not 0.
// A fused GEMM whose epilogue can run in bands of rows gives each port's elements per row of c
// (`band_strides`: 0 for a port every band reads whole, a bias), so that each compute unit's run
// addresses its band; without them it runs whole on one compute unit (its sums run over every row).
void run_gemm(KernelLaunch& launch, const at::Tensor& a, const at::Tensor& b, const at::Tensor& self,
              const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor& out,
              const std::vector<at::Tensor>& epilogue_in = {}, const std::vector<at::Tensor>& epilogue_out = {},
              const std::vector<int64_t>& band_strides = {}) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  if (out.numel() == 0) return;
  const int64_t esize = out.element_size();
  const int64_t lanes = std::max<int64_t>(1, launch.info().args[0].bytes / esize);
  const bool fused = !epilogue_in.empty() || !epilogue_out.empty();
  launch.expect_args(16 + epilogue_in.size() + epilogue_out.size(),
                     "a, b, c, alpha, beta, 11 sizes and the epilogue's ports (kernels/hls/gemm/ops.yaml, "
                     "aten_fpga/compile and the host disagree)");
  const Operand A = operand(a, lanes), B = operand(b, lanes);
  // A fused GEMM's sums of op(a)'s rows (its port `arows`, aten_fpga/compile) are taken as a
  // streams in stored transposed; the runner passes such an a only, so a packed copy here is a bug,
  // not a case to compute (the kernel would leave the sums at 0).
  TORCH_CHECK(!fused || A.transposed ||
                  std::none_of(launch.info().args.begin(), launch.info().args.end(),
                               [](const KernelArgInfo& arg) { return arg.name == "arows"; }),
              launch.info().name, ": its row sums need a stored transposed, in place (aten_fpga/compile/runner.py)");

  // c: out itself when the kernel can write it in place -- unit column stride, no overlap with a
  // or b, and at XCL_OPT 4 rows of whole words that belong to it (a fused GEMM's c is allocated
  // with padded rows by aten_fpga/compile when n is not whole words) -- else a device temporary
  // copied into out afterwards.
  const bool beta_zero = beta.toComplexDouble() == 0.0;
  const int64_t ldc = m == 1 ? round_up(n, lanes) : out.stride(1);
  const bool direct = (out.stride(2) == 1 || n == 1) && ldc >= n && (batch == 1 || out.stride(0) >= m * ldc) &&
                      !same_storage(out, a) && !same_storage(out, b) &&
                      (lanes == 1 || ((n % lanes == 0 || fused) && addressable(out, false, ldc, lanes)));
  TORCH_CHECK(direct || !fused, launch.info().name, ": a fused GEMM writes its output in place (unit column stride, "
              "rows of whole port words); aten_fpga/compile allocates it so");
  at::Tensor c = direct ? out : at::empty({batch, m, round_up(n, lanes)}, out.options());
  const int64_t c_ld = direct ? ldc : c.size(2);
  const int64_t c_stride = batch == 1 ? 0 : (direct ? out.stride(0) : m * c_ld);
  at::Tensor c_view = direct ? c : c.narrow(2, 0, n);
  const bool reads_c = !beta_zero && !fused;
  if (reads_c && !(self.is_same(c_view) || (self.data_ptr() == c_view.data_ptr() &&
                                            self.strides() == c_view.strides()))) {
    c_view.copy_(self);  // on the device: the bias (broadcast) becomes c's initial value
  }
  Allocation* ca = allocation_of(c);
  if (!reads_c) {  // the kernel writes every element of a dense c: its old bytes need no sync
    prepare_device_write(ca, byte_offset(c), c.is_contiguous() ? c.numel() * esize : 0);
  } else {
    sync_to_device(ca);
  }
  // k = 0: a and b have no bytes (no buffer); the kernel reads neither, and writes beta * c.
  Allocation* aa = k == 0 ? ca : allocation_of(A.t);
  Allocation* ba = k == 0 ? ca : allocation_of(B.t);
  sync_to_device(aa);
  sync_to_device(ba);
  for (const at::Tensor& t : epilogue_in) sync_to_device(allocation_of(t));
  for (const at::Tensor& t : epilogue_out) prepare_device_write(allocation_of(t), byte_offset(t), t.nbytes());

  const uint64_t trans = (A.transposed ? 1 : 0) | (B.transposed ? 2 : 0);
  // Each compute unit computes a band of rows of c, for every batch item; a fused GEMM only when
  // its epilogue can (band_strides), else it runs whole on one.
  TORCH_CHECK(band_strides.empty() || band_strides.size() == epilogue_in.size() + epilogue_out.size(),
              launch.info().name, ": one band stride per epilogue port");
  c10::SmallVector<CuRange, 8> bands{CuRange{0, m}};
  if (!fused || !band_strides.empty()) bands = launch.split(m, kRowGranule, n * std::max<int64_t>(k, 1) * batch);
  for (const CuRange& r : bands) {
    const int64_t a_off = A.transposed ? r.begin : r.begin * A.ld;
    RunArgs run = launch.add_run();
    run.buffer(aa, k == 0 ? 0 : byte_offset(A.t) + a_off * esize)
        .buffer(ba, k == 0 ? 0 : byte_offset(B.t))
        .buffer(ca, byte_offset(c) + r.begin * c_ld * esize)
        .scalar(alpha)
        .scalar(beta_zero ? c10::Scalar(0.0) : beta)
        .size(r.size()).size(n).size(k).size(batch).size(trans)
        .size(A.ld).size(B.ld).size(c_ld)
        .size(A.batch_stride).size(B.batch_stride).size(c_stride);
    size_t port = 0;
    for (const auto* ports : {&epilogue_in, &epilogue_out}) {
      for (const at::Tensor& t : *ports) {
        const int64_t band = band_strides.empty() ? 0 : r.begin * band_strides[port] * t.element_size();
        run.buffer(allocation_of(t), byte_offset(t) + band);
        ++port;
      }
    }
  }
  launch.run();
  mark_device_written(ca);
  for (const at::Tensor& t : epilogue_out) mark_device_written(allocation_of(t));
  if (!direct) out.copy_(c_view);  // on the device
}

void check_device(const char* op, std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor& first = **ts.begin();
  for (const at::Tensor* t : ts) {
    TORCH_CHECK(t->device() == first.device(), op, ": expected all tensors to be on the same device, but found ",
                t->device(), " and ", first.device());
  }
}

void check_dtypes(const char* op, const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), op, ": expected both operands to have the same dtype, but got: ",
              x.scalar_type(), " != ", y.scalar_type());
}

// The batched product behind every overload: a [batch, m, k], b [batch, k, n]; self (undefined
// for the products without one) broadcasts to [batch, m, n]; out is resized to `shape` and
// viewed as [batch, m, n] by `as3`.
template <typename View>
at::Tensor& product(const KernelRef& kernel, const char* op, const at::Tensor& a, const at::Tensor& b,
                    const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out,
                    at::IntArrayRef shape, View as3) {
  check_dtypes(op, a, b);
  if (self.defined()) {
    check_dtypes(op, self, a);
    check_device(op, {&a, &b, &self, &out});
  } else {
    check_device(op, {&a, &b, &out});
  }
  TORCH_CHECK(out.scalar_type() == a.scalar_type(), op, ": expected out to have dtype ", a.scalar_type(),
              " but got ", out.scalar_type());
  c10::DeviceGuard guard(a.device());
  KernelLaunch launch(kernel, a.scalar_type(), a.device());  // throws KernelUnavailable: CPU fallback
  at::native::resize_output(out, shape);
  at::Tensor self3 = self.defined() && beta.toComplexDouble() != 0.0 ? as3(self.expand(shape)) : at::Tensor();
  run_gemm(launch, a, b, self3, beta, alpha, as3(out));
  return out;
}

at::Tensor as_batch(const at::Tensor& t) { return t.dim() == 3 ? t : t.unsqueeze(0); }

void check_mm(const char* op, const at::Tensor& m1, const at::Tensor& m2) {
  TORCH_CHECK(m1.dim() == 2, op, ": self must be a matrix");
  TORCH_CHECK(m2.dim() == 2, op, ": mat2 must be a matrix");
  TORCH_CHECK(m1.size(1) == m2.size(0), op, ": mat1 and mat2 shapes cannot be multiplied (", m1.size(0), "x",
              m1.size(1), " and ", m2.size(0), "x", m2.size(1), ")");
}

void check_bmm(const char* op, const at::Tensor& b1, const at::Tensor& b2) {
  TORCH_CHECK(b1.dim() == 3, op, ": batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, op, ": batch2 must be a 3D tensor");
  TORCH_CHECK(b2.size(0) == b1.size(0) && b2.size(1) == b1.size(2), op, ": Expected size for first two dimensions ",
              "of batch2 tensor to be: [", b1.size(0), ", ", b1.size(2), "] but got: [", b2.size(0), ", ",
              b2.size(1), "].");
}

at::Tensor empty_like_product(const at::Tensor& a) { return at::empty({0}, a.options()); }

// addmv and dot: a vector is a one-column matrix.
at::Tensor column(const at::Tensor& v) { return v.unsqueeze(1).unsqueeze(0); }

at::Tensor& addmv_impl(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && (self.dim() == 1 || self.dim() == 0),
              "vector + matrix @ vector expected, got ", self.dim(), ", ", mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1),
              "size mismatch, got input (", self.dim() == 0 ? 1 : self.size(0), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  const int64_t rows = mat.size(0);
  return product(kernel, "addmv", as_batch(mat), column(vec), self, beta, alpha, out, {rows},
                 [](const at::Tensor& t) { return column(t); });
}

at::Tensor& addr_impl(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& vec1,
                      const at::Tensor& vec2, const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(vec1.dim() == 1 && vec2.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(),
              "-D, and vec2 ", vec2.dim(), "-D");
  // The outer product: a [m, 1] column times a [1, n] row, k = 1.
  return product(kernel, "addr", vec1.unsqueeze(1).unsqueeze(0), vec2.unsqueeze(0).unsqueeze(0), self, beta, alpha,
                 out, {vec1.size(0), vec2.size(0)}, as_batch);
}

}  // namespace

void run_fused_gemm(KernelLaunch& launch, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha,
                    const c10::Scalar& beta, const std::vector<at::Tensor>& inputs,
                    const std::vector<at::Tensor>& outputs, const std::vector<int64_t>& band_strides) {
  if (a.dim() == 3) {
    check_bmm("fused gemm", a, b);
  } else {
    check_mm("fused gemm", a, b);
  }
  const at::Tensor a3 = as_batch(a), b3 = as_batch(b);
  const int64_t batch = a3.size(0), m = a3.size(1), n = b3.size(2);
  TORCH_CHECK(!outputs.empty() && outputs[0].numel() == batch * m * n, launch.info().name,
              ": a fused GEMM's first output is c, ", batch, " x ", m, " x ", n);
  const std::vector<at::Tensor> further(outputs.begin() + 1, outputs.end());
  // c may have padded rows (a pitch of whole words): a view, not a copy.
  run_gemm(launch, a3, b3, at::Tensor(), beta, alpha, outputs[0].view({batch, m, n}), inputs, further, band_strides);
}

// --- mm, addmm ---------------------------------------------------------------------------------

at::Tensor& fpga_mm_out(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_mm("mm", self, mat2);
  return product(kernel, "mm", as_batch(self), as_batch(mat2), at::Tensor(), 0, 1, out,
                 {self.size(0), mat2.size(1)}, as_batch);
}

at::Tensor fpga_mm(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = empty_like_product(self);
  return fpga_mm_out(kernel, self, mat2, out);
}

at::Tensor& fpga_addmm_out(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat1,
                           const at::Tensor& mat2, const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  check_mm("addmm", mat1, mat2);
  const std::vector<int64_t> shape{mat1.size(0), mat2.size(1)};
  TORCH_CHECK(self.dim() <= 2 && at::is_expandable_to(self.sizes(), shape), "addmm: self of shape ", self.sizes(),
              " cannot be broadcast to ", at::IntArrayRef(shape));
  return product(kernel, "addmm", as_batch(mat1), as_batch(mat2), self, beta, alpha, out, shape, as_batch);
}

at::Tensor fpga_addmm(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor out = empty_like_product(mat1);
  return fpga_addmm_out(kernel, self, mat1, mat2, beta, alpha, out);
}

at::Tensor& fpga_addmm_(const KernelRef& kernel, at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                        const at::Scalar& beta, const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 2 && self.size(0) == mat1.size(0) && self.size(1) == mat2.size(1),
              "addmm_: self must be the [", mat1.size(0), ", ", mat2.size(1), "] result, got ", self.sizes());
  return fpga_addmm_out(kernel, self, mat1, mat2, beta, alpha, self);
}

// --- bmm, baddbmm ------------------------------------------------------------------------------

at::Tensor& fpga_bmm_out(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_bmm("bmm", self, mat2);
  return product(kernel, "bmm", self, mat2, at::Tensor(), 0, 1, out, {self.size(0), self.size(1), mat2.size(2)},
                 as_batch);
}

at::Tensor fpga_bmm(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = empty_like_product(self);
  return fpga_bmm_out(kernel, self, mat2, out);
}

at::Tensor& fpga_baddbmm_out(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& batch1,
                             const at::Tensor& batch2, const at::Scalar& beta, const at::Scalar& alpha,
                             at::Tensor& out) {
  check_bmm("baddbmm", batch1, batch2);
  const std::vector<int64_t> shape{batch1.size(0), batch1.size(1), batch2.size(2)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), shape), "baddbmm: self of shape ", self.sizes(),
              " cannot be broadcast to ", at::IntArrayRef(shape));
  return product(kernel, "baddbmm", batch1, batch2, self, beta, alpha, out, shape, as_batch);
}

at::Tensor fpga_baddbmm(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& batch1,
                        const at::Tensor& batch2, const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor out = empty_like_product(batch1);
  return fpga_baddbmm_out(kernel, self, batch1, batch2, beta, alpha, out);
}

at::Tensor& fpga_baddbmm_(const KernelRef& kernel, at::Tensor& self, const at::Tensor& batch1,
                          const at::Tensor& batch2, const at::Scalar& beta, const at::Scalar& alpha) {
  check_bmm("baddbmm_", batch1, batch2);
  TORCH_CHECK(self.dim() == 3 && self.size(0) == batch1.size(0) && self.size(1) == batch1.size(1) &&
                  self.size(2) == batch2.size(2),
              "baddbmm_: self must be the result's shape, got ", self.sizes());
  return fpga_baddbmm_out(kernel, self, batch1, batch2, beta, alpha, self);
}

// --- addmv (mv reaches addmv_), dot, addr (addr_ reaches addr.out) -------------------------------

at::Tensor& fpga_addmv_out(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat,
                           const at::Tensor& vec, const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  return addmv_impl(kernel, self, mat, vec, beta, alpha, out);
}

at::Tensor fpga_addmv(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor out = empty_like_product(mat);
  return addmv_impl(kernel, self, mat, vec, beta, alpha, out);
}

at::Tensor& fpga_addmv_(const KernelRef& kernel, at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                        const at::Scalar& beta, const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 1 && self.size(0) == mat.size(0), "addmv_: self must be the [", mat.size(0),
              "] result, got ", self.sizes());
  return addmv_impl(kernel, self, mat, vec, beta, alpha, self);
}

at::Tensor fpga_dot(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& tensor) {
  TORCH_CHECK(self.dim() == 1 && tensor.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
              tensor.dim(), "D tensors");
  TORCH_CHECK(self.size(0) == tensor.size(0), "inconsistent tensor size, expected tensor [", self.size(0),
              "] and src [", tensor.size(0), "] to have the same number of elements, but got ", self.size(0),
              " and ", tensor.size(0), " elements respectively");
  at::Tensor out = empty_like_product(self);
  // A [1, k] row times a [k, 1] column.
  product(kernel, "dot", self.unsqueeze(0).unsqueeze(0), column(tensor), at::Tensor(), 0, 1, out, {},
          [](const at::Tensor& t) { return t.view({1, 1, 1}); });
  return out;
}

at::Tensor& fpga_addr_out(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& vec1,
                          const at::Tensor& vec2, const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  // addr_ (ATen's composite in-place form) is addr.out into self: self is the result, not broadcast.
  TORCH_CHECK(!out.is_same(self) || self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  return addr_impl(kernel, self, vec1, vec2, beta, alpha, out);
}

at::Tensor fpga_addr(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                     const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor out = empty_like_product(vec1);
  return addr_impl(kernel, self, vec1, vec2, beta, alpha, out);
}

}  // namespace aten_fpga
