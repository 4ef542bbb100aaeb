// fpga_fft: torch.fft on the FPGA. ATen hands every transform to _fft_c2c, _fft_r2c or _fft_c2r
// (their CPU impls call pocketfft/MKL, not a stub), so these are the table's host: functions.
//
// The kernel (kernels/hls/fft) transforms contiguous rows of 2^k complex64 samples. A transform
// over several dims is one pass per dim: the dim is moved innermost by a copy on the device (the
// strided copy kernel), the rows are transformed, and the result is viewed back. Real input (r2c)
// is packed into complex rows on the device; Hermitian input (c2r) is transformed as its half
// spectrum with the paired bins doubled, and its real part taken. A length that is not a power of
// two (up to 2^15) runs as Bluestein's chirp-z transform: a convolution of power-of-two length
// m >= 2n - 1 through the same kernel, between pointwise products with chirp tables the host
// computes in double precision. Longer rows run on the CPU through the counted fallback
// (KernelUnavailable, thrown before any work).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <string>
#include <vector>

#include "FPGAType.h"
#include "allocator.h"
#include "fpga_kernel.h"
#include "launch.h"

namespace aten_fpga {
namespace {

constexpr int64_t kMaxPoints = int64_t(1) << 16;  // the kernels' on-chip row (LOG2_NMAX)
constexpr int64_t kMaxChirpPoints = kMaxPoints / 2;  // Bluestein: 2n - 1 points must fit a row

bool power_of_two(int64_t n) { return n >= 1 && (n & (n - 1)) == 0; }

// ATen's fft_norm_mode: none, by_root_n, by_n.
double norm_scale(int64_t normalization, int64_t n) {
  switch (normalization) {
    case 0: return 1.0;
    case 1: return 1.0 / std::sqrt(static_cast<double>(n));
    case 2: return 1.0 / static_cast<double>(n);
  }
  TORCH_CHECK(false, "fft: unknown normalization mode ", normalization);
}

int log2_of(int64_t n) {
  int k = 0;
  while ((int64_t(1) << k) < n) ++k;
  return k;
}

// Complex tensors move as their float32 parts (view_as_real), which the device's copy, fill and
// gather kernels serve.
void copy_complex(const at::Tensor& dst, const at::Tensor& src) { at::view_as_real(dst).copy_(at::view_as_real(src)); }

// x with its lazy conjugation applied, on the device (hfft's input is a conjugated view): the
// parts copied and the imaginary ones negated.
at::Tensor resolved(const at::Tensor& x) {
  if (!x.is_conj()) return x;
  at::Tensor out = at::empty(x.sizes(), x.options());
  at::view_as_real(out).copy_(at::view_as_real(x.conj()));  // x.conj(): the same bytes, unconjugated
  at::view_as_real(out).select(-1, 1).mul_(-1);
  return out;
}

at::Tensor complex_zeros(at::IntArrayRef sizes, const at::TensorOptions& options) {
  std::vector<int64_t> parts(sizes.begin(), sizes.end());
  parts.push_back(2);
  return at::view_as_complex(at::zeros(parts, options.dtype(at::kFloat)));
}

// Every transform length the device must run: a power of two up to kMaxPoints or any length up to
// kMaxChirpPoints, else the whole op falls back (before anything is allocated or launched).
void require_lengths(const KernelRef& kernel, const at::Tensor& self, const std::vector<int64_t>& lengths) {
  kernel_for(kernel, at::kComplexFloat, self.device());  // KernelUnavailable without an fft kernel
  for (int64_t n : lengths) {
    if (n < 1 || n > (power_of_two(n) ? kMaxPoints : kMaxChirpPoints)) {
      throw KernelUnavailable("v_" + std::string(kernel.name) + "_complex64 of " + std::to_string(n) +
                              " points (powers of two up to 65536 and other lengths up to 32768 run on the FPGA)");
    }
  }
}

// The 1-D transform of the power-of-two-long rows of the complex64 tensor x along dim d, on the
// device: a new tensor (a view of the kernel's output rows).
at::Tensor kernel_pass(const KernelRef& kernel, const at::Tensor& x, int64_t d, bool forward, double scale) {
  const int64_t n = x.size(d);
  const at::Tensor rows = x.movedim(d, -1);
  if (x.numel() == 0) return at::empty(rows.sizes(), x.options()).movedim(-1, d);
  const int64_t batch = x.numel() / n;
  KernelLaunch launch(kernel, at::kComplexFloat, x.device());
  launch.expect_args(6, "fix kernels/hls/fft/ops.yaml or host/ps/fpga_fft.cpp");
  // Rows start at whole port words (a 512-bit port moves 8 samples at once).
  const int64_t lanes = std::max<int64_t>(1, launch.info().args[0].bytes / 8);
  const int64_t pitch = (n + lanes - 1) / lanes * lanes;
  at::Tensor in;
  if (pitch == n && rows.is_contiguous() && rows.storage_offset() % lanes == 0) {
    in = rows;
  } else {
    in = at::empty({batch, pitch}, x.options());
    copy_complex(in.narrow(1, 0, n).view(rows.sizes()), rows);  // on the device: gather the rows
  }
  at::Tensor out = at::empty({batch, pitch}, x.options());
  Allocation* in_alloc = allocation_of(in);
  Allocation* out_alloc = allocation_of(out);
  const size_t in_offset = in.storage_offset() * 8, out_offset = out.storage_offset() * 8;
  sync_to_device(in_alloc);
  prepare_device_write(out_alloc, out_offset, batch * pitch * 8);
  for (const CuRange& r : launch.split(batch, 1, n)) {
    launch.add_run()
        .buffer(in_alloc, in_offset + r.begin * pitch * 8)
        .buffer(out_alloc, out_offset + r.begin * pitch * 8)
        .scalar(forward ? -1.0 : 1.0)
        .scalar(scale)
        .size(r.size())
        .size(log2_of(n));
  }
  launch.run();
  mark_device_written(out_alloc);
  return out.narrow(1, 0, n).view(rows.sizes()).movedim(-1, d);
}

// Bluestein: with jk = (j^2 + k^2 - (k - j)^2) / 2, the n-point transform
//   X_k = scale * sum_j x_j e^{s 2 pi i jk/n} = scale * w_k * sum_j (x_j w_j) conj(w_{k-j}),
// w_t = e^{s pi i t^2/n} (s = -1 forward, +1 inverse), is a convolution of x w with conj(w): done
// as m-point transforms (m >= 2n - 1, a power of two) on the device. The host makes the tables in
// double precision -- w (times the scale) and the filter's transform, which includes the inverse's
// 1/m -- as the build makes the kernel's twiddles; t^2 is reduced mod 2n first, so the angle is exact.
at::Tensor bluestein_pass(const KernelRef& kernel, const at::Tensor& x, int64_t d, bool forward, double scale) {
  const int64_t n = x.size(d), m = int64_t(1) << log2_of(2 * n - 1);
  const at::Tensor t = at::arange(n, at::TensorOptions().dtype(at::kLong));
  const at::Tensor angle = (t * t).remainder(2 * n).to(at::kDouble) * ((forward ? -M_PI : M_PI) / n);
  const at::Tensor w = at::polar(at::ones_like(angle), angle);  // complex128, on the CPU
  at::Tensor filter = at::zeros({m}, w.options());
  filter.narrow(0, 0, n).copy_(w.conj());
  if (n > 1) filter.narrow(0, m - n + 1, n - 1).copy_(w.conj().narrow(0, 1, n - 1).flip(0));
  const at::Tensor filter_hat = (at::fft_fft(filter) / static_cast<double>(m)).to(at::kComplexFloat).to(x.device());
  const at::Tensor chirp = w.to(at::kComplexFloat).to(x.device());
  const at::Tensor chirp_out = (w * scale).to(at::kComplexFloat).to(x.device());
  const at::Tensor rows = x.movedim(d, -1);
  std::vector<int64_t> sizes(rows.sizes().begin(), rows.sizes().end());
  sizes.back() = m;
  at::Tensor a = complex_zeros(sizes, x.options());
  at::Tensor head = a.narrow(-1, 0, n);
  at::mul_out(head, rows, chirp);
  at::Tensor a_hat = kernel_pass(kernel, a, -1, /*forward=*/true, 1.0);
  a_hat = at::mul(a_hat, filter_hat);
  const at::Tensor conv = kernel_pass(kernel, a_hat, -1, /*forward=*/false, 1.0);
  return at::mul(conv.narrow(-1, 0, n), chirp_out).movedim(-1, d);
}

at::Tensor pass(const KernelRef& kernel, const at::Tensor& x, int64_t d, bool forward, double scale) {
  return power_of_two(x.size(d)) || x.numel() == 0 ? kernel_pass(kernel, x, d, forward, scale)
                                                   : bluestein_pass(kernel, x, d, forward, scale);
}

std::vector<int64_t> wrapped(const at::Tensor& self, at::IntArrayRef dim) {
  std::vector<int64_t> dims;
  for (int64_t d : dim) dims.push_back(c10::maybe_wrap_dim(d, self.dim()));
  return dims;
}

std::vector<int64_t> lengths_of(const at::Tensor& t, const std::vector<int64_t>& dims) {
  std::vector<int64_t> n;
  for (int64_t d : dims) n.push_back(t.size(d));
  return n;
}

void check_dtype(const at::Tensor& self, at::ScalarType want, const KernelRef& kernel) {
  if (self.scalar_type() != want) {
    throw KernelUnavailable("v_" + std::string(kernel.name) + " for " + c10::toString(self.scalar_type()) +
                            " input (complex64 and float32 transforms run on the FPGA)");
  }
}

at::Tensor& to_out(const at::Tensor& result, at::Tensor& out) {
  at::native::resize_output(out, result.sizes());
  if (out.is_complex() && result.is_complex()) {
    copy_complex(out, result);
  } else {
    out.copy_(result);
  }
  return out;
}

}  // namespace

at::Tensor fpga_fft_c2c(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                        bool forward) {
  check_dtype(self, at::kComplexFloat, kernel);
  const std::vector<int64_t> dims = wrapped(self, dim);
  require_lengths(kernel, self, lengths_of(self, dims));
  c10::DeviceGuard guard(self.device());
  at::Tensor x = resolved(self);
  if (dims.empty()) return x.is_same(self) ? self.clone() : x;
  for (int64_t d : dims) x = pass(kernel, x, d, forward, norm_scale(normalization, self.size(d)));
  return x;
}

at::Tensor& fpga_fft_c2c_out(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef dim,
                             int64_t normalization, bool forward, at::Tensor& out) {
  return to_out(fpga_fft_c2c(kernel, self, dim, normalization, forward), out);
}

at::Tensor fpga_fft_r2c(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                        bool onesided) {
  check_dtype(self, at::kFloat, kernel);
  const std::vector<int64_t> dims = wrapped(self, dim);
  TORCH_CHECK(!dims.empty(), "_fft_r2c: no dims to transform");
  require_lengths(kernel, self, lengths_of(self, dims));
  c10::DeviceGuard guard(self.device());
  // The real rows as complex ones with zero imaginary parts, made on the device.
  at::Tensor x = complex_zeros(self.sizes(), self.options());
  if (x.numel() > 0) at::view_as_real(x).select(-1, 0).copy_(self);
  const int64_t last = dims.back();
  x = pass(kernel, x, last, /*forward=*/true, norm_scale(normalization, self.size(last)));
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    x = pass(kernel, x, dims[i], /*forward=*/true, norm_scale(normalization, self.size(dims[i])));
  }
  return onesided ? x.narrow(last, 0, self.size(last) / 2 + 1) : x;
}

