// The _foreach_* ops the optimizers use, each one launch of a multi-tensor kernel
// (kernels/hls/multi, like CUDA's multi_tensor_apply) over its tensor lists, where ATen's own
// (composite) foreach kernels would run one kernel per tensor and op.
//
// The kernel's first port is a table, one int64 row per chunk of a tensor:
//   [elements, the row's scalar (a double's bits), then per data port the chunk's offset in port words]
// Each data port is given the buffer of its list's first tensor; the offsets, relative to it, reach
// the list's other tensors wherever they are in device memory. Tensors are cut into chunks of
// kMinElementsPerCU elements so that the compute units share the rows of one launch.
#include <ATen/ATen.h>

#include <cstring>
#include <initializer_list>
#include <vector>

#include "FPGAType.h"
#include "allocator.h"
#include "device.h"
#include "launch.h"

namespace aten_fpga {
namespace {

constexpr int64_t kChunk = kMinElementsPerCU;  // elements per row (a multiple of every port word)

void check_lists(at::TensorList self, std::initializer_list<at::TensorList> others) {
  TORCH_CHECK(!self.empty(), "Tensor list must have at least one tensor.");
  for (at::TensorList l : others) {
    TORCH_CHECK(l.size() == self.size(), "Tensor lists must have the same number of tensors, got ", self.size(),
                " and ", l.size());
  }
}

// out[t] = op(ins[0][t], ..., s[t]) for every tensor t, in one launch; `s` has one value per tensor,
// or one for all. Throws KernelUnavailable (before any side effect) for lists one launch cannot
// serve: tensors of several dtypes or devices, of different shapes (ATen's foreach broadcasts
// per tensor), not dense, laid out differently from their output, or, at XCL_OPT 4, not starting
// a 512-bit word or ending one inside another tensor's word.
void multi_apply(const KernelRef& kernel, std::initializer_list<at::TensorList> ins, at::TensorList outs,
                 c10::ArrayRef<double> s) {
  const size_t n = outs.size();
  const at::ScalarType dtype = outs[0].scalar_type();
  const c10::Device where = outs[0].device();
  std::vector<at::TensorList> ports(ins);
  ports.push_back(outs);
  for (at::TensorList l : ports) {
    for (size_t t = 0; t < n; ++t) {
      const at::Tensor& x = l[t];
      if (x.device() != where || x.scalar_type() != dtype || x.sizes() != outs[t].sizes() ||
          x.strides() != outs[t].strides() || !x.is_non_overlapping_and_dense()) {
        throw KernelUnavailable(std::string(kernel.name) + " over lists of mixed dtypes, devices or layouts");
      }
    }
  }

  KernelLaunch launch(kernel, dtype, where);
  launch.expect_args(ports.size() + 2, "a multi-tensor kernel takes the table, its lists and rows: fix its ops.yaml");
  Device& dev = launch.device();
  const int64_t esize = c10::elementSize(dtype);
  const int64_t word = std::max<int64_t>(launch.info().args[1].bytes, esize);
  const int64_t lanes = word / esize;

  // The table, and each port's base: its first tensor's buffer.
  const size_t width = ports.size() + 2;
  std::vector<Allocation*> base(ports.size(), nullptr);
  std::vector<uintptr_t> base_addr(ports.size(), 0);
  std::vector<int64_t> table;
  for (size_t t = 0; t < n; ++t) {
    const int64_t numel = outs[t].numel();
    if (numel == 0) continue;
    std::vector<int64_t> start(ports.size());  // the tensor's first element, in port words from the base
    for (size_t k = 0; k < ports.size(); ++k) {
      const at::Tensor& x = ports[k][t];
      Allocation* a = allocation_of(x);
      void* mem = dev.device_address(*a->buffer);
      if (mem == nullptr) throw KernelUnavailable(std::string(kernel.name) + " on a device whose memory the host cannot address");
      const size_t begin = x.storage_offset() * esize, end = begin + numel * esize;
      const uintptr_t addr = reinterpret_cast<uintptr_t>(mem) + begin;
      const bool own_last_word = end % word == 0 || end >= a->requested || k + 1 < ports.size();
      if (addr % word != 0 || !own_last_word) {
        throw KernelUnavailable(std::string(kernel.name) + " over tensors that do not start (or end) a port word");
      }
      if (base[k] == nullptr) {
        base[k] = a;
        base_addr[k] = reinterpret_cast<uintptr_t>(mem);
      }
      start[k] = static_cast<int64_t>(addr - base_addr[k]) / word;  // signed: the base may lie above
    }
    const double value = s[s.size() == 1 ? 0 : t];
    int64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    for (int64_t c = 0; c < numel; c += kChunk) {
      table.push_back(std::min(kChunk, numel - c));
      table.push_back(bits);
      for (size_t k = 0; k < ports.size(); ++k) table.push_back(start[k] + c / lanes);
    }
  }
  const int64_t rows = static_cast<int64_t>(table.size() / width);
  if (rows == 0) return;

  // Inputs current on the device, outputs about to be written there, the table uploaded.
  for (size_t k = 0; k + 1 < ports.size(); ++k) {
    for (const at::Tensor& x : ports[k]) sync_to_device(allocation_of(x));
  }
  for (const at::Tensor& x : outs) {
    prepare_device_write(allocation_of(x), x.storage_offset() * esize, x.numel() * esize);
  }
  at::Tensor rows_t = at::empty({static_cast<int64_t>(table.size())}, at::TensorOptions().dtype(at::kLong).device(where));
  Allocation* tab = allocation_of(rows_t);
  std::memcpy(rows_t.data_ptr(), table.data(), table.size() * sizeof(int64_t));
  mark_host_written(tab);
  sync_to_device(tab);

  for (const CuRange& r : launch.split(rows, 1, kChunk)) {
    RunArgs args = launch.add_run();
    args.buffer(tab, r.begin * width * sizeof(int64_t));
    for (Allocation* b : base) args.buffer(b, 0);
    args.size(r.size());
  }
  launch.run();
  for (const at::Tensor& x : outs) mark_device_written(allocation_of(x));
}

std::vector<at::Tensor> like(at::TensorList self) {
  std::vector<at::Tensor> out;
  out.reserve(self.size());
  for (const at::Tensor& t : self) out.push_back(at::empty_like(t));
  return out;
}

double value(const at::Scalar& s) { return s.to<double>(); }

std::vector<double> values(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  TORCH_CHECK(scalars.size() == self.size(), "Tensor list must have same number of elements as scalar list.");
  std::vector<double> v;
  v.reserve(scalars.size());
  for (const at::Scalar& s : scalars) v.push_back(value(s));
  return v;
}

// In place over `self` with inputs `self, others...`, and the functional form into new tensors.
void inplace(const KernelRef& k, at::TensorList self, std::initializer_list<at::TensorList> others,
             c10::ArrayRef<double> s) {
  check_lists(self, others);
  switch (others.size()) {
    case 0: return multi_apply(k, {self}, self, s);
    case 1: return multi_apply(k, {self, others.begin()[0]}, self, s);
    default: return multi_apply(k, {self, others.begin()[0], others.begin()[1]}, self, s);
  }
}

std::vector<at::Tensor> functional(const KernelRef& k, at::TensorList self, std::initializer_list<at::TensorList> others,
                                   c10::ArrayRef<double> s) {
  check_lists(self, others);
  std::vector<at::Tensor> out = like(self);
  if (others.size() == 0) {
    multi_apply(k, {self}, out, s);
  } else {
    multi_apply(k, {self, others.begin()[0]}, out, s);
  }
  return out;
}

}  // namespace

// --- the table's host: entries --------------------------------------------------------------------

void fpga_foreach_add_scalar_(const KernelRef& k, at::TensorList self, const at::Scalar& scalar) {
  inplace(k, self, {}, value(scalar));
}
std::vector<at::Tensor> fpga_foreach_add_scalar(const KernelRef& k, at::TensorList self, const at::Scalar& scalar) {
  return functional(k, self, {}, value(scalar));
}
void fpga_foreach_mul_scalar_(const KernelRef& k, at::TensorList self, const at::Scalar& scalar) {
  inplace(k, self, {}, value(scalar));
}
std::vector<at::Tensor> fpga_foreach_mul_scalar(const KernelRef& k, at::TensorList self, const at::Scalar& scalar) {
  return functional(k, self, {}, value(scalar));
}
void fpga_foreach_div_scalar_(const KernelRef& k, at::TensorList self, const at::Scalar& scalar) {
  inplace(k, self, {}, value(scalar));
}
void fpga_foreach_div_scalarlist_(const KernelRef& k, at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  inplace(k, self, {}, values(self, scalars));
}
std::vector<at::Tensor> fpga_foreach_div_scalarlist(const KernelRef& k, at::TensorList self,
                                                    at::ArrayRef<at::Scalar> scalars) {
  return functional(k, self, {}, values(self, scalars));
}
void fpga_foreach_sqrt_(const KernelRef& k, at::TensorList self) { inplace(k, self, {}, 0.0); }
std::vector<at::Tensor> fpga_foreach_sqrt(const KernelRef& k, at::TensorList self) {
  return functional(k, self, {}, 0.0);
}
void fpga_foreach_neg_(const KernelRef& k, at::TensorList self) { inplace(k, self, {}, 0.0); }
std::vector<at::Tensor> fpga_foreach_neg(const KernelRef& k, at::TensorList self) {
  return functional(k, self, {}, 0.0);
}
void fpga_foreach_add_list_(const KernelRef& k, at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  inplace(k, self, {other}, value(alpha));
}
std::vector<at::Tensor> fpga_foreach_add_list(const KernelRef& k, at::TensorList self, at::TensorList other,
                                              const at::Scalar& alpha) {
  return functional(k, self, {other}, value(alpha));
}
void fpga_foreach_maximum_list_(const KernelRef& k, at::TensorList self, at::TensorList other) {
  inplace(k, self, {other}, 0.0);
}
void fpga_foreach_lerp_scalar_(const KernelRef& k, at::TensorList self, at::TensorList end, const at::Scalar& weight) {
  inplace(k, self, {end}, value(weight));
}
void fpga_foreach_addcmul_scalar_(const KernelRef& k, at::TensorList self, at::TensorList t1, at::TensorList t2,
                                  const at::Scalar& v) {
  inplace(k, self, {t1, t2}, value(v));
}
void fpga_foreach_addcdiv_scalar_(const KernelRef& k, at::TensorList self, at::TensorList t1, at::TensorList t2,
                                  const at::Scalar& v) {
  inplace(k, self, {t1, t2}, value(v));
}
void fpga_foreach_addcdiv_scalarlist_(const KernelRef& k, at::TensorList self, at::TensorList t1, at::TensorList t2,
                                      at::ArrayRef<at::Scalar> scalars) {
  inplace(k, self, {t1, t2}, values(self, scalars));
}

}  // namespace aten_fpga
