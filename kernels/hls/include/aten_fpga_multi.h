// Shared by the multi-tensor kernels (kernels/hls/multi): the pointwise building blocks, how a
// table row's scalar is stored, and the fused optimizers' steps (one element each).
#pragma once

#include <stdint.h>

#include "aten_fpga_hls.h"

namespace afpga {
namespace multi {

// A row's scalar is a double's bits in an int64 table entry (the table is one int64 array).
inline double from_bits(int64_t bits) {
#pragma HLS INLINE
  union {
    int64_t i;
    double d;
  } u;
  u.i = bits;
  return u.d;
}

// --- the fused optimizers: ATen's CPU kernels (cpu/FusedAdamKernel.cpp, cpu/FusedSGDKernel.cpp),
// their vector loop as the released build computes it, operation by operation (which products
// are fused into an fma was measured against torch's fused=True step, element by element). Every
// coefficient arrives rounded to the dtype, as ATen rounds its double arguments. A flag ATen tests
// once per call is a select here: both sides are computed and a mux picks one (II=1 holds).

// Adam's moments: `sign` is -1 to maximize (else 1: exact); `wd` is Adam's L2 weight decay (0
// adds nothing, as ATen skips it); `decay` is AdamW's 1 - lr * weight_decay (1 for Adam: exact).
template <typename M>
inline void adam_moments(M& p, M& g, M& m, M& v, M sign, M wd, M decay, M c1, M beta2, M c2) {
#pragma HLS INLINE
  g = g * sign;
  g = wd != M(0) ? hls::fma(p, wd, g) : g;
  p = p * decay;
  m = afpga::lerp(m, g, c1);  // exp_avg.lerp_(grad, 1 - beta1)
  v = hls::fma(c2 * g, g, v * beta2);
}

// param - step_size * exp_avg / (sqrt(v) / sqrt(bias_correction2) + eps)
template <typename M>
inline M adam_param(M p, M m, M v, M step_size, M bc2_sqrt, M eps) {
#pragma HLS INLINE
  const M denom = hls::sqrt(v) / bc2_sqrt + eps;
  return p - step_size * m / denom;
}

template <typename M, typename T>
inline void adam(M p, M g, M m, M v, M sign, M wd, M decay, M c1, M beta2, M c2, M step_size, M bc2_sqrt, M eps,
                 T& p_out, T& m_out, T& v_out) {
#pragma HLS INLINE
  adam_moments(p, g, m, v, sign, wd, decay, c1, beta2, c2);
  m_out = T(m);
  v_out = T(v);
  p_out = T(adam_param(p, m, v, step_size, bc2_sqrt, eps));
}

// amsgrad: the denominator from the running maximum of exp_avg_sq (NaN-propagating, as ATen's
// vector maximum).
template <typename M, typename T>
inline void adam_amsgrad(M p, M g, M m, M v, M vmax, M sign, M wd, M decay, M c1, M beta2, M c2, M step_size,
                         M bc2_sqrt, M eps, T& p_out, T& m_out, T& v_out, T& vmax_out) {
#pragma HLS INLINE
  adam_moments(p, g, m, v, sign, wd, decay, c1, beta2, c2);
  vmax = afpga::maximum(vmax, v);
  m_out = T(m);
  v_out = T(v);
  vmax_out = T(vmax);
  p_out = T(adam_param(p, m, vmax, step_size, bc2_sqrt, eps));
}

// SGD's gradient: maximize (`sign`), then the weight decay as one fma (0: not added, as ATen).
template <typename M>
inline M sgd_grad(M p, M g, M sign, M wd) {
#pragma HLS INLINE
  g = g * sign;
  return wd != M(0) ? hls::fma(p, wd, g) : g;
}

// SGD with momentum: the buffer is the gradient on the first step (`first` = 1), else
// buf * momentum + (1 - dampening) * grad (one fma); nesterov (= 1) steps along
// grad + momentum * buf (one fma), else along buf. `neg_lr` is -lr: param + grad * -lr, one fma.
template <typename M, typename T>
inline void sgd_momentum(M p, M g, M buf, M sign, M wd, M momentum, M damp1, M neg_lr, M first, M nesterov,
                         T& p_out, T& buf_out) {
#pragma HLS INLINE
  g = sgd_grad(p, g, sign, wd);
  buf = first != M(0) ? g : hls::fma(damp1, g, buf * momentum);
  g = nesterov != M(0) ? hls::fma(buf, momentum, g) : buf;
  buf_out = T(buf);
  p_out = T(hls::fma(g, neg_lr, p));
}

}  // namespace multi
}  // namespace afpga
