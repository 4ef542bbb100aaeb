// fpga_index: indexing and data movement ops as kernels.
//   index_select (and embedding, which ATen lowers to it)  index/gather_rows
//   embedding_dense_backward                                index/scatter_add_rows
//   gather                                                  index/gather
//   scatter (src, value), scatter_add, scatter reduce=      index/scatter, scatter_add, scatter_mul
//   index.Tensor (x[i], x[:, i, j] with integer indices)    index/gather_rows
//   _index_put_impl_ (index_put_, x[i] = v, x[i] += v)      index/scatter_rows, scatter_add_rows
//   masked_fill_ (Scalar and Tensor value)                  binary/masked_fill, through fpga_kernel
//   cat                                                     copy kernels, one per input (fpga_copy.cpp)
// The indexed kernels take both sides contiguous ([outer, rows, inner] and [outer, table_rows,
// inner]); the indices are checked on the device (amin/amax) before any launch.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <ATen/native/TensorAdvancedIndexingUtils.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "FPGAType.h"
#include "allocator.h"
#include "fpga_copy.h"
#include "launch.h"

namespace aten_fpga {
namespace {


// The smallest and largest of the (non-empty) indices: two reductions on the device; only their
// results cross to the host.
std::pair<int64_t, int64_t> index_span(const at::Tensor& idx) {
  return {at::amin(idx).item<int64_t>(), at::amax(idx).item<int64_t>()};
}

// The indices as a contiguous int64 fpga tensor, each checked to lie in [0, bound).
at::Tensor checked_indices(const at::Tensor& index, int64_t bound, const char* op) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
                    "(): Expected dtype int32/int64 for index but got ", index.scalar_type());
  TORCH_CHECK(index.dim() <= 1 || std::string(op) != "index_select", op, "(): Index is supposed to be a vector");
  if (!index.is_privateuseone()) throw KernelUnavailable(std::string(op) + " with CPU indices");
  at::Tensor idx = index.reshape(-1).to(at::kLong).contiguous();  // on the device
  if (idx.numel() > 0) {
    const auto [lo, hi] = index_span(idx);
    TORCH_CHECK_INDEX(lo >= 0 && hi < bound, op, "(): index out of range in self: indices span [", lo, ", ", hi,
                      "] but the indexed dim has size ", bound);
  }
  return idx;
}

// One index of gather/scatter per element, as a contiguous int64 fpga tensor in [0, bound): out of
// range is ATen's RuntimeError, naming the first offending bound.
at::Tensor element_indices(const at::Tensor& index, int64_t dim, int64_t bound) {
  at::Tensor idx = index.to(at::kLong).contiguous();  // on the device
  const auto [lo, hi] = index_span(idx);
  TORCH_CHECK(lo >= 0 && hi < bound, "index ", lo < 0 ? lo : hi, " is out of bounds for dimension ", dim,
              " with size ", bound);
  return idx;
}

// `t` narrowed to `sizes` in every dim but `keep` (-1: every dim).
at::Tensor narrowed(const at::Tensor& t, at::IntArrayRef sizes, int64_t keep) {
  at::Tensor r = t;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d != keep && r.size(d) != sizes[d]) r = r.narrow(d, 0, sizes[d]);
  }
  return r;
}

// One indexed launch: `table` is [outer, table_rows, inner], `walked` is [outer, rows, inner]
// (both contiguous); a gather reads the table, a scatter updates it.
void run_rows(KernelLaunch& launch, bool gather, const at::Tensor& in, const at::Tensor& idx, const at::Tensor& out,
              int64_t skip, int64_t inner, int64_t rows, int64_t table_rows, int64_t total) {
  launch.expect_args(3 + 1 + 5, "kernels/hls/index/ops.yaml and fpga_index.cpp disagree");
  Allocation* a_in = allocation_of(in);
  Allocation* a_idx = allocation_of(idx);
  Allocation* a_out = allocation_of(out);
  sync_to_device(a_in);
  sync_to_device(a_idx);
  if (gather) {
    prepare_device_write(a_out, byte_offset(out), out.numel() * out.element_size());
  } else {
    sync_to_device(a_out);  // accumulated into
  }
  // Gathers split across compute units anywhere; scatters at whole outer slabs, as two elements
  // of a slab may update one destination (in walk order, ATen's): no two units touch one element.
  for (const CuRange& r : launch.split(total, gather ? 1 : rows * inner)) {
    launch.add_run()
        .buffer(a_in, byte_offset(in))
        .buffer(a_idx, byte_offset(idx))
        .buffer(a_out, byte_offset(out))
        .scalar(skip)
        .size(inner)
        .size(rows)
        .size(table_rows)
        .size(r.begin)
        .size(r.size());
  }
  launch.run();
  mark_device_written(a_out);
}

