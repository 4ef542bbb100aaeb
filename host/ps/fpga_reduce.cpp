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
#include "afpga_abi.h"
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

// Where operand `arg` of the iterator starts: its allocation, and its data pointer's byte offset.
// (No view of it: a small op's launch makes none unless it must copy.)
struct Place {
  Allocation* alloc;
  size_t offset;
};

Place operand_place(const at::TensorIterator& iter, int arg) {
  const at::Tensor& t = iter.tensor(arg);
  const auto* base = static_cast<const char*>(t.storage().data());
  return {allocation_of(t), static_cast<size_t>(static_cast<const char*>(iter.data_ptr(arg)) - base)};
}

// Operand `arg` of the iterator seen with the given sizes and element strides, at its data pointer.
at::Tensor operand_view(const at::TensorIterator& iter, int arg, const std::vector<int64_t>& sizes,
                        const std::vector<int64_t>& strides) {
  const int64_t offset = static_cast<int64_t>(operand_place(iter, arg).offset) / iter.element_size(arg);
  return iter.tensor(arg).as_strided(sizes, strides, offset);
}


// A reduction over a middle block of dims: the input, by its strides, a dense [O, R, C] block
// (outermost first: kept dims, then reduced ones, then kept ones again, C of them innermost), which
// the COLUMNS mode reduces to [O, C] without moving it; R = 1 when the reduced dims have one element
// (the iterator drops them). c == 0 when the input is not so.
struct Columns {
  int64_t o = 1, r = 1, c = 0;
  size_t c_dims = 0;                             // dims in C
  std::vector<int64_t> sizes, strides;           // the input's dims in that order, element strides
  std::vector<int64_t> out_sizes, out_strides;   // the output's [O..., C...] dims
};

