// fpga_kernel: the TensorIterator-style driver behind every DispatchStub the table binds. It
// reads the iterator that ATen's structured meta built (common dtype, shape, strides), picks the
// kernel for that dtype from the loaded image, gives each kernel port a unit-stride buffer (made
// on the device when an operand is broadcast, strided, misaligned or of another dtype), splits the
// range across the compute units, runs them, and leaves the outputs valid on the device.
#pragma once

#include <ATen/TensorIterator.h>
#include <c10/core/Scalar.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>

namespace aten_fpga {

struct KernelTable;

// A set of dtypes, one bit per ScalarType.
using DtypeMask = uint64_t;
static_assert(static_cast<int>(at::ScalarType::NumOptions) <= 64, "a DtypeMask has a bit per ScalarType");
constexpr DtypeMask dtype_mask(std::initializer_list<at::ScalarType> dtypes) {
  DtypeMask m = 0;
  for (at::ScalarType t : dtypes) m |= DtypeMask{1} << static_cast<int>(t);
  return m;
}

// A kernel op of the library ("add"): the image holds it as v_<name>_<dtype>. fpga_kernel caches
// the image's KernelInfo per device and dtype here, so a launch does no name building or lookup;
// loading an image starts a new table. Declare KernelRefs static (as the generated code does): each
// table lives for the process.
struct KernelRef {
  const char* name;
  // For stubs with optional arguments: per kernel scalar, comma separated, what an empty one
  // means -- a number, or "max" / "lowest" of the kernel dtype (nan_to_num) -- or nullptr.
  const char* defaults = nullptr;
  // Which iterator operand's dtype names the kernel: -1 for the iterator's common dtype. An op
  // with an input of fixed dtype (where's bool condition) has no common dtype; it names another.
  int dtype_operand = -1;
  // A reduction kernel (its category's `driver: reduce`): run by fpga_reduce, not fpga_kernel.
  bool reduction = false;
  // The dtypes the table lists for the entries that run this kernel: another dtype has no kernel
  // here even where the image holds one (built for another entry), so its op falls back, counted.
  DtypeMask dtypes = ~DtypeMask{0};
  mutable std::atomic<const KernelTable*> table{nullptr};
};

// Thrown before any side effect when the image has no kernel for the op's dtype (or the table does
// not list it); the generated wrapper then runs the op through the counted CPU fallback.
class KernelUnavailable : public std::exception {
 public:
  explicit KernelUnavailable(std::string kernel) : what_("no kernel " + std::move(kernel) + " in the image") {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

// The dtype that names the iterator's kernel: its common dtype, or kernel.dtype_operand's.
at::ScalarType kernel_dtype(const at::TensorIteratorBase& iter, const KernelRef& kernel);
// KernelUnavailable unless the kernel exists for the iterator: what a structured wrapper checks
// once ATen's meta has built the iterator, before ATen's impl runs (which may bypass the stub for
// some dtypes, e.g. floor of integers is a copy).
void require_kernel(const at::TensorIteratorBase& iter, const KernelRef& kernel);
// The same for an op whose iterator ATen builds inside its kernel (a forwarder): the kernel dtype is
// the promoted dtype of `operands`, on the device of the first that is an fpga tensor.
void require_kernel(std::initializer_list<std::reference_wrapper<const at::Tensor>> operands,
                    const KernelRef& kernel);

// Runs kernel v_<kernel.name>_<dtype> over the iterator. The dtype is the iterator's common dtype
// (or kernel.dtype_operand's); each port's own dtype comes from the kernel's argument metadata. `scalars` are the kernel's scalar arguments, in order;
// an empty one takes kernel.defaults.
void fpga_kernel(at::TensorIteratorBase& iter, const KernelRef& kernel,
                 c10::ArrayRef<std::optional<c10::Scalar>> scalars);

// The driver of reductions (ATen's reduction stubs take a TensorIterator&): host/ps/fpga_reduce.cpp.
void fpga_reduce(at::TensorIterator& iter, const KernelRef& kernel,
                 c10::ArrayRef<std::optional<c10::Scalar>> scalars);

// What both drivers share. The loaded image's kernel v_<name>_<dtype> on device `where`
// (KernelUnavailable when it has none); scalar `index`, or its default when the stub passed none;
// a scalar's bytes in the argument slot of kernel argument `arg`.
struct KernelInfo;
struct KernelArgInfo;
const KernelInfo& kernel_for(const KernelRef& kernel, at::ScalarType dtype, c10::Device where);
c10::Scalar scalar_or_default(const KernelRef& kernel, c10::ArrayRef<std::optional<c10::Scalar>> scalars,
                              size_t index, at::ScalarType dtype);
uint64_t encode_scalar(const c10::Scalar& s, const KernelArgInfo& arg);

// A stub's extra argument as a kernel scalar: Scalars and numbers as they are, enums (GeluType)
// as their value, an empty optional as "use the default".
template <typename A>
std::optional<c10::Scalar> to_scalar(const A& a) {
  if constexpr (std::is_enum_v<A>) {
    return c10::Scalar(static_cast<int64_t>(a));
  } else {
    return c10::Scalar(a);
  }
}

template <typename A>
std::optional<c10::Scalar> to_scalar(const std::optional<A>& a) {
  return a.has_value() ? to_scalar(*a) : std::nullopt;
}

// Binds a DispatchStub's function type to fpga_kernel, or fpga_reduce for a reduction kernel: its
// extra arguments (alpha, bounds, p...) become the kernel's scalar arguments, in order. The
// iterator parameter is TensorIteratorBase& or, for reductions and older stubs, TensorIterator&.
template <typename FnPtr>
struct StubKernel;

template <typename Iter, typename... A>
struct StubKernel<void (*)(Iter&, A...)> {
  template <const KernelRef* K>
  static void run(Iter& iter, A... args) {
    const std::optional<c10::Scalar> scalars[] = {to_scalar(args)..., std::nullopt};  // never empty
    const c10::ArrayRef<std::optional<c10::Scalar>> given(scalars, sizeof...(A));
    if constexpr (std::is_same_v<Iter, at::TensorIterator>) {
      if (K->reduction) return fpga_reduce(iter, *K, given);
    }
    fpga_kernel(iter, *K, given);
  }
};

}  // namespace aten_fpga