at::Tensor& index_select_into(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              at::Tensor& out) {
  KernelLaunch launch(kernel, self.scalar_type(), self.device());
  if (self.dim() == 0) throw KernelUnavailable("index_select of a 0-dim tensor");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_select(): self and result must have the same scalar type");
  dim = at::maybe_wrap_dim(dim, self.dim());
  c10::DeviceGuard guard(self.device());
  const at::Tensor idx = checked_indices(index, self.size(dim), "index_select");
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[dim] = idx.numel();
  at::native::resize_output(out, sizes);
  if (out.numel() == 0) return out;
  const at::Tensor table = self.contiguous();  // on the device
  const bool direct = out.is_contiguous();
  at::Tensor dst = direct ? out : at::empty(sizes, self.options());
  const int64_t inner = c10::multiply_integers(self.sizes().slice(dim + 1));
  run_rows(launch, true, table, idx, dst, -1, inner, idx.numel(), self.size(dim), dst.numel());
  if (!direct) out.copy_(dst);
  return out;
}

}  // namespace

at::Tensor fpga_index_select(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_into(kernel, self, dim, index, out);
}

at::Tensor& fpga_index_select_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                  at::Tensor& out) {
  return index_select_into(kernel, self, dim, index, out);
}

// The gradient of embedding: row idx[k] of the [num_weights, dim] result accumulates grad row k,
// in index order (as ATen's CPU kernel); rows of padding_idx get nothing.
at::Tensor fpga_embedding_dense_backward(const KernelRef& kernel, const at::Tensor& grad_output,
                                         const at::Tensor& indices, int64_t num_weights, int64_t padding_idx,
                                         bool scale_grad_by_freq) {
  if (scale_grad_by_freq) throw KernelUnavailable("embedding_dense_backward with scale_grad_by_freq");
  KernelLaunch launch(kernel, grad_output.scalar_type(), grad_output.device());
  c10::DeviceGuard guard(grad_output.device());
  const at::Tensor idx = checked_indices(indices, num_weights, "embedding_backward");
  const int64_t width = grad_output.size(-1);
  at::Tensor grad_weight = at::zeros({num_weights, width}, grad_output.options());
  if (idx.numel() == 0 || width == 0) return grad_weight;
  const at::Tensor grad = grad_output.reshape({idx.numel(), width}).contiguous();
  run_rows(launch, false, grad, idx, grad_weight, padding_idx, width, idx.numel(), num_weights, grad.numel());
  return grad_weight;
}

// gather along dim: out[..., k, ...] = self[..., index[..., k, ...], ...]; out has index's shape.
at::Tensor& fpga_gather_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            bool /*sparse_grad: the backward's layout*/, at::Tensor& out) {
  KernelLaunch launch(kernel, self.scalar_type(), self.device());
  if (self.dim() == 0 || index.dim() != self.dim()) throw KernelUnavailable("gather with a 0-dim operand");
  if (!index.is_privateuseone()) throw KernelUnavailable("gather with CPU indices");
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::scatter_gather_dtype_check("gather", self, index);
  at::native::gather_shape_check(self, dim, index);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "gather(): Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, index.sizes());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_partial_overlap(out, index);
  if (index.numel() == 0) return out;
  c10::DeviceGuard guard(self.device());
  const at::Tensor idx = element_indices(index, dim, self.size(dim)).reshape(-1);
  const at::Tensor table = narrowed(self, index.sizes(), dim).contiguous();  // on the device
  const bool direct = out.is_contiguous();
  at::Tensor dst = direct ? out : at::empty(index.sizes(), self.options());
  const int64_t inner = c10::multiply_integers(index.sizes().slice(dim + 1));
  run_rows(launch, true, table, idx, dst, -1, inner, index.size(dim), self.size(dim), index.numel());
  if (!direct) out.copy_(dst);
  return out;
}

