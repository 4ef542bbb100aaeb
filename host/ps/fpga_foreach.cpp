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

#include <cmath>
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

// outs[0][t], ... = op(ins[0][t], ..., the row's scalars) for every tensor t, in one launch. `s`
// holds `k` scalars per tensor (tensor t's at s[t * k], ...), or `k` for all. Throws
// KernelUnavailable (before any side effect) for lists one launch cannot serve: tensors of several
// dtypes or devices, of different shapes (ATen's foreach broadcasts per tensor), not dense, laid
// out differently from their output, or, at XCL_OPT 4, not starting a 512-bit word or an output
// ending one inside another tensor's word.
void multi_apply(const KernelRef& kernel, std::initializer_list<at::TensorList> ins,
                 std::initializer_list<at::TensorList> outs, c10::ArrayRef<double> s, size_t k = 1) {
  const at::TensorList first = outs.begin()[0];
  const size_t n = first.size();
  const at::ScalarType dtype = first[0].scalar_type();
  const c10::Device where = first[0].device();
  std::vector<at::TensorList> ports(ins);
  ports.insert(ports.end(), outs.begin(), outs.end());
  const size_t inputs = ins.size();
  for (at::TensorList l : ports) {
    for (size_t t = 0; t < n; ++t) {
      const at::Tensor& x = l[t];
      if (x.device() != where || x.scalar_type() != dtype || x.sizes() != first[t].sizes() ||
          x.strides() != first[t].strides() || !x.is_non_overlapping_and_dense()) {
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
  const size_t width = 1 + k + ports.size();
  std::vector<Allocation*> base(ports.size(), nullptr);
  std::vector<uintptr_t> base_addr(ports.size(), 0);
  std::vector<int64_t> table;
  for (size_t t = 0; t < n; ++t) {
    const int64_t numel = first[t].numel();
    if (numel == 0) continue;
    std::vector<int64_t> start(ports.size());  // the tensor's first element, in port words from the base
    for (size_t p = 0; p < ports.size(); ++p) {
      const at::Tensor& x = ports[p][t];
      Allocation* a = allocation_of(x);
      void* mem = dev.device_address(*a->buffer);
      if (mem == nullptr) throw KernelUnavailable(std::string(kernel.name) + " on a device whose memory the host cannot address");
      const size_t begin = x.storage_offset() * esize, end = begin + numel * esize;
      const uintptr_t addr = reinterpret_cast<uintptr_t>(mem) + begin;
      const bool own_last_word = end % word == 0 || end >= a->requested || p < inputs;
      if (addr % word != 0 || !own_last_word) {
        throw KernelUnavailable(std::string(kernel.name) + " over tensors that do not start (or end) a port word");
      }
      if (base[p] == nullptr) {
        base[p] = a;
        base_addr[p] = reinterpret_cast<uintptr_t>(mem);
      }
      start[p] = static_cast<int64_t>(addr - base_addr[p]) / word;  // signed: the base may lie above
    }
    std::vector<int64_t> bits(k);
    std::memcpy(bits.data(), s.data() + (s.size() == k ? 0 : t * k), k * sizeof(double));
    for (int64_t c = 0; c < numel; c += kChunk) {
      table.push_back(std::min(kChunk, numel - c));
      table.insert(table.end(), bits.begin(), bits.end());
      for (size_t p = 0; p < ports.size(); ++p) table.push_back(start[p] + c / lanes);
    }
  }
  const int64_t rows = static_cast<int64_t>(table.size() / width);
  if (rows == 0) return;

  // Inputs current on the device, outputs about to be written there, the table uploaded.
  for (size_t p = 0; p < inputs; ++p) {
    for (const at::Tensor& x : ports[p]) sync_to_device(allocation_of(x));
  }
  for (at::TensorList l : outs) {
    for (const at::Tensor& x : l) prepare_device_write(allocation_of(x), x.storage_offset() * esize, x.numel() * esize);
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
  for (at::TensorList l : outs) {
    for (const at::Tensor& x : l) mark_device_written(allocation_of(x));
  }
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
    case 0: return multi_apply(k, {self}, {self}, s);
    case 1: return multi_apply(k, {self, others.begin()[0]}, {self}, s);
    default: return multi_apply(k, {self, others.begin()[0], others.begin()[1]}, {self}, s);
  }
}

std::vector<at::Tensor> functional(const KernelRef& k, at::TensorList self, std::initializer_list<at::TensorList> others,
                                   c10::ArrayRef<double> s) {
  check_lists(self, others);
  std::vector<at::Tensor> out = like(self);
  if (others.size() == 0) {
    multi_apply(k, {self}, {out}, s);
  } else {
    multi_apply(k, {self, others.begin()[0]}, {out}, s);
  }
  return out;
}

// --- the fused optimizers: one launch of kernels/hls/fused_adam or fused_sgd per step ----------------

// AMP's GradScaler arguments are not in the kernels: such a step falls back, counted.
void require_unscaled(const char* op, const std::optional<at::Tensor>& grad_scale,
                      const std::optional<at::Tensor>& found_inf) {
  if (grad_scale.has_value() || found_inf.has_value()) {
    throw KernelUnavailable(std::string(op) + " with grad_scale/found_inf (a GradScaler step)");
  }
}

// Tensor t's step count, as ATen's fused kernels read it (`state_step.item<float>()`): the steps
// live on the device (the optimizer's _foreach_add_ counted them there), a float each.
double step_of(const char* op, const at::Tensor& step) {
  if (step.scalar_type() != at::kFloat || step.numel() != 1) {
    throw KernelUnavailable(std::string(op) + " with state_steps that are not one float32 each");
  }
  sync_to_host(allocation_of(step));
  return *step.data_ptr<float>();
}

// Adam (`adamw` false: the weight decay is added to the gradient) or AdamW (decoupled: the
// parameter shrinks by 1 - lr * weight_decay), every list updated in place in one launch. The
// per-tensor coefficients are ATen's, computed in double (the step may differ per tensor).
void fused_adam(const KernelRef& kernel, const char* op, bool adamw, at::TensorList self, at::TensorList grads,
                at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
                at::TensorList state_steps, double lr, double beta1, double beta2, double weight_decay, double eps,
                bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  static const KernelRef with_max{"mt_adam_amsgrad"};
  check_lists(self, {grads, exp_avgs, exp_avg_sqs, state_steps});
  if (amsgrad) check_lists(self, {max_exp_avg_sqs});
  if (!amsgrad) TORCH_CHECK(max_exp_avg_sqs.empty());  // ATen's check, word for word
  require_unscaled(op, grad_scale, found_inf);
  constexpr size_t k = 9;  // sign, wd, decay, c1, beta2, c2, step_size, bc2_sqrt, eps (fused_adam/ops.yaml)
  std::vector<double> s;
  s.reserve(self.size() * k);
  for (size_t t = 0; t < self.size(); ++t) {
    const double step = step_of(op, state_steps[t]);
    const double bias_correction1 = 1 - std::pow(beta1, step);
    const double bias_correction2 = 1 - std::pow(beta2, step);
    s.insert(s.end(), {maximize ? -1.0 : 1.0, adamw ? 0.0 : weight_decay, adamw ? 1 - lr * weight_decay : 1.0,
                       1 - beta1, beta2, 1 - beta2, lr / bias_correction1, std::sqrt(bias_correction2), eps});
  }
  if (amsgrad) {
    multi_apply(with_max, {self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs},
                {self, exp_avgs, exp_avg_sqs, max_exp_avg_sqs}, s, k);
  } else {
    multi_apply(kernel, {self, grads, exp_avgs, exp_avg_sqs}, {self, exp_avgs, exp_avg_sqs}, s, k);
  }
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


void fpga_fused_adam_(const KernelRef& k, at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                      at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                      double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                      bool maximize, const std::optional<at::Tensor>& grad_scale,
                      const std::optional<at::Tensor>& found_inf) {
  fused_adam(k, "_fused_adam_", false, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
             beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}
void fpga_fused_adamw_(const KernelRef& k, at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                       at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                       double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                       bool maximize, const std::optional<at::Tensor>& grad_scale,
                       const std::optional<at::Tensor>& found_inf) {
  fused_adam(k, "_fused_adamw_", true, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
             beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}

// SGD in place in one launch: with momentum, the buffers are updated too (on the first step they
// are only written: ATen passes them uninitialized); without (momentum 0) there are none.
void fpga_fused_sgd_(const KernelRef& k, at::TensorList self, at::TensorList grads,
                     at::TensorList momentum_buffer_list, double weight_decay, double momentum, double lr,
                     double dampening, bool nesterov, bool maximize, bool is_first_step,
                     const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  static const KernelRef plain{"mt_sgd"};
  check_lists(self, {grads});
  require_unscaled("_fused_sgd_", grad_scale, found_inf);
  const double sign = maximize ? -1.0 : 1.0;
  if (momentum == 0) {
    multi_apply(plain, {self, grads}, {self}, std::vector<double>{sign, weight_decay, -lr}, 3);
    return;
  }
  check_lists(self, {momentum_buffer_list});
  multi_apply(k, {self, grads, momentum_buffer_list}, {self, momentum_buffer_list},
              std::vector<double>{sign, weight_decay, momentum, 1 - dampening, -lr, is_first_step ? 1.0 : 0.0,
                                  nesterov ? 1.0 : 0.0},
              7);
}

}  // namespace aten_fpga
