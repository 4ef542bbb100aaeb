// fpga_kernel: the TensorIterator-style driver behind every DispatchStub the table binds. It
// reads the iterator that ATen's structured meta built (common dtype, shape, strides), picks the
// kernel for that dtype from the loaded image, gives each kernel port a unit-stride buffer (made
// on the device when an operand is broadcast, strided, misaligned or of another dtype), splits the
// range across the compute units, runs them, and leaves the outputs valid on the device.
#pragma once

#include <ATen/TensorIterator.h>
#include <c10/core/Scalar.h>

#include <atomic>
#include <exception>
#include <string>

namespace aten_fpga {

struct KernelTable;

// A kernel op of the library ("add"): the image holds it as v_<name>_<dtype>. fpga_kernel caches
// the image's KernelInfo per device and dtype here, so a launch does no name building or lookup;
// loading an image starts a new table. Declare KernelRefs static (as the generated code does): each
// table lives for the process.
struct KernelRef {
  const char* name;
  mutable std::atomic<const KernelTable*> table{nullptr};
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

// Binds a DispatchStub's function type to fpga_kernel: its extra arguments (alpha, bounds...)
// become the kernel's scalar arguments, in order.
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

}  // namespace aten_fpga
