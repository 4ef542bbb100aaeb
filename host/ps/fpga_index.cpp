// fpga_index: indexing and data movement ops as kernels.
//   index_select (and embedding, which ATen lowers to it)  index/gather_rows
//   embedding_dense_backward                                index/scatter_add_rows
//   masked_fill_ (Scalar and Tensor value)                  binary/masked_fill, through fpga_kernel
//   cat                                                     copy kernels, one per input (fpga_copy.cpp)
// The row-indexed kernels take both sides contiguous ([outer, rows, inner] and [outer,
// table_rows, inner]); the indices are checked on the device (amin/amax) before any launch.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>

#include "FPGAType.h"
#include "allocator.h"
#include "fpga_copy.h"
#include "launch.h"

namespace aten_fpga {
namespace {


// The indices as a contiguous int64 fpga tensor, each checked to lie in [0, bound).
at::Tensor checked_indices(const at::Tensor& index, int64_t bound, const char* op) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
                    "(): Expected dtype int32/int64 for index but got ", index.scalar_type());
  TORCH_CHECK(index.dim() <= 1 || std::string(op) != "index_select", op, "(): Index is supposed to be a vector");
  if (!index.is_privateuseone()) throw KernelUnavailable(std::string(op) + " with CPU indices");
  at::Tensor idx = index.reshape(-1).to(at::kLong).contiguous();  // on the device
  if (idx.numel() > 0) {
    // Two reductions on the device; only their results cross to the host.
    const int64_t lo = at::amin(idx).item<int64_t>(), hi = at::amax(idx).item<int64_t>();
    TORCH_CHECK_INDEX(lo >= 0 && hi < bound, op, "(): index out of range in self: indices span [", lo, ", ", hi,
                      "] but the indexed dim has size ", bound);
  }
  return idx;
}

// One row-indexed launch: `table` is [outer, table_rows, inner], `walked` is [outer, rows, inner]
// (both contiguous); gather_rows reads the table, scatter_add_rows adds into it.
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
  // Gathers split across compute units; a scatter runs on one, as two rows may add into one.
  c10::SmallVector<CuRange, 8> ranges = launch.split(total);
  if (!gather && !ranges.empty()) ranges = {CuRange{0, total}};
  for (const CuRange& r : ranges) {
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

}  // namespace aten_fpga
