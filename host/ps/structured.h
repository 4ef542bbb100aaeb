// The structured op of the generated wrappers (FPGAType_*.cpp), in its three forms, as ATen's own
// Register<Backend>.cpp makes them: the wrapper runs ATen's meta (shapes, broadcasting, type
// promotion), which hands each output to set_output_*, then ATen's impl, whose DispatchStub runs
// the kernel. Registering the functional and in-place forms as well as out= means `x + y` and
// `x.add_(y)` dispatch once and build their TensorIterator once, instead of going through the
// CompositeExplicitAutogradNonFunctional kernel, which runs the meta and then dispatches add.out.
//   - out=: resize `out` (restriding only when it was resized); where the kernel needs other
//     strides than `out` has, compute into a proxy that is copied back afterwards;
//   - functional: allocate each output on the device as the meta asks;
//   - in-place: check `self` against what the meta asks (the same errors as ATen's), with a proxy
//     as for out=.
#pragma once

#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>

#include <array>
#include <functional>
#include <optional>
#include <type_traits>

namespace aten_fpga {

enum class Form { Functional, Inplace, Out };

// An fpga tensor of these sizes and strides (or, with no strides, `options`' memory format) on
// options' device, without a dispatch (tensor_ops.cpp).
at::Tensor empty_fpga(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options);

// out=: resize_output and the proxy rule above.
void set_output(std::reference_wrapper<at::Tensor> out, std::optional<at::Tensor>& proxy, at::IntArrayRef sizes,
                at::IntArrayRef strides, const at::TensorOptions& options, bool allow_proxy);
// In-place: self must have the dtype, device and sizes the meta computed.
void check_inplace(const at::Tensor& self, at::IntArrayRef sizes, const at::TensorOptions& options);

// ATen's impl class `Impl` (structured_ufunc_add_CPU) with outputs of form F, N of them. The
// functional form owns its outputs; the others refer to the caller's tensors (no reference count
// taken: a tensor that Python holds would take the GIL to count one).
template <class Impl, Form F, size_t N>
struct StructuredOp final : public Impl {
  using Output = std::conditional_t<F == Form::Functional, at::Tensor, std::reference_wrapper<at::Tensor>>;

  StructuredOp() = default;  // functional
  template <class... T, class = std::enable_if_t<sizeof...(T) == N && F != Form::Functional>>
  explicit StructuredOp(T&... outs) : outputs_{std::ref(outs)...} {}

  // A TensorIterator meta records its outputs in set_output; other metas (reductions) have none.
  static constexpr bool kIterMeta = std::is_base_of_v<at::TensorIteratorBase, Impl>;

  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) override {
    set(i, sizes, strides, options, /*allow_proxy=*/true);
  }
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) override {
    set(i, sizes, strides, options, /*allow_proxy=*/false);
  }
  const at::Tensor& maybe_get_output(int64_t i) override {
    if constexpr (F == Form::Functional) {
      return outputs_[i];
    } else {
      return proxy_outputs_[i].has_value() ? *proxy_outputs_[i] : outputs_[i].get();
    }
  }
  // After impl: copy each proxy back into its output.
  void copy_proxies() {
    if constexpr (F != Form::Functional) {
      for (size_t i = 0; i < N; ++i) {
        if (proxy_outputs_[i].has_value()) outputs_[i].get().copy_(*proxy_outputs_[i]);
      }
    }
  }

  std::array<Output, N> outputs_;
  std::array<std::optional<at::Tensor>, N> proxy_outputs_;

 private:
  void set(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options,
           bool allow_proxy) {
    if constexpr (F == Form::Functional) {
      outputs_[i] = empty_fpga(sizes, strides, options);
    } else if constexpr (F == Form::Inplace) {
      check_inplace(outputs_[i].get(), sizes, options);
      if (allow_proxy && !strides.empty() && !outputs_[i].get().strides().equals(strides)) {
        proxy_outputs_[i] = empty_fpga(sizes, strides, options);
      }
    } else {
      set_output(outputs_[i], proxy_outputs_[i], sizes, strides, options, allow_proxy);
    }
    // After ours, so that the meta's own bookkeeping sees the output through maybe_get_output.
    if constexpr (kIterMeta) Impl::set_output_raw_strided(i, sizes, strides, options);
  }
};

}  // namespace aten_fpga
