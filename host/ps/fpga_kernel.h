// fpga_kernel: the TensorIterator-style driver behind every DispatchStub the table binds. It
// reads the iterator that ATen's structured meta built (common dtype, shape, strides), picks the
// kernel for that dtype from the loaded image, gives each kernel port a unit-stride buffer (made
// on the device when an operand is broadcast, strided, misaligned or of another dtype), splits the
// range across the compute units, runs them, and leaves the outputs valid on the device.
#pragma once

#include <ATen/TensorIterator.h>
#include <c10/core/Scalar.h>

#include <exception>
#include <string>

namespace aten_fpga {

// A kernel op of the library ("add"): the image holds it as v_<name>_<dtype>.
struct KernelRef {
  const char* name;
};

// Thrown before any side effect when the image has no kernel for the iterator's dtype; the
// generated wrapper then runs the op through the counted CPU fallback.
class KernelUnavailable : public std::exception {
 public:
  explicit KernelUnavailable(std::string kernel) : what_("no kernel " + std::move(kernel) + " in the image") {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

void fpga_kernel(at::TensorIteratorBase& iter, const KernelRef& kernel, c10::ArrayRef<c10::Scalar> scalars);

// The driver of reductions (ATen's reduction stubs take a TensorIterator&): host/ps/fpga_reduce.cpp.
void fpga_reduce(at::TensorIterator& iter, const KernelRef& kernel, c10::ArrayRef<c10::Scalar> scalars);

struct KernelInfo;
struct KernelArgInfo;
// The loaded image's kernel v_<name>_<dtype> on device `where`; KernelUnavailable when it has none.
const KernelInfo& kernel_for(const KernelRef& kernel, at::ScalarType dtype, c10::Device where);
// A scalar's bytes in the argument slot of kernel argument `arg`.
uint64_t encode_scalar(const c10::Scalar& s, const KernelArgInfo& arg);

// Binds a DispatchStub's function type to fpga_kernel (pointwise: TensorIteratorBase&) or
// fpga_reduce (reductions: TensorIterator&): its extra arguments (alpha, p, correction...) become
// the kernel's scalar arguments, in order.
template <typename FnPtr>
struct StubKernel;

template <typename... A>
struct StubKernel<void (*)(at::TensorIteratorBase&, A...)> {
  template <const KernelRef* K>
  static void run(at::TensorIteratorBase& iter, A... args) {
    const c10::Scalar scalars[] = {c10::Scalar(args)..., c10::Scalar()};  // trailing entry: never empty
    fpga_kernel(iter, *K, c10::ArrayRef<c10::Scalar>(scalars, sizeof...(A)));
  }
};

template <typename... A>
struct StubKernel<void (*)(at::TensorIterator&, A...)> {
  template <const KernelRef* K>
  static void run(at::TensorIterator& iter, A... args) {
    const c10::Scalar scalars[] = {c10::Scalar(args)..., c10::Scalar()};
    fpga_reduce(iter, *K, c10::ArrayRef<c10::Scalar>(scalars, sizeof...(A)));
  }
};

}  // namespace aten_fpga
