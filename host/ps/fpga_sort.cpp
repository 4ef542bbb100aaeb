// fpga_sort: sort (sort.values_stable, which sort, sort.stable, argsort and msort reach) and topk
// (topk.values) from the merge passes of kernels/hls/sort.
//   The sorted dim is made the last and contiguous on the device ([rows, len], a copy kernel when
//   it is not already), then one launch per run width 1, 2, 4, ... < len merges adjacent sorted
//   runs of every row, ping-ponging between two device buffers of keys and int64 indices:
//   ceil(log2(len)) passes (one when len is 1, which writes the index 0).
//   topk is the sort in the requested direction, its first k along dim (largest: descending).
//   float16 and int32 keys are sorted as float32 and int64 (the two members), exactly.
// The merge is stable in ATen's order (NaN largest, -0.0 == 0.0, equal keys in input order): what
// ATen's CPU gives for stable=True bit for bit. ATen's CPU leaves the order of equal keys
// unspecified for stable=False (std::sort) and for topk (std::partial_sort / nth_element); this
// gives them the stable order too: the same values, and indices that differ from the CPU's only
// among equal keys. topk(sorted=False) returns its k sorted, a valid order.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include "FPGAType.h"
#include "allocator.h"
#include "launch.h"

namespace aten_fpga {
namespace {

// The kernel's dtype for self's: the members are float32 and int64; float16 and int32 sort widened
// (exact both ways, the order unchanged).
at::ScalarType widened(at::ScalarType t) {
  return t == at::kHalf ? at::kFloat : t == at::kInt ? at::kLong : t;
}

// self sorted along dim: keys (widened) and int64 indices shaped as self.movedim(dim, -1), contiguous.
std::pair<at::Tensor, at::Tensor> sort_last(const KernelRef& kernel, const at::Tensor& self, int64_t dim,
                                            bool descending) {
  const at::Tensor moved = self.dim() == 0 ? self.reshape({1}) : self.movedim(dim, -1);
  const at::Tensor in = moved.to(widened(self.scalar_type())).contiguous();  // on the device
  const int64_t len = in.size(-1), rows = in.numel() / len;
  const at::Tensor keys[2] = {at::empty_like(in), at::empty_like(in)};
  const at::Tensor index[2] = {at::empty(in.sizes(), in.options().dtype(at::kLong)),
                               at::empty(in.sizes(), in.options().dtype(at::kLong))};
  const size_t bytes = in.numel() * in.element_size(), ibytes = in.numel() * sizeof(int64_t);
  at::Tensor src_keys = in, src_index = index[0];  // the first pass reads no indices (src_index unread)
  int dst = 0;
  int64_t width = 1;
  do {
    KernelLaunch launch(kernel, in.scalar_type(), in.device());
    launch.expect_args(4 + 1 + 4, "kernels/hls/sort/ops.yaml and fpga_sort.cpp disagree");
    Allocation* a_keys = allocation_of(src_keys);
    Allocation* a_index = allocation_of(width == 1 ? index[dst] : src_index);
    const size_t index_offset = byte_offset(width == 1 ? index[dst] : src_index);
    Allocation* o_keys = allocation_of(keys[dst]);
    Allocation* o_index = allocation_of(index[dst]);
    sync_to_device(a_keys, byte_offset(src_keys), bytes);
    prepare_device_write(o_keys, byte_offset(keys[dst]), bytes);
    prepare_device_write(o_index, byte_offset(index[dst]), ibytes);
    if (width > 1) sync_to_device(a_index, index_offset, ibytes);
    for (const CuRange& r : launch.split(rows, 1, len)) {
      launch.add_run()
          .buffer(a_keys, byte_offset(src_keys), bytes)
          .buffer(a_index, index_offset, ibytes)
          .buffer(o_keys, byte_offset(keys[dst]), bytes)
          .buffer(o_index, byte_offset(index[dst]), ibytes)
          .scalar(descending)
          .size(len)
          .size(width)
          .size(r.begin)
          .size(r.size());
    }
    launch.run();
    mark_device_written(o_keys, byte_offset(keys[dst]), bytes);
    mark_device_written(o_index, byte_offset(index[dst]), ibytes);
    src_keys = keys[dst], src_index = index[dst];
    dst ^= 1;
    width *= 2;
  } while (width < len);
  return {src_keys, src_index};
}

// values, indices = the first k of self sorted along dim (out: resized, written on the device).
void sorted_out(const KernelRef& kernel, const char* op, const at::Tensor& self, int64_t dim, bool descending,
                int64_t k, at::Tensor& values, at::Tensor& indices) {
  if (!self.is_privateuseone() || values.device() != self.device() || indices.device() != self.device())
    throw KernelUnavailable(std::string(op) + " across devices");
  kernel_for(kernel, widened(self.scalar_type()), self.device());  // KernelUnavailable before any side effect
  TORCH_CHECK(!self.is_complex(), op, "(): complex tensors cannot be sorted");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), op, "(): expected values to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), "; pass values of self's dtype");
  TORCH_CHECK(indices.scalar_type() == at::kLong, op, "(): expected indices to have dtype Long, but got ",
              indices.scalar_type(), "; pass int64 indices");
  c10::DeviceGuard guard(self.device());
  std::vector<int64_t> sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[dim] = k;
  at::native::resize_output(values, sizes);
  at::native::resize_output(indices, sizes);
  if (values.numel() == 0) return;
  auto [keys, index] = sort_last(kernel, self, dim, descending);
  if (self.dim() == 0) {
    values.copy_(keys.reshape({}));  // on the device
    indices.copy_(index.reshape({}));
    return;
  }
  values.movedim(dim, -1).copy_(keys.narrow(-1, 0, k));  // on the device, narrowed back to self's dtype
  indices.movedim(dim, -1).copy_(index.narrow(-1, 0, k));
}

}  // namespace

std::tuple<at::Tensor&, at::Tensor&> fpga_sort_out(const KernelRef& kernel, const at::Tensor& self,
                                                   std::optional<bool> stable, int64_t dim, bool descending,
                                                   at::Tensor& values, at::Tensor& indices) {
  (void)stable;  // always stable: see the file's comment
  dim = at::maybe_wrap_dim(dim, self.dim());
  sorted_out(kernel, "sort", self, dim, descending, self.dim() > 0 ? self.size(dim) : 1, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> fpga_topk_out(const KernelRef& kernel, const at::Tensor& self, int64_t k,
                                                   int64_t dim, bool largest, bool sorted, at::Tensor& values,
                                                   at::Tensor& indices) {
  (void)sorted;  // the k come sorted either way
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(k >= 0 && k <= (self.dim() > 0 ? self.size(dim) : 1), "selected index k out of range");
  sorted_out(kernel, "topk", self, dim, largest, k, values, indices);
  return {values, indices};
}

}  // namespace aten_fpga