namespace {

// out = self, then each element of src (narrowed to index's shape) goes to out[..., index, ...]
// along dim, combined by `kernel` (scatter: set; scatter_add: +=; scatter_mul: *=). ATen's CPU
// kernel combines float16 in a float copy of self and rounds once at the end: so do we, through
// the float32 kernel.
at::Tensor& scatter_into(const KernelRef& kernel, const char* op, const at::Tensor& self, int64_t dim,
                         const at::Tensor& index, const at::Tensor& src, at::Tensor& out) {
  static const KernelRef set{"scatter"};
  const bool widen = self.scalar_type() == at::kHalf && std::string(kernel.name) != set.name;
  KernelLaunch launch(kernel, widen ? at::kFloat : self.scalar_type(), self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::scatter_gather_dtype_check(op, self, index, src);
  at::native::scatter_shape_check(self, dim, index, src);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), op, "(): Expected out tensor to have dtype ", self.scalar_type(),
              ", but got ", out.scalar_type(), " instead");
  if (!src.is_privateuseone() || src.device() != self.device()) throw KernelUnavailable("scatter with a CPU src");
  if (!index.is_privateuseone()) throw KernelUnavailable("scatter with CPU indices");
  if (index.numel() > 0 && (self.dim() == 0 || index.dim() != self.dim() || src.dim() != self.dim())) {
    throw KernelUnavailable("scatter with a 0-dim operand");
  }
  c10::DeviceGuard guard(self.device());
  at::Tensor idx;
  if (index.numel() > 0) idx = element_indices(index, dim, self.size(dim)).reshape(-1);
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);  // on the device
  }
  if (index.numel() == 0) return out;
  const at::ScalarType compute = widen ? at::kFloat : self.scalar_type();
  const at::Tensor values = narrowed(src, index.sizes(), -1).to(compute).contiguous();  // on the device
  // The part of out the walk touches: index's extent in every dim but dim.
  const at::Tensor region = narrowed(out, index.sizes(), dim);
  const bool direct = region.is_contiguous() && !widen;
  const at::Tensor table = direct ? region : region.to(compute).contiguous();
  const int64_t inner = c10::multiply_integers(index.sizes().slice(dim + 1));
  run_rows(launch, false, values, idx, table, -1, inner, index.size(dim), out.size(dim), index.numel());
  if (!direct) region.copy_(table);
  return out;
}

// scatter's value forms: src is `value` in self's dtype, of index's shape, made on the device (a
// one-element tensor broadcast by the copy kernel).
at::Tensor value_like(const at::Tensor& index, const at::Scalar& value, const at::Tensor& self) {
  const at::Tensor one = at::scalar_tensor(value, self.options().device(at::kCPU)).to(self.device());
  return one.expand(index.sizes()).contiguous();
}

// scatter's reduce= argument: "add" or "multiply", as ATen names them.
const KernelRef& reduce_kernel(const KernelRef& add, c10::string_view reduce) {
  static const KernelRef mul{"scatter_mul"};
  TORCH_CHECK(reduce == "add" || reduce == "multiply", "reduce argument must be either add or multiply.");
  return reduce == "add" ? add : mul;
}

}  // namespace

at::Tensor& fpga_scatter_src_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                 const at::Tensor& src, at::Tensor& out) {
  return scatter_into(kernel, "scatter", self, dim, index, src, out);
}

at::Tensor& fpga_scatter_value_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim,
                                   const at::Tensor& index, const at::Scalar& value, at::Tensor& out) {
  return scatter_into(kernel, "scatter", self, dim, index, value_like(index, value, self), out);
}

