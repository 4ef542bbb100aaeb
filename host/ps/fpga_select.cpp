// fpga_select: the ops whose output size depends on the data, as on CUDA: a count pass, one host
// sync for the size, then a compaction pass.
//   masked_select(self, mask)   the elements of self (broadcast with mask) where mask is true
//   nonzero(self)               the coordinates of the elements of self that are not zero
// count: sum of the flat mask (reduce/sum), the one sync; destinations: cumsum of the mask
// (scan/cumsum, int64) times the mask, minus one -- the 0-based output row of every kept element,
// -1 for the others; compaction: index/scatter_rows, launched here, writes each kept row to its
// destination and skips the -1s (its `skip` register). The destinations are in [0, count) by
// construction, so the scatter needs none of index_put's range checks (and their syncs).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include "FPGAType.h"
#include "allocator.h"
#include "launch.h"

namespace aten_fpga {
namespace {

// The flat bool mask's kept elements: (count, destination row of each element or -1).
std::pair<int64_t, at::Tensor> destinations(const at::Tensor& flat_mask) {
  const int64_t count = at::sum(flat_mask).item<int64_t>();  // the one host sync
  at::Tensor dest = at::cumsum(flat_mask, 0);                 // int64, 1-based rows of the kept
  dest.mul_(flat_mask).sub_(1);
  return {count, dest};
}

// out[dest[k]] = rows[k] (rows: [n, inner] contiguous), the rows whose dest is -1 left out.
void compact(const at::Tensor& rows, const at::Tensor& dest, const at::Tensor& out, int64_t inner) {
  static const KernelRef scatter_rows{"scatter_rows"};
  KernelLaunch launch(scatter_rows, rows.scalar_type(), rows.device());
  launch.expect_args(3 + 1 + 5, "kernels/hls/index/ops.yaml and fpga_select.cpp disagree");
  const int64_t n = dest.numel();
  Allocation* a_in = allocation_of(rows);
  Allocation* a_idx = allocation_of(dest);
  Allocation* a_out = allocation_of(out);
  sync_to_device(a_in, byte_offset(rows), rows.numel() * rows.element_size());
  sync_to_device(a_idx, byte_offset(dest), n * dest.element_size());
  prepare_device_write(a_out, byte_offset(out), out.numel() * out.element_size());  // every row is written
  // No two kept rows share a destination: the units may split the walk anywhere (at whole rows).
  for (const CuRange& r : launch.split(n * inner, inner)) {
    launch.add_run()
        .buffer(a_in, byte_offset(rows))
        .buffer(a_idx, byte_offset(dest))
        .buffer(a_out, byte_offset(out))
        .scalar(int64_t(-1))
        .size(inner)
        .size(n)
        .size(out.size(0))
        .size(r.begin)
        .size(r.size());
  }
  launch.run();
  mark_device_written(a_out, byte_offset(out), out.numel() * out.element_size());
}

void require_fpga(const at::Tensor& t, const at::Tensor& other, const char* what) {
  if (!t.is_privateuseone() || t.device() != other.device()) throw KernelUnavailable(std::string(what) + " across devices");
}

}  // namespace

at::Tensor fpga_masked_select(const KernelRef& kernel, const at::Tensor& self, const at::Tensor& mask) {
  kernel_for(kernel, self.scalar_type(), self.device());  // KernelUnavailable before any side effect
  require_fpga(mask, self, "masked_select");
  if (mask.scalar_type() != at::kBool) throw KernelUnavailable("masked_select with a non-bool mask");  // the CPU's error
  c10::DeviceGuard guard(self.device());
  auto [s, m] = at::expand_outplace(self, mask);
  const at::Tensor values = s->contiguous().view(-1);  // on the device
  const at::Tensor flat_mask = m->contiguous().view(-1);
  auto [count, dest] = destinations(flat_mask);
  at::Tensor out = at::empty({count}, self.options());
  if (count > 0) compact(values, dest, out, 1);
  return out;
}

at::Tensor fpga_nonzero(const KernelRef& kernel, const at::Tensor& self) {
  kernel_for(kernel, self.scalar_type(), self.device());
  if (self.dim() == 0) throw KernelUnavailable("nonzero of a 0-dim tensor");
  c10::DeviceGuard guard(self.device());
  const at::Tensor flat_mask = at::ne(self, 0).view(-1);  // binary/ne: a fresh contiguous bool tensor
  auto [count, dest] = destinations(flat_mask);
  const int64_t ndim = self.dim();
  at::Tensor out = at::empty({count, ndim}, self.options().dtype(at::kLong));
  if (count == 0) return out;
  // Every element's coordinates, [numel, ndim]: dim d's arange broadcast over the others
  // (range/arange, then the copy kernels), joined by cat.
  std::vector<at::Tensor> coords;
  for (int64_t d = 0; d < ndim; ++d) {
    std::vector<int64_t> shape(ndim, 1);
    shape[d] = self.size(d);
    coords.push_back(at::arange(self.size(d), out.options()).view(shape).expand(self.sizes()).reshape({-1, 1}));
  }
  compact(at::cat(coords, 1), dest, out, ndim);
  return out;
}

// nonzero(out=): the functional's result, then ATen's resize of `out` and one device copy.
at::Tensor& fpga_nonzero_out(const KernelRef& kernel, const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero(): Expected out tensor to have scalar type Long but got ",
              out.scalar_type());
  const at::Tensor r = fpga_nonzero(kernel, self);
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

}  // namespace aten_fpga