Columns columns_of(const at::TensorIterator& iter) {
  struct Dim {
    int64_t size, in, out;
  };
  std::vector<Dim> dims;
  const auto shape = iter.shape();
  const auto out_strides = iter.strides(0), in_strides = iter.strides(1);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1) dims.push_back({shape[d], in_strides[d] / iter.element_size(1), out_strides[d] / iter.element_size(0)});
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.in < b.in; });
  Columns none, c;
  int64_t dense = 1;
  size_t i = 0;
  for (const Dim& d : dims) {  // innermost first: dense, C kept, R reduced, O kept
    if (d.in != dense) return none;
    dense *= d.size;
  }
  for (; i < dims.size() && dims[i].out != 0; ++i) c.c_dims++;
  if (c.c_dims == 0) return none;
  size_t reduced = 0;  // none when every dim is kept (a reduced dim of one element): R = 1
  for (; i < dims.size() && dims[i].out == 0; ++i) reduced++;
  if (reduced == 0 && i < dims.size()) return none;
  for (size_t j = i; j < dims.size(); ++j) {
    if (dims[j].out == 0) return none;
  }
  c.c = 1;
  for (size_t j = dims.size(); j-- > 0;) {  // outermost first
    c.sizes.push_back(dims[j].size);
    c.strides.push_back(dims[j].in);
    if (dims[j].out != 0) {
      c.out_sizes.push_back(dims[j].size);
      c.out_strides.push_back(dims[j].out);
    }
    (j < c.c_dims ? c.c : j < c.c_dims + reduced ? c.r : c.o) *= dims[j].size;
  }
  return c;
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
  const size_t nscalars = scalars.size();  // the arguments: in, out, part, the scalars, 7 sizes
  launch.expect_args(nscalars + 10, "template and stub disagree: fix kernels/hls/reduce/ops.yaml 'scalars'");
  TORCH_CHECK(info.args[1].bytes == iter.element_size(0), info.name, " writes ", info.args[1].bytes,
              "-byte elements but the op's output is ", iter.dtype(0),
              " (fix the op's 'out' in kernels/hls/reduce/ops.yaml)");
  TORCH_CHECK(info.args[2].bytes == AFPGA_REDUCE_PARTIAL_BYTES, info.name, ": its partials port moves ",
              info.args[2].bytes, "-byte words, not ", AFPGA_REDUCE_PARTIAL_BYTES, " (rebuild the image)");

  const Rows r = rows_of(iter);
  if (r.outer == 0) return;  // no output elements
  c10::DeviceGuard guard(where);
  c10::SmallVector<c10::Scalar, 2> values;
  for (size_t s = 0; s < nscalars; ++s) values.push_back(scalar_or_default(kernel, scalars, s, in_dtype));

  const int64_t in_size = iter.element_size(1), out_size = iter.element_size(0);
  const int64_t word = std::max<int64_t>(info.args[0].bytes, in_size);
  const int64_t lanes = word / in_size;  // elements per port item
  const Columns cols = r.inner == 0 ? Columns{} : columns_of(iter);

  // The input port's layout. Rows: [outer, pitch] with each row's inner elements first. Columns:
  // [O, R, pitch] with each row's C elements first. A 512-bit port reads whole words, so there rows
  // are padded to whole words (the kernel ignores the padding) and start on a word.
  const bool by_columns = cols.c > 1;
  const int64_t row_len = by_columns ? cols.c : r.inner;
  const int64_t pitch = (row_len + lanes - 1) / lanes * lanes;
  at::Tensor in;  // a device temporary, where the input is not laid out so already
  Place in_place;
  if (r.inner == 0) {
    in = at::empty({1}, iter.tensor(1).options());  // empty rows: the kernel reads nothing
    in_place = {allocation_of(in), 0};
  } else {
    const std::vector<int64_t> sizes = by_columns ? cols.sizes : concat(r.kept, r.reduced);
    const std::vector<int64_t> strides = by_columns ? cols.strides : concat(r.kept_in, r.reduced_in);
    const std::vector<int64_t> packed = row_major(sizes, by_columns ? cols.c_dims : r.reduced.size(), pitch);
    in_place = operand_place(iter, 1);
    const int64_t rows = by_columns ? cols.o * cols.r : r.outer;
    // One row needs no padding where its block holds the rest of its last word (x.sum() of a few
    // elements): the kernel reads that word and ignores the lanes past the row.
    const bool last_word_in_block = rows == 1 && in_place.offset + pitch * in_size <= in_place.alloc->buffer->bytes;
    if (strides != packed || (pitch != row_len && !last_word_in_block) || in_place.offset % word != 0) {
      in = at::empty({rows * pitch}, iter.tensor(1).options());
      // On the device: gather (and pad) the rows.
      in.as_strided(sizes, packed).copy_(operand_view(iter, 1, sizes, strides));
      in_place = {allocation_of(in), 0};
    }
  }

  // The output port: one element per result, in the kernel's order (rows; [O, C] for columns).
  const std::vector<int64_t> out_sizes = by_columns ? cols.out_sizes : r.kept;
  const std::vector<int64_t> out_strides = by_columns ? cols.out_strides : r.kept_out;
  const bool direct = out_strides == row_major(out_sizes, 0, 1);
  // A strided output: a device temporary, then scattered.
  const at::Tensor out = direct ? at::Tensor() : at::empty({r.outer}, iter.tensor(0).options());
  const Place out_place = direct ? operand_place(iter, 0) : Place{allocation_of(out), 0};

  Allocation* in_alloc = in_place.alloc;
  Allocation* out_alloc = out_place.alloc;
  const size_t in_offset = in_place.offset, out_offset = out_place.offset;
  sync_to_device(in_alloc);
  prepare_device_write(out_alloc, out_offset, r.outer * out_size);

  // The runs, each one compute unit's: its input item, output element, partial word, sizes.
  struct Run {
    int64_t in_item, out_at, part_at, outer, inner, cols, first;
  };
  c10::SmallVector<Run, 8> runs;
  int64_t pieces = 1;  // > 1: each result is split over that many runs, whose partials are combined
  int64_t results = r.outer;
  const int64_t pitch_items = pitch / lanes;
  const int64_t cus = launch.cus();
  if (by_columns) {
    // Columns: each CU a block of rows of the one batch, and the partials combined, when the
    // columns are too few to go round or a row is one tile (each CU then reads one contiguous
    // stretch, not a slice of every row: the emulator's memory streams it twice as fast) and the
    // rows are many enough for the combine -- one CU merging a word per column per CU -- to take
    // under an eighth of the fold's time; else each CU a block of whole columns (words), or whole
    // batches. (4 CUs: 2048 float32 rows or more; 32 CUs on an HBM card: 131072.)
    const int64_t words = pitch_items, elements = cols.o * cols.r * cols.c;
    const bool few_columns = words < cus;
    const bool rows_are_tiles =
        words <= AFPGA_REDUCE_COLUMN_TILE && cols.r * in_size >= 8 * cus * cus * AFPGA_REDUCE_PARTIAL_BYTES;
    if (cols.o == 1 && cols.r >= 2 * cus && (few_columns || rows_are_tiles)) {
      for (const CuRange& b : launch.split(cols.r, 1, cols.c)) runs.push_back({b.begin * pitch_items, 0, 0, 1, b.size(), cols.c, b.begin});
      pieces = static_cast<int64_t>(runs.size());
      for (size_t s = 0; s < runs.size(); ++s) runs[s].part_at = static_cast<int64_t>(s) * cols.c;
    } else if (cols.o == 1) {
      for (const CuRange& b : launch.split(words, 1, std::max<int64_t>(1, elements / words))) {
        runs.push_back({b.begin, b.begin * lanes, 0, 1, cols.r, std::min(cols.c, b.end * lanes) - b.begin * lanes, 0});
      }
    } else {
      for (const CuRange& b : launch.split(cols.o, 1, cols.r * cols.c)) {
        runs.push_back({b.begin * cols.r * pitch_items, b.begin * cols.c, 0, b.size(), cols.r, cols.c, 0});
      }
    }
  } else {
    // Rows: each CU a block of whole rows; when the rows are fewer than the CUs and long, each row
    // split into pieces of whole words, one per CU, and the partials combined.
    const int64_t split = r.inner == 0 ? 1 : std::min(cus / r.outer, r.inner / kMinElementsPerCU);
    if (split >= 2) {
      const int64_t piece = (pitch_items + split - 1) / split;  // words per piece
      pieces = (pitch_items + piece - 1) / piece;
      for (int64_t s = 0; s < pieces; ++s) {
        for (int64_t row = 0; row < r.outer; ++row) {
          const int64_t begin = s * piece * lanes, end = std::min(r.inner, (s + 1) * piece * lanes);
          runs.push_back({row * pitch_items + s * piece, 0, s * r.outer + row, 1, end - begin, 1, begin});
        }
      }
    } else {
      for (const CuRange& b : launch.split(r.outer, 1, std::max<int64_t>(1, r.inner))) {
        runs.push_back({b.begin * pitch_items, b.begin, 0, b.size(), r.inner, 1, 0});
      }
    }
  }

  // Partials: one word per result per piece, on the device only. Without pieces the kernel leaves
  // its partials port alone, so it gets the output's buffer and no allocation (a small op's cost).
  at::Tensor partials;
  Allocation* part_alloc = out_alloc;
  size_t part_offset = out_offset;
  if (pieces > 1) {
    partials = at::empty({pieces * results * AFPGA_REDUCE_PARTIAL_BYTES}, iter.tensor(0).options().dtype(at::kByte));
    part_alloc = allocation_of(partials);
    part_offset = byte_offset(partials);
    prepare_device_write(part_alloc, part_offset, partials.nbytes());
  }
  const int64_t mode = (by_columns ? AFPGA_REDUCE_COLUMNS : 0) | (pieces > 1 ? AFPGA_REDUCE_PARTIAL : 0);
  for (const Run& u : runs) {
    RunArgs args = launch.add_run();
    args.buffer(in_alloc, in_offset + static_cast<size_t>(u.in_item * word))
        .buffer(out_alloc, out_offset + static_cast<size_t>(u.out_at * out_size))
        .buffer(part_alloc, part_offset + static_cast<size_t>(u.part_at * AFPGA_REDUCE_PARTIAL_BYTES));
    for (const c10::Scalar& v : values) args.scalar(v);
    args.size(u.outer).size(u.inner).size(u.cols).size(pitch_items).size(u.first)
        .size(by_columns ? cols.r : r.inner).size(mode);
  }
  launch.run();
  if (pieces > 1) {
    // The combine: one unit merges each result's pieces in order and finishes it.
    mark_device_written(part_alloc);
    KernelLaunch combine(kernel, in_dtype, where);
    RunArgs args = combine.add_run();
    args.buffer(in_alloc, in_offset, 0).buffer(out_alloc, out_offset).buffer(part_alloc, part_offset);
    for (const c10::Scalar& v : values) args.scalar(v);
    args.size(results).size(pieces).size(1).size(1).size(0).size(by_columns ? cols.r : r.inner)
        .size(AFPGA_REDUCE_COMBINE);
    combine.run();
  }
  mark_device_written(out_alloc);
  // On the device: scatter into the strided output.
  if (!direct) operand_view(iter, 0, out_sizes, out_strides).copy_(out.view(out_sizes));
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