at::Tensor& fpga_scatter_add_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                 const at::Tensor& src, at::Tensor& out) {
  return scatter_into(kernel, "scatter_add", self, dim, index, src, out);
}

at::Tensor& fpga_scatter_reduce_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim,
                                    const at::Tensor& index, const at::Tensor& src, c10::string_view reduce,
                                    at::Tensor& out) {
  return scatter_into(reduce_kernel(kernel, reduce), "scatter", self, dim, index, src, out);
}

at::Tensor& fpga_scatter_value_reduce_out(const KernelRef& kernel, const at::Tensor& self, int64_t dim,
                                          const at::Tensor& index, const at::Scalar& value, c10::string_view reduce,
                                          at::Tensor& out) {
  return scatter_into(reduce_kernel(kernel, reduce), "scatter", self, dim, index, value_like(index, value, self), out);
}

namespace {

// Advanced indexing by integer tensors (x[i, j], x[:, i]) as rows: the index tensors, adjacent,
// pick rows of self viewed as [outer, table_rows, inner] (table_rows: the indexed dims' extent
// together); their broadcast shape B makes the result [outer, |B|, inner], of shape `shape`.
struct PickedRows {
  std::vector<at::Tensor> picks;  // the index tensors, int64 on the device, broadcast together
  int64_t first = 0;              // the dim of self the first one indexes
  at::Tensor row;                 // [|B|] int64 on the device: the table row of each element of B
  std::vector<int64_t> shape;     // self's sizes with the indexed dims replaced by B
  int64_t outer = 0, rows = 0, table_rows = 0, inner = 0;
};

// The index tensors the row kernels take: integer tensors on adjacent dims. Any other indexing
// (boolean masks, other dtypes, non-adjacent index tensors, none) throws KernelUnavailable, before
// any check of ours, so that the fallback raises ATen's errors in ATen's order.
PickedRows index_tensors(const c10::List<std::optional<at::Tensor>>& indices) {
  PickedRows r;
  int64_t first = -1;
  for (size_t d = 0; d < indices.size(); ++d) {
    const std::optional<at::Tensor> t = indices[d];
    if (!t.has_value() || !t->defined()) continue;
    if (t->scalar_type() != at::kLong && t->scalar_type() != at::kInt) throw KernelUnavailable("indexing with a mask");
    if (first < 0) first = static_cast<int64_t>(d);
    if (static_cast<int64_t>(d) != first + static_cast<int64_t>(r.picks.size())) {
      throw KernelUnavailable("indexing with non-adjacent index tensors");
    }
    r.picks.push_back(*t);
  }
  if (r.picks.empty()) throw KernelUnavailable("indexing without index tensors");
  r.first = first;
  return r;
}

// ATen's checks of the indices (make_info, TensorAdvancedIndexingUtils.h), in its order and with
// its IndexErrors, and the shape they pick.
void pick_shape(const at::Tensor& self, size_t given, PickedRows& r) {
  TORCH_CHECK_INDEX(static_cast<int64_t>(given) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", given, ")");
  try {
    r.picks = at::expand_outplace(r.picks);
  } catch (const std::exception&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      at::native::shapes_as_str(r.picks));
  }
  const int64_t m = static_cast<int64_t>(r.picks.size());
  const at::IntArrayRef picked = r.picks[0].sizes();
  const at::IntArrayRef sizes = self.sizes();
  r.rows = c10::multiply_integers(picked);
  r.outer = c10::multiply_integers(sizes.slice(0, r.first));
  r.inner = c10::multiply_integers(sizes.slice(r.first + m));
  r.table_rows = c10::multiply_integers(sizes.slice(r.first, m));
  TORCH_CHECK_INDEX(r.table_rows != 0 || r.rows == 0, "index is out of bounds for dimension with size 0");
  r.shape.assign(sizes.begin(), sizes.begin() + r.first);
  r.shape.insert(r.shape.end(), picked.begin(), picked.end());
  r.shape.insert(r.shape.end(), sizes.begin() + r.first + m, sizes.end());
}

