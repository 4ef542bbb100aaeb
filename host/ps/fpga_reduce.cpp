// fpga_reduce: the driver behind every reduction DispatchStub the table binds (sum_stub, norm_stub,
// argmax_stub...), and the hand-written host functions of the reductions whose ATen impl cannot
// serve "fpga" (prod of everything, var, std), which call it themselves.
//
// ATen's reduction iterator has one output, whose stride is 0 along the reduced dims, and one
// input. The reduce kernels (kernels/hls/reduce) take a contiguous [outer, inner] input -- each
// row reduces to one output element -- with rows padded to whole port words at XCL_OPT 4. So the
// driver views the input as [kept dims..., reduced dims...], copies it into that layout on the
// device when it is not already, splits the rows across the compute units, runs them, and writes
// the outputs (through a device temporary when the output is strided).
#include <ATen/ATen.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "FPGAType.h"
#include "allocator.h"
#include "fpga_kernel.h"
#include "launch.h"

namespace aten_fpga {
namespace {

// The iterator's dims split into kept and reduced ones, each outermost first, with the operands'
// element strides: the [outer, inner] problem the kernel solves.
struct Rows {
  std::vector<int64_t> kept, kept_in, kept_out;  // sizes, input and output strides
  std::vector<int64_t> reduced, reduced_in;      // sizes, input strides
  int64_t outer = 1, inner = 1;
};

Rows rows_of(const at::TensorIterator& iter) {
  Rows r;
  const auto shape = iter.shape();
  const auto out_strides = iter.strides(0), in_strides = iter.strides(1);
  const int64_t out_size = iter.element_size(0), in_size = iter.element_size(1);
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {  // the iterator's dim 0 is innermost
    if (shape[d] == 1) continue;
    if (out_strides[d] == 0) {
      r.reduced.push_back(shape[d]);
      r.reduced_in.push_back(in_strides[d] / in_size);
      r.inner *= shape[d];
    } else {
      r.kept.push_back(shape[d]);
      r.kept_in.push_back(in_strides[d] / in_size);
      r.kept_out.push_back(out_strides[d] / out_size);
      r.outer *= shape[d];
    }
  }
  return r;
}

template <typename... V>
std::vector<int64_t> concat(const V&... v) {
  std::vector<int64_t> out;
  (out.insert(out.end(), v.begin(), v.end()), ...);
  return out;
}

// Row-major strides of `sizes`, where the innermost `inner_dims` dims span rows of `pitch` elements.
std::vector<int64_t> row_major(const std::vector<int64_t>& sizes, size_t inner_dims, int64_t pitch) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (i + 1 == sizes.size() - inner_dims) s = pitch;  // the first kept dim (from the inside) steps rows
    strides[i] = s;
    s *= sizes[i];
  }
  return strides;
}

// Operand `arg` of the iterator seen with the given sizes and element strides, at its data pointer.
at::Tensor operand_view(const at::TensorIterator& iter, int arg, const std::vector<int64_t>& sizes,
                        const std::vector<int64_t>& strides) {
  const at::Tensor& t = iter.tensor(arg);
  const auto* base = static_cast<const char*>(t.storage().data());
  const int64_t offset = (static_cast<const char*>(iter.data_ptr(arg)) - base) / iter.element_size(arg);
  return t.as_strided(sizes, strides, offset);
}


// The vector norm's kernel for its order p: each kind of order is its own kernel (a general p's pow
// built into every lane of every norm would cost the card DSPs and latency for nothing).
const KernelRef& norm_kernel(const KernelRef& norm, c10::ArrayRef<std::optional<c10::Scalar>> scalars) {
  static const KernelRef count{.name = "norm0", .reduction = true}, abs{.name = "norm1", .reduction = true},
      square{.name = "norm2", .reduction = true}, largest{.name = "norm_max", .reduction = true},
      smallest{.name = "norm_min", .reduction = true};
  const double p = scalars.empty() || !scalars[0].has_value() ? 2.0 : scalars[0]->toDouble();
  if (p == 0) return count;
  if (p == 1) return abs;
  if (p == 2) return square;
  if (p == std::numeric_limits<double>::infinity()) return largest;
  if (p == -std::numeric_limits<double>::infinity()) return smallest;
  return norm;  // the general p
}

}  // namespace

