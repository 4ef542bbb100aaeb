// The emulated device image's ABI, shared by the image (.so built from the generated HLS sources)
// and the host's EmuDevice. Each kernel is registered with its argument list, deduced from the
// top function's C++ signature, and a thunk that calls it from 64-bit argument slots -- the same
// shape as XRT's run.set_arg(i, value), so the host drives both devices alike.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "afpga_abi.h"  // generated from codegen/abi.py: the AFPGA_KIND_* encodings

// The most arguments a kernel may have: an engine carries every member's pointers and scalars
// (codegen/engines.py; the binary engine 48), a fused GEMM its epilogue ports
// (aten_fpga/compile/fuse.py MAX_ARGS).
#define AFPGA_EMU_MAX_ARGS 64

extern "C" {
// One kernel argument. A pointer is an m_axi port; its `bytes` is the port word (64 at XCL_OPT 4),
// and `type` / `elem_bytes` describe the elements it carries (a port's dtype). A scalar is an
// s_axilite register; `type` says how the host encodes it in the slot.
struct afpga_emu_arg {
  int is_pointer;
  int bytes;
  char type;  // an AFPGA_KIND_*: float, signed, unsigned, complex, bool
  int elem_bytes;  // a pointer's element (a vector port's lane); a scalar's own size
};

struct afpga_emu_kernel {
  const char* name;
  const char* arg_names;  // comma separated, in order
  int nargs;
  afpga_emu_arg args[AFPGA_EMU_MAX_ARGS];
  void (*invoke)(const uint64_t* slots);
};

// Exported by every image: the kernels it holds and the compute units of each.
const afpga_emu_kernel* afpga_emu_kernels(int* count);
int afpga_emu_cus();
int afpga_emu_level();
}

namespace afpga_emu {

// It is compiled with the kernels (C++14, HLS's language level): per-type variants are overloads
// chosen by a std::true_type / std::false_type tag.
template <typename A>
A from_slot(uint64_t slot, std::true_type /* pointer */) {
  return reinterpret_cast<A>(static_cast<uintptr_t>(slot));
}
template <typename A>
A from_slot(uint64_t slot, std::false_type) {
  static_assert(sizeof(A) <= sizeof(uint64_t), "scalar wider than an argument slot");
  A v;
  std::memcpy(&v, &slot, sizeof(A));  // the host stores the value's bytes, low bytes first
  return v;
}
template <typename A>
A from_slot(uint64_t slot) {
  return from_slot<A>(slot, std::is_pointer<A>());
}

// The element of a port word: a vector port (hls::vector, which has a static size()) carries
// lanes of its element type; any other pointee is the element itself.
template <typename>
struct to_void {
  typedef void type;
};
template <typename P, typename = void>
struct lane {
  typedef P type;
};
template <typename P>
struct lane<P, typename to_void<decltype(P::size())>::type> {
  typedef std::remove_cv_t<std::remove_reference_t<decltype(std::declval<P&>()[0])>> type;
};

// How the host encodes a value of type E: half converts to float, so it is a float too.
template <typename E>
constexpr char kind() {
  return std::is_same<E, bool>::value        ? AFPGA_KIND_BOOL
         : std::is_integral<E>::value        ? (std::is_signed<E>::value ? AFPGA_KIND_SIGNED : AFPGA_KIND_UNSIGNED)
         : std::is_convertible<E, double>::value ? AFPGA_KIND_FLOAT
                                                 : AFPGA_KIND_COMPLEX;  // std::complex<float>
}

template <typename A>
afpga_emu_arg describe(std::true_type /* pointer */) {
  typedef std::remove_cv_t<std::remove_pointer_t<A>> P;
  typedef typename lane<P>::type E;
  return {1, static_cast<int>(sizeof(P)), kind<E>(), static_cast<int>(sizeof(E))};
}
template <typename A>
afpga_emu_arg describe(std::false_type) {
  return {0, static_cast<int>(sizeof(A)), kind<A>(), static_cast<int>(sizeof(A))};
}
template <typename A>
afpga_emu_arg describe() {
  return describe<A>(std::is_pointer<A>());
}

// Hidden, so that each image has its own: with default visibility g++ makes this static local one
// process-wide (STB_GNU_UNIQUE) object, and an image loaded after another would list -- and run --
// the first image's kernels.
__attribute__((visibility("hidden"))) inline std::vector<afpga_emu_kernel>& registry() {
  static std::vector<afpga_emu_kernel> kernels;
  return kernels;
}

template <typename F>
struct Signature;

template <typename... A>
struct Signature<void (*)(A...)> {
  static_assert(sizeof...(A) <= AFPGA_EMU_MAX_ARGS, "too many kernel arguments");
  template <void (*Fn)(A...), std::size_t... I>
  static void call(const uint64_t* s, std::index_sequence<I...>) {
    Fn(from_slot<A>(s[I])...);
  }
  template <void (*Fn)(A...)>
  static void invoke(const uint64_t* s) {
    call<Fn>(s, std::index_sequence_for<A...>{});
  }
  template <void (*Fn)(A...)>
  static afpga_emu_kernel entry(const char* name, const char* arg_names) {
    afpga_emu_kernel k{name, arg_names, static_cast<int>(sizeof...(A)), {}, &invoke<Fn>};
    // The arguments in order: a braced list's elements are evaluated left to right.
    int i = 0;
    const int described[] = {0, ((k.args[i++] = describe<A>()), 0)...};
    (void)described;
    return k;
  }
};

template <typename F, F Fn>
struct Register {
  Register(const char* name, const char* arg_names) {
    registry().push_back(Signature<F>::template entry<Fn>(name, arg_names));
  }
};

}  // namespace afpga_emu

#define AFPGA_EMU_KERNEL(fn, arg_names) \
  static ::afpga_emu::Register<decltype(&fn), &fn> fn##_registered(#fn, arg_names);