at::Tensor& fpga_fft_r2c_out(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef dim,
                             int64_t normalization, bool onesided, at::Tensor& out) {
  return to_out(fpga_fft_r2c(kernel, self, dim, normalization, onesided), out);
}

at::Tensor fpga_fft_c2r(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                        int64_t last_dim_size) {
  check_dtype(self, at::kComplexFloat, kernel);
  const std::vector<int64_t> dims = wrapped(self, dim);
  TORCH_CHECK(!dims.empty(), "_fft_c2r: no dims to transform");
  const int64_t last = dims.back(), n = last_dim_size;
  std::vector<int64_t> lengths = lengths_of(self, std::vector<int64_t>(dims.begin(), dims.end() - 1));
  lengths.push_back(n);
  require_lengths(kernel, self, lengths);
  c10::DeviceGuard guard(self.device());
  at::Tensor x = resolved(self);
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    x = pass(kernel, x, dims[i], /*forward=*/false, norm_scale(normalization, self.size(dims[i])));
  }
  // A real signal's spectrum is Hermitian: bin n - k is the conjugate of bin k, so the inverse
  // transform's real part is that of the inverse of the half spectrum with bins 1 .. (n-1)/2
  // doubled and the others zero (X_k e^{i t} + conj(X_k) e^{-i t} = 2 Re(X_k e^{i t})). No mirrored
  // copy of the spectrum is needed, and, as in pocketfft, the imaginary parts of bin 0 (and n/2)
  // drop out.
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes[last] = n;
  at::Tensor full = complex_zeros(sizes, x.options());
  const int64_t given = std::min(x.size(last), n / 2 + 1);
  if (full.numel() > 0) {
    copy_complex(full.narrow(last, 0, given), x.narrow(last, 0, given));
    const int64_t paired = std::min(n - n / 2 - 1, x.size(last) - 1);  // bins whose conjugate is implied
    if (paired > 0) at::view_as_real(full.narrow(last, 1, paired)).mul_(2);
  }
  const at::Tensor y = pass(kernel, full, last, /*forward=*/false, norm_scale(normalization, n));
  at::Tensor out = at::empty(sizes, x.options().dtype(at::kFloat));
  if (out.numel() > 0) out.copy_(at::view_as_real(y).select(-1, 0));  // the real part, on the device
  return out;
}

at::Tensor& fpga_fft_c2r_out(const KernelRef& kernel, const at::Tensor& self, at::IntArrayRef dim,
                             int64_t normalization, int64_t last_dim_size, at::Tensor& out) {
  return to_out(fpga_fft_c2r(kernel, self, dim, normalization, last_dim_size), out);
}

}  // namespace aten_fpga