// The row of the indexed dims together, by Horner's rule on the device; IndexError, as ATen's kernel
// raises it, for an index out of [-size, size) (negative ones count from the end).
void pick_rows(const at::Tensor& self, PickedRows& r) {
  if (r.rows == 0) return;
  for (size_t j = 0; j < r.picks.size(); ++j) {
    const int64_t size = self.size(r.first + static_cast<int64_t>(j));
    at::Tensor t = r.picks[j].to(self.device(), at::kLong);  // CPU index lists: a small copy in
    const auto [lo, hi] = index_span(t);
    TORCH_CHECK_INDEX(lo >= -size && hi < size, "index ", lo < -size ? lo : hi, " is out of bounds for dimension ",
                      r.first + static_cast<int64_t>(j), " with size ", size);
    if (lo < 0) t = t.add(t.lt(0).to(at::kLong).mul(size));
    r.row = j == 0 ? t : r.row.mul(size).add(t);
  }
  r.row = r.row.reshape(-1).contiguous();
}

}  // namespace

// x[i, j] (index.Tensor): out[o, k, i] = self[o, row[k], i], the row gather of index_select.
at::Tensor& fpga_index_tensor_out(const KernelRef& kernel, const at::Tensor& self,
                                  const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  KernelLaunch launch(kernel, self.scalar_type(), self.device());
  PickedRows r = index_tensors(indices);
  c10::DeviceGuard guard(self.device());
  pick_shape(self, indices.size(), r);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index(): Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  pick_rows(self, r);
  at::native::resize_output(out, r.shape);
  if (out.numel() == 0) return out;
  const at::Tensor table = self.contiguous();  // on the device
  const bool direct = out.is_contiguous();
  at::Tensor dst = direct ? out : at::empty(r.shape, self.options());
  run_rows(launch, true, table, r.row, dst, -1, r.inner, r.rows, r.table_rows, dst.numel());
  if (!direct) out.copy_(dst);
  return out;
}

// index_put_ (x[i, j] = v, x[:, i] += v): values broadcast to the picked shape, written into (or,
// with accumulate, added to) the picked rows of self -- in index order, as ATen's CPU kernel, so
// repeated indices accumulate in the CPU's order and, without accumulate, the last one wins.
// Boolean masks, non-adjacent index tensors and expanded selves take the counted fallback; the
// checks are ATen's (_index_put_impl_), in its order.
at::Tensor& fpga_index_put_impl_(const KernelRef& kernel, at::Tensor& self,
                                 const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
                                 bool accumulate, bool /*unsafe*/) {
  static const KernelRef add_rows{"scatter_add_rows"};
  KernelLaunch launch(accumulate ? add_rows : kernel, self.scalar_type(), self.device());
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) throw KernelUnavailable("index_put_ on an expanded tensor");
  PickedRows r = index_tensors(indices);
  c10::DeviceGuard guard(self.device());
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  at::assert_no_overlap(self, values);
  for (const at::Tensor& t : r.picks) at::assert_no_overlap(self, t);
  pick_shape(self, indices.size(), r);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), r.shape), "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", at::IntArrayRef(r.shape));
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes match, "
              "got ", self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  pick_rows(self, r);
  if (r.outer * r.rows * r.inner == 0) return self;
  const at::Tensor vals = values.to(self.device()).expand(r.shape).contiguous();  // on the device
  const bool direct = self.is_contiguous();
  at::Tensor table = direct ? self : self.contiguous();
  run_rows(launch, false, vals, r.row, table, -1, r.inner, r.rows, r.table_rows, r.outer * r.rows * r.inner);
  if (!direct) self.copy_(table);
  return self;
}

// masked_fill_: self = mask ? value : self, mask broadcast to self, through the pointwise driver.
at::Tensor& fpga_masked_fill_(const KernelRef& kernel, at::Tensor& self, const at::Tensor& mask,
                              const at::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  if (!mask.is_privateuseone()) throw KernelUnavailable("masked_fill_ with a CPU mask");
  // The kernel is named by self's dtype (input 0 of the iterator below), the mask being bool.
  static const KernelRef by_self{kernel.name, nullptr, 1};
  kernel_for(by_self, self.scalar_type(), self.device());
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN("Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[mask] = scalar");
  }
  at::assert_no_partial_overlap(self, mask);
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(self)
                  .add_const_input(self)
                  .add_const_input(mask)
                  .build();
  const std::optional<c10::Scalar> scalars[] = {value};
  fpga_kernel(iter, by_self, scalars);
  return self;
}