void fpga_reduce(at::TensorIterator& iter, const KernelRef& op_kernel,
                 c10::ArrayRef<std::optional<c10::Scalar>> scalars) {
  const KernelRef& kernel = std::strcmp(op_kernel.name, "norm") == 0 ? norm_kernel(op_kernel, scalars) : op_kernel;
  TORCH_INTERNAL_ASSERT(iter.noutputs() == 1 && iter.ninputs() == 1,
                        "fpga_reduce drives single-output reductions; ", kernel.name, " is not one");
  const c10::Device where = iter.device(0);
  const at::ScalarType in_dtype = iter.dtype(1);  // the kernels are named by their input dtype
  KernelLaunch launch(kernel, in_dtype, where);
  const KernelInfo& info = launch.info();
  const size_t nscalars = scalars.size();  // the arguments: in, out, the scalars, outer, inner
  launch.expect_args(nscalars + 4, "template and stub disagree: fix kernels/hls/reduce/ops.yaml 'scalars'");
  TORCH_CHECK(info.args[1].bytes == iter.element_size(0), info.name, " writes ", info.args[1].bytes,
              "-byte elements but the op's output is ", iter.dtype(0),
              " (fix the op's 'out' in kernels/hls/reduce/ops.yaml)");

  const Rows r = rows_of(iter);
  if (r.outer == 0) return;  // no output elements
  c10::DeviceGuard guard(where);

  // The input port: [outer, pitch] with each row's inner elements first. A 512-bit port reads
  // whole words, so there rows are padded to whole words (the kernel ignores the padding).
  const int64_t in_size = iter.element_size(1);
  const int64_t word = std::max<int64_t>(info.args[0].bytes, in_size);
  const int64_t lanes = word / in_size;
  const int64_t pitch = (r.inner + lanes - 1) / lanes * lanes;
  at::Tensor in;
  if (r.inner == 0) {
    in = at::empty({1}, iter.tensor(1).options());  // empty rows: the kernel reads nothing
  } else {
    const std::vector<int64_t> sizes = concat(r.kept, r.reduced), strides = concat(r.kept_in, r.reduced_in);
    const std::vector<int64_t> packed = row_major(sizes, r.reduced.size(), pitch);
    in = operand_view(iter, 1, sizes, strides);
    if (strides != packed || pitch != r.inner || byte_offset(in) % word != 0) {
      at::Tensor t = at::empty({r.outer * pitch}, in.options());
      t.as_strided(sizes, packed).copy_(in);  // on the device: gather (and pad) the rows
      in = t;
    }
  }

  // The output port: one element per row, in row order.
  const int64_t out_size = iter.element_size(0);
  const at::Tensor out_view = operand_view(iter, 0, r.kept, r.kept_out);
  const bool direct = r.kept_out == row_major(r.kept, 0, 1);
  const at::Tensor out = direct ? out_view : at::empty({r.outer}, out_view.options());

  Allocation* in_alloc = allocation_of(in);
  Allocation* out_alloc = allocation_of(out);
  const size_t in_offset = byte_offset(in), out_offset = byte_offset(out);
  sync_to_device(in_alloc);
  prepare_device_write(out_alloc, out_offset, r.outer * out_size);

  c10::SmallVector<c10::Scalar, 2> values;
  for (size_t s = 0; s < nscalars; ++s) values.push_back(scalar_or_default(kernel, scalars, s, in_dtype));

  // Each CU reduces its own block of whole rows.
  for (const CuRange& rows : launch.split(r.outer, 1, std::max<int64_t>(1, r.inner))) {
    RunArgs args = launch.add_run();
    args.buffer(in_alloc, in_offset + static_cast<size_t>(rows.begin * pitch * in_size))
        .buffer(out_alloc, out_offset + static_cast<size_t>(rows.begin * out_size));
    for (const c10::Scalar& v : values) args.scalar(v);
    args.size(rows.size()).size(r.inner);
  }
  launch.run();
  mark_device_written(out_alloc);
  if (!direct) out_view.copy_(out.view(r.kept));  // on the device: scatter into the strided output
}

// --- Reductions ATen does not structure: the table's `host:` entries -----------------------------

