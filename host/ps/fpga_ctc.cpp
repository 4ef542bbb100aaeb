// fpga_ctc: the CTC loss (wav2vec2's) as the kernels/hls/ctc kernels, one launch each:
//   _ctc_loss            ctc_alpha: log_alpha [batch, time, 2 * max target length + 1] and the
//                        negative log likelihood per item
//   _ctc_loss_backward   ctc_beta: the gradient of log_probs from log_alpha, the loss and its grad
// (and their .Tensor overloads, whose lengths come to the host: one sync each, as on ATen's CPU).
// ctc_loss's reductions ('mean', 'sum', 'none') and its zero_infinity on the loss are ATen's
// composite around these, run by other kernels. The kernels take log_probs as a contiguous
// [time, batch, labels] block, the targets as int64 with each item's offset, and the lengths as a
// small [batch, 3] table (input length, target length, target offset) copied to the device.
// Arguments ATen would reject (and shapes beyond the kernel's on-chip rows) run on the CPU, counted,
// so that its error is ATen's own.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include "FPGAType.h"
#include "allocator.h"
#include "launch.h"

namespace aten_fpga {
namespace {

constexpr int64_t kMaxStates = 1025;  // kernels/hls/ctc/_kernel.j2 S_MAX: targets of up to 512 labels
constexpr int64_t kMaxLabels = 4096;  // C_MAX: the labels a step collects

struct CtcShape {
  int64_t time, batch, labels, states;
  at::Tensor lp, tgt, meta;  // on the device: contiguous log_probs, int64 targets, [batch, 3] lengths
};

// The kernels' operands, or KernelUnavailable where ATen would raise (its message from the CPU).
CtcShape ctc_shape(const at::Tensor& log_probs, const at::Tensor& targets, at::IntArrayRef il, at::IntArrayRef tl,
                   int64_t blank) {
  const auto unsupported = [](const char* why) { throw KernelUnavailable(std::string("ctc_loss: ") + why); };
  if (!targets.is_privateuseone() || targets.device() != log_probs.device()) unsupported("targets on another device");
  if (log_probs.dim() != 3) unsupported("log_probs of other than 3 dims");
  if (targets.scalar_type() != at::kLong && targets.scalar_type() != at::kInt) unsupported("targets of another dtype");
  if (targets.dim() != 1 && targets.dim() != 2) unsupported("targets of other than 1 or 2 dims");
  const int64_t time = log_probs.size(0), batch = log_probs.size(1), labels = log_probs.size(2);
  if (blank < 0 || blank >= labels || labels > kMaxLabels) unsupported("blank out of range, or too many labels");
  if (int64_t(il.size()) != batch || int64_t(tl.size()) != batch) unsupported("lengths of another size");
  if (targets.dim() == 2 && targets.size(0) != batch) unsupported("targets of another batch");
  at::Tensor meta = at::empty({batch, 3}, at::kLong);
  int64_t* m = meta.data_ptr<int64_t>();
  int64_t offset = 0, max_len = targets.dim() == 2 ? targets.size(1) : 0;
  for (int64_t b = 0; b < batch; ++b) {
    if (il[b] < 0 || il[b] > time || tl[b] < 0) unsupported("a length out of range");
    if (targets.dim() == 2 && tl[b] > targets.size(1)) unsupported("a target length beyond the targets");
    m[3 * b] = il[b];
    m[3 * b + 1] = tl[b];
    m[3 * b + 2] = targets.dim() == 2 ? b * targets.size(1) : offset;
    offset += tl[b];
    if (targets.dim() == 1) max_len = std::max(max_len, tl[b]);
  }
  if (targets.dim() == 1 && offset > targets.size(0)) unsupported("target lengths beyond the targets");
  if (2 * max_len + 1 > kMaxStates) unsupported("targets longer than the kernel's rows");
  const c10::Device dev = log_probs.device();
  return {time, batch, labels, 2 * max_len + 1, log_probs.contiguous(), targets.to(at::kLong).contiguous(), meta.to(dev)};
}

// One launch of ctc_alpha or ctc_beta over the batch items, split across the compute units.
void run_ctc(KernelLaunch& launch, const CtcShape& c, const at::Tensor& gin, const at::Tensor& alpha,
             const at::Tensor& out, int64_t blank, std::optional<bool> zero_infinity) {
  launch.expect_args(6 + 1 + (zero_infinity ? 1 : 0) + 6, "kernels/hls/ctc/ops.yaml and fpga_ctc.cpp disagree");
  const bool backward = zero_infinity.has_value();
  for (const at::Tensor* t : {&c.lp, &c.tgt, &c.meta, &gin}) sync_to_device(allocation_of(*t));
  if (backward) {
    sync_to_device(allocation_of(alpha));
  } else {
    prepare_device_write(allocation_of(alpha), byte_offset(alpha), alpha.numel() * alpha.element_size());
  }
  prepare_device_write(allocation_of(out), byte_offset(out), out.numel() * out.element_size());
  for (const CuRange& r : launch.split(c.batch, 1, c.time * c.states)) {
    RunArgs run = launch.add_run()  // a copy: add_run() returns the unit's arguments by value
                       .buffer(allocation_of(c.lp), byte_offset(c.lp))
                       .buffer(allocation_of(c.tgt), byte_offset(c.tgt))
                       .buffer(allocation_of(c.meta), byte_offset(c.meta))
                       .buffer(allocation_of(gin), byte_offset(gin))
                       .buffer(allocation_of(alpha), byte_offset(alpha))
                       .buffer(allocation_of(out), byte_offset(out))
                       .scalar(blank);
    if (backward) run.scalar(*zero_infinity);
    run.size(c.time).size(c.batch).size(c.labels).size(c.states).size(r.begin).size(r.size());
  }
  launch.run();
  if (!backward) mark_device_written(allocation_of(alpha), byte_offset(alpha), alpha.numel() * alpha.element_size());
  mark_device_written(allocation_of(out), byte_offset(out), out.numel() * out.element_size());
}

std::vector<int64_t> host_lengths(const at::Tensor& lengths) {
  if (!at::isIntegralType(lengths.scalar_type(), /*includeBool=*/false)) throw KernelUnavailable("ctc_loss: lengths not integral");
  const at::Tensor l = lengths.to(at::kCPU, at::kLong).contiguous();  // the one sync, as ATen's
  return {l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel()};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fpga__ctc_loss(const KernelRef& kernel, const at::Tensor& log_probs,
                                                  const at::Tensor& targets, at::IntArrayRef input_lengths,
                                                  at::IntArrayRef target_lengths, int64_t blank, bool zero_infinity) {
  (void)zero_infinity;  // the forward ignores it (ctc_loss zeroes infinite losses itself), as ATen's
  KernelLaunch launch(kernel, log_probs.scalar_type(), log_probs.device());  // KernelUnavailable first
  c10::DeviceGuard guard(log_probs.device());
  const CtcShape c = ctc_shape(log_probs, targets, input_lengths, target_lengths, blank);
  at::Tensor alpha = at::empty({c.batch, c.time, c.states}, log_probs.options());
  at::Tensor nll = at::empty({c.batch}, log_probs.options());
  if (c.batch > 0) run_ctc(launch, c, c.lp, alpha, nll, blank, std::nullopt);
  return {nll, alpha};
}

std::tuple<at::Tensor, at::Tensor> fpga__ctc_loss_tensor(const KernelRef& kernel, const at::Tensor& log_probs,
                                                         const at::Tensor& targets, const at::Tensor& input_lengths,
                                                         const at::Tensor& target_lengths, int64_t blank,
                                                         bool zero_infinity) {
  kernel_for(kernel, log_probs.scalar_type(), log_probs.device());
  return fpga__ctc_loss(kernel, log_probs, targets, host_lengths(input_lengths), host_lengths(target_lengths), blank,
                        zero_infinity);
}

at::Tensor fpga__ctc_loss_backward(const KernelRef& kernel, const at::Tensor& grad, const at::Tensor& log_probs,
                                   const at::Tensor& targets, at::IntArrayRef input_lengths,
                                   at::IntArrayRef target_lengths, const at::Tensor& neg_log_likelihood,
                                   const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  KernelLaunch launch(kernel, log_probs.scalar_type(), log_probs.device());
  c10::DeviceGuard guard(log_probs.device());
  for (const at::Tensor* t : {&grad, &neg_log_likelihood, &log_alpha}) {
    if (!t->is_privateuseone() || t->device() != log_probs.device() || t->scalar_type() != log_probs.scalar_type())
      throw KernelUnavailable("ctc_loss_backward: an operand on another device or of another dtype");
  }
  const CtcShape c = ctc_shape(log_probs, targets, input_lengths, target_lengths, blank);
  if (log_alpha.sizes() != at::IntArrayRef({c.batch, c.time, c.states}) || grad.numel() != c.batch ||
      neg_log_likelihood.numel() != c.batch)
    throw KernelUnavailable("ctc_loss_backward: operands of other shapes");
  const at::Tensor gin = at::stack({grad.reshape({-1}), neg_log_likelihood.reshape({-1})}, 1);  // [batch, 2]
  const at::Tensor alpha = log_alpha.contiguous();
  at::Tensor out = at::empty({c.time, c.batch, c.labels}, log_probs.options());
  if (c.batch > 0) run_ctc(launch, c, gin, alpha, out, blank, zero_infinity);
  return out;
}

at::Tensor fpga__ctc_loss_backward_tensor(const KernelRef& kernel, const at::Tensor& grad, const at::Tensor& log_probs,
                                          const at::Tensor& targets, const at::Tensor& input_lengths,
                                          const at::Tensor& target_lengths, const at::Tensor& neg_log_likelihood,
                                          const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  kernel_for(kernel, log_probs.scalar_type(), log_probs.device());
  return fpga__ctc_loss_backward(kernel, grad, log_probs, targets, host_lengths(input_lengths),
                                 host_lengths(target_lengths), neg_log_likelihood, log_alpha, blank, zero_infinity);
}

}  // namespace aten_fpga