at::Tensor& fpga_masked_fill_tensor_(const KernelRef& kernel, at::Tensor& self, const at::Tensor& mask,
                                     const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return fpga_masked_fill_(kernel, self, mask, value.item());
}

// cat: each input copied into its slice of the result by the strided copy kernel (the slice of
// a contiguous result is rows at a pitch: one launch per input).
at::Tensor& fpga_cat_out(const KernelRef& kernel, const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  const auto materialized = tensors.materialize();
  TORCH_CHECK(!materialized.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // ATen skips legacy empty 1-D tensors of shape [0].
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : materialized) {
    if (!(t.dim() == 1 && t.size(0) == 0)) parts.push_back(t);
  }
  const at::ScalarType dtype = at::native::result_type(tensors);
  kernel_for(kernel, dtype, out.device());
  for (const at::Tensor& t : parts) {
    if (!t.is_privateuseone() || t.device() != out.device()) throw KernelUnavailable("cat across devices");
  }
  TORCH_CHECK(out.scalar_type() == dtype || at::canCast(dtype, out.scalar_type()), "torch.cat(): input types can't be cast to the desired output type ",
              out.scalar_type());
  if (parts.empty()) {
    at::native::resize_output(out, {0});
    return out;
  }
  const at::Tensor& first = parts[0];
  dim = at::legacy_cat_wrap_dim(dim, materialized);
  std::vector<int64_t> sizes = first.sizes().vec();
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const at::Tensor& t = parts[i];
    TORCH_CHECK(t.dim() == first.dim(), "torch.cat(): Tensors must have same number of dimensions: got ", first.dim(),
                " and ", t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      TORCH_CHECK(d == dim || t.size(d) == first.size(d), "Sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", first.size(d), " but got size ", t.size(d), " for tensor number ", i,
                  " in the list.");
    }
    total += t.size(dim);
  }
  sizes[dim] = total;
  for (const at::Tensor& t : parts) at::assert_no_overlap(out, t);
  at::native::resize_output(out, sizes);
  c10::DeviceGuard guard(out.device());
  int64_t offset = 0;
  for (const at::Tensor& t : parts) {
    if (t.size(dim) > 0) device_copy(out.narrow(dim, offset, t.size(dim)), t);
    offset += t.size(dim);
  }
  return out;
}

// native_dropout: a Bernoulli(1 - p) bool mask from the device generator, and input * mask / (1 - p).
std::tuple<at::Tensor, at::Tensor> fpga_native_dropout(const KernelRef& kernel, const at::Tensor& input, double p,
                                                       std::optional<bool> train) {
  kernel_for(kernel, at::kBool, input.device());  // KernelUnavailable before any side effect
  if (input.numel() == 0 || (train.has_value() && !*train) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double p1m = 1. - p;
  const double scale = p1m == 0 ? 0. : 1. / p1m;
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  mask.bernoulli_(p1m);  // the rng kernel, through the table
  at::Tensor output = input.mul(mask).mul_(scale);
  return {output, mask};
}

at::Tensor fpga_native_dropout_backward(const KernelRef& kernel, const at::Tensor& grad_output, const at::Tensor& mask,
                                        double scale) {
  kernel_for(kernel, grad_output.scalar_type(), grad_output.device());  // KernelUnavailable first
  return grad_output.mul(mask).mul_(scale);
}

namespace {

// x[i] (index.Tensor) straight to index.Tensor_out, without the structured meta its composite
// kernel runs first: that meta expands masks on the device (warning for uint8 ones), and the out=
// overload, which leaves masks to the CPU fallback, would expand them (and warn) again there.
at::Tensor index_tensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  at::Tensor out = at::empty({0}, self.options());
  return at::index_outf(self, indices, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("index.Tensor", TORCH_FN(index_tensor)); }

}  // namespace
}  // namespace aten_fpga