namespace {

// ATen's std_var_out, for "fpga" tensors (ATen's own accepts only CPU, CUDA and XPU ones). Complex
// inputs reduce to their real variance in the kernel, where ATen's CPU impl adds the variances of
// the real and imaginary parts.
at::Tensor& std_var(const KernelRef& kernel, const char* fname, at::Tensor& result, const at::Tensor& self,
                    at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction_opt, bool keepdim,
                    bool take_sqrt) {
  TORCH_CHECK(self.layout() == at::kStrided, fname, "(): only strided tensors are supported, got ", self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), fname,
              "(): only floating point and complex dtypes are supported, got ", self.scalar_type());
  const at::ScalarType real = c10::toRealValueType(self.scalar_type());  // what a complex input's variance is
  TORCH_CHECK(at::canCast(real, result.scalar_type()), fname, "(): the result type ", real,
              " can't be cast to the desired output type ", result.scalar_type());
  if (self.is_complex() && result.is_complex()) {
    throw KernelUnavailable(std::string(fname) + " into a complex output");  // the kernels write real ones
  }
  const double correction = correction_opt.value_or(1).toDouble();
  at::TensorIterator iter = at::native::make_reduction(fname, result, self, dim, keepdim, result.scalar_type());
  const int64_t n = iter.num_output_elements() == 0 ? 0 : iter.numel() / iter.num_output_elements();
  if (n - correction <= 0) {
    TORCH_WARN(fname, "(): degrees of freedom is <= 0: the correction (", correction,
               ") should be less than the number of elements reduced (", n, ")");
  }
  if (iter.numel() == 0) {
    result.fill_(std::numeric_limits<double>::quiet_NaN());
  } else {
    const std::optional<c10::Scalar> scalars[] = {correction, take_sqrt};
    fpga_reduce(iter, kernel, scalars);
  }
  return result;
}

at::Tensor real_result(const at::Tensor& self) {
  return at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
}

}  // namespace

at::Tensor& fpga_var_out(const KernelRef& kernel, const at::Tensor& self, at::OptionalIntArrayRef dim,
                         const std::optional<at::Scalar>& correction, bool keepdim, at::Tensor& out) {
  return std_var(kernel, "var", out, self, dim, correction, keepdim, false);
}

at::Tensor& fpga_std_out(const KernelRef& kernel, const at::Tensor& self, at::OptionalIntArrayRef dim,
                         const std::optional<at::Scalar>& correction, bool keepdim, at::Tensor& out) {
  return std_var(kernel, "std", out, self, dim, correction, keepdim, true);
}

at::Tensor fpga_var(const KernelRef& kernel, const at::Tensor& self, at::OptionalIntArrayRef dim,
                    const std::optional<at::Scalar>& correction, bool keepdim) {
  at::Tensor result = real_result(self);
  return std_var(kernel, "var", result, self, dim, correction, keepdim, false);
}

at::Tensor fpga_std(const KernelRef& kernel, const at::Tensor& self, at::OptionalIntArrayRef dim,
                    const std::optional<at::Scalar>& correction, bool keepdim) {
  at::Tensor result = real_result(self);
  return std_var(kernel, "std", result, self, dim, correction, keepdim, true);
}

// prod of every element (ATen's `prod` has no structured out= overload): as ATen's impl.
at::Tensor fpga_prod(const KernelRef& kernel, const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = at::native::get_dtype_from_self(self, dtype, /*promote_integers=*/true);
  at::Tensor result = at::empty({}, self.options().dtype(out_dtype));
  at::TensorIterator iter = at::meta::make_reduction_from_out_ty(self, result, {}, false, out_dtype);
  if (iter.numel() == 0) {
    result.fill_(1);
  } else {
    fpga_reduce(iter, kernel, {});
  }
  return result;
}

// min() and max() of every element (not structured in ATen): the amin/amax reduction.
at::Tensor fpga_min(const KernelRef& kernel, const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  kernel_for(kernel, self.scalar_type(), self.device());
  return at::amin(self);
}

at::Tensor fpga_max(const KernelRef& kernel, const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
  kernel_for(kernel, self.scalar_type(), self.device());
  return at::amax(self);
}

// equal(): same sizes and every element equal (NaN is not), as ATen's: eq, then all, on the device;
// only the answer crosses.
bool fpga_equal(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  TORCH_CHECK(self.dtype() == other.dtype(), "Expected object of scalar type ", self.dtype(),
              " but got scalar type ", other.dtype(), " for argument 'other'");
  if (!self.is_same_size(other)) return false;
  kernel_for(kernel, self.scalar_type(), self.device());
  return at::eq(self, other).all().item<bool>();
}

}  // namespace aten_fpga
