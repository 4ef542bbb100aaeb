#include "fpga_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DynamicCast.h>
#include <c10/util/SmallVector.h>
#include <c10/util/complex.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <vector>

#include "afpga_abi.h"
#include "allocator.h"
#include "launch.h"
#include "runtime.h"

namespace aten_fpga {

// The kernels of one KernelRef in one image generation: info[device * kDtypes + dtype], null
// where the image has none. Immutable once published, so launches read it without a lock.
struct KernelTable {
  uint64_t generation;
  int devices;
  std::vector<const KernelInfo*> info;
};

namespace {

constexpr int kDtypes = static_cast<int>(at::ScalarType::NumOptions);

// The dtypes kernels run on, from the ABI table (codegen/abi.py -> afpga_abi.h).
const char* dtype_name(at::ScalarType t) {
#define AFPGA_DTYPE_NAME(name, scalar_type, kind, bytes) \
  if (t == at::ScalarType::scalar_type) return name;
  AFPGA_DTYPES(AFPGA_DTYPE_NAME)
#undef AFPGA_DTYPE_NAME
  return nullptr;
}

std::string kernel_name(const KernelRef& ref, at::ScalarType dtype) {
  const char* d = dtype_name(dtype);
  return std::string("v_") + ref.name + "_" + (d ? d : c10::toString(dtype));
}

// Tables stay alive for the process: a launch on another thread may still read an old one.
const KernelTable* publish_table(const KernelRef& ref, uint64_t generation) {
  static std::mutex mu;
  static auto* all = new std::vector<std::unique_ptr<KernelTable>>();
  auto t = std::make_unique<KernelTable>(KernelTable{generation, device_count(), {}});
  t->info.assign(static_cast<size_t>(t->devices) * kDtypes, nullptr);
  for (int d = 0; d < t->devices; ++d) {
    for (int s = 0; s < kDtypes; ++s) {
      const auto dtype = static_cast<at::ScalarType>(s);
      if (dtype_name(dtype) && (ref.dtypes >> s & 1)) {
        t->info[d * kDtypes + s] = device(d).find_kernel(kernel_name(ref, dtype));
      }
    }
  }
  std::lock_guard<std::mutex> g(mu);
  all->push_back(std::move(t));
  ref.table.store(all->back().get(), std::memory_order_release);
  return all->back().get();
}

const KernelInfo* find_kernel(const KernelRef& ref, int device_index, at::ScalarType dtype) {
  const uint64_t generation = image_generation();
  const KernelTable* t = ref.table.load(std::memory_order_acquire);
  if (t == nullptr || t->generation != generation) t = publish_table(ref, generation);
  return t->info[device_index * kDtypes + static_cast<int>(dtype)];
}

[[noreturn]] void kernel_unavailable(const KernelRef& ref, c10::Device where, at::ScalarType dtype) {
  TORCH_CHECK(!device(where.index()).image_path().empty(), "no fpga device image is loaded on ", where,
              ": build one with `scons`, then `import aten_fpga` (or aten_fpga.load(path))");
  throw KernelUnavailable(kernel_name(ref, dtype));
}

// Is operand `arg` laid out densely in the iterator's element order (dim 0 fastest)?
bool dense_in_iter_order(const at::TensorIteratorBase& iter, int arg) {
  int64_t expected = iter.element_size(arg);
  const auto shape = iter.shape();
  const auto strides = iter.strides(arg);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// Operand `arg` viewed with the iterator's shape and its own strides, outermost dim first, so a
// contiguous tensor of that shape holds its elements in the iterator's order.
at::Tensor iter_view(const at::TensorIteratorBase& iter, int arg) {
  const at::Tensor& t = iter.tensor(arg);
  const int64_t elsize = iter.element_size(arg);
  const auto shape = iter.shape();
  const auto strides = iter.strides(arg);
  at::DimVector sizes, elem_strides;
  for (size_t d = shape.size(); d-- > 0;) {
    sizes.push_back(shape[d]);
    elem_strides.push_back(strides[d] / elsize);
  }
  const auto* base = static_cast<const char*>(t.storage().data());
  const int64_t offset = (static_cast<const char*>(iter.data_ptr(arg)) - base) / elsize;
  return t.as_strided(sizes, elem_strides, offset);
}

// A kernel port's buffer: n elements of the compute dtype, unit stride, aligned to the port word.
struct Port {
  at::Tensor tensor;  // a temporary made on the device (undefined: the operand itself)
  Allocation* alloc = nullptr;
  size_t offset = 0;
};

size_t byte_offset(const at::TensorIteratorBase& iter, int arg) {
  const auto* base = static_cast<const char*>(iter.tensor(arg).storage().data());
  return static_cast<const char*>(iter.data_ptr(arg)) - base;
}

Port device_temp(const at::TensorIteratorBase& iter, at::ScalarType dtype) {
  const auto shape = iter.shape();
  at::DimVector sizes;
  for (size_t d = shape.size(); d-- > 0;) sizes.push_back(shape[d]);
  at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(dtype).device(iter.device(0)));
  return {t, allocation_of(t), 0};
}

// A Python number or 0-dim CPU tensor, broadcast to n elements: filled where the buffer is
// addressable as device memory (no host write, no sync), else in the host shadow.
Port scalar_port(const at::TensorIteratorBase& iter, int arg, at::ScalarType dtype) {
  Port p = device_temp(iter, dtype);
  const at::Tensor& value = iter.tensor(arg);
  void* device_mem = p.alloc->device->device_address(*p.alloc->buffer);
  void* dst = device_mem ? device_mem : p.alloc->buffer->host;
  const int64_t n = iter.numel();
  AT_DISPATCH_V2(dtype, "fpga_scalar_fill", AT_WRAP([&] {
    std::fill_n(static_cast<scalar_t*>(dst), n, c10::fetch_and_cast<scalar_t>(value.scalar_type(), value.const_data_ptr()));
  }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kBool, at::kHalf, at::kBFloat16);
  if (device_mem) {
    mark_device_written(p.alloc);
  } else {
    mark_host_written(p.alloc);
  }
  return p;
}

Port input_port(const at::TensorIteratorBase& iter, int arg, at::ScalarType dtype, int word) {
  if (iter.is_cpu_scalar(arg)) return scalar_port(iter, arg, dtype);
  const size_t offset = byte_offset(iter, arg);
  if (iter.dtype(arg) == dtype && dense_in_iter_order(iter, arg) && offset % word == 0) {
    return {at::Tensor(), allocation_of(iter.tensor(arg)), offset};
  }
  Port p = device_temp(iter, dtype);
  p.tensor.copy_(iter_view(iter, arg));  // on the device: broadcast, gather and cast in one pass
  return p;
}

// A broadcast input that repeats along the iterator's outer dims (a per-channel [C] operand of an
// NCHW op, a row vector added to every row) is not made dense over the whole range: one block of
// whole periods is made on the device, and the kernel runs once per block-sized chunk of the
// range, every chunk reading the same block. The copy kernel that makes a dense operand walks it
// one element at a time; this makes only the block (>= kMinBlock elements, and few enough chunks).
constexpr int64_t kMinBlock = int64_t(1) << 16;  // elements: fewer launches than a block is worth
constexpr int64_t kMaxChunks = 64;

// How many of the iterator's dims (innermost first) operand `arg` varies within: those below the
// outermost dims along which it is constant. Their product is the period after which it repeats.
size_t period_dims(const at::TensorIteratorBase& iter, int arg) {
  const auto shape = iter.shape();
  const auto strides = iter.strides(arg);
  size_t k = shape.size();
  while (k > 0 && (shape[k - 1] == 1 || strides[k - 1] == 0)) --k;
  return k;
}

// Elements per chunk for an operand of period `period` over n elements: whole periods, a multiple
// of 64 elements (every port's chunk then starts on a port word), at least kMinBlock and at most
// kMaxChunks chunks; 0 when a chunk would cover the range (no repetition worth using).
int64_t chunk_of(int64_t n, int64_t period) {
  const int64_t align = 64 / std::gcd<int64_t>(period, 64);  // periods per 64-element step
  const int64_t want = std::max(kMinBlock, (n + kMaxChunks - 1) / kMaxChunks);
  const int64_t periods = ((want + period - 1) / period + align - 1) / align * align;
  const int64_t chunk = periods * period;
  return chunk < n ? chunk : 0;
}

// The first `chunk` elements (whole periods of its `dims` inner dims) of operand `arg`, as a dense
// device tensor of `dtype`.
Port periodic_port(const at::TensorIteratorBase& iter, int arg, at::ScalarType dtype, size_t dims, int64_t period,
                   int64_t chunk) {
  const int64_t elsize = iter.element_size(arg);
  const auto shape = iter.shape();
  const auto strides = iter.strides(arg);
  at::DimVector sizes{chunk / period}, elem_strides{0};  // the periods, outermost
  for (size_t d = dims; d-- > 0;) {
    sizes.push_back(shape[d]);
    elem_strides.push_back(strides[d] / elsize);
  }
  const at::Tensor& t = iter.tensor(arg);
  const auto* base = static_cast<const char*>(t.storage().data());
  const int64_t offset = (static_cast<const char*>(iter.data_ptr(arg)) - base) / elsize;
  at::Tensor block = at::empty({chunk}, at::TensorOptions().dtype(dtype).device(iter.device(0)));
  block.view(sizes).copy_(t.as_strided(sizes, elem_strides, offset));  // on the device
  return {block, allocation_of(block), 0};
}

Port output_port(const at::TensorIteratorBase& iter, int arg, at::ScalarType dtype, int word) {
  const size_t offset = byte_offset(iter, arg);
  Allocation* a = allocation_of(iter.tensor(arg));
  const size_t end = offset + static_cast<size_t>(iter.numel()) * iter.element_size(arg);
  // A wide port writes whole words: the last one may only spill into this allocation's padding.
  const bool whole_words = end % word == 0 || (a != nullptr && end == a->requested);
  if (iter.dtype(arg) == dtype && dense_in_iter_order(iter, arg) && offset % word == 0 && whole_words) {
    return {at::Tensor(), a, offset};
  }
  return device_temp(iter, dtype);
}

// The dtype of a kernel port, from the image's argument metadata (element kind and size).
at::ScalarType port_dtype(const KernelArgInfo& arg, const std::string& kernel) {
#define AFPGA_PORT_DTYPE(name, scalar_type, kind, bytes) \
  if (arg.type == kind && arg.elem_bytes == bytes) return at::ScalarType::scalar_type;
  AFPGA_DTYPES(AFPGA_PORT_DTYPE)
#undef AFPGA_PORT_DTYPE
  TORCH_CHECK(false, kernel, ": port ", arg.name, " carries ", arg.elem_bytes, "-byte elements of kind '", arg.type,
              "', which is no dtype the host knows; fix the kernel's port type");
}

// An omitted optional scalar: ATen's default, which may depend on the kernel dtype.
c10::Scalar default_scalar(const KernelRef& kernel, size_t index, at::ScalarType dtype) {
  std::vector<std::string> specs;
  std::stringstream all(kernel.defaults != nullptr ? kernel.defaults : "");
  for (std::string s; std::getline(all, s, ',');) specs.push_back(s);
  const std::string spec = index < specs.size() ? specs[index] : "";
  TORCH_CHECK(!spec.empty(), "kernel ", kernel.name, ": scalar ", index, " was omitted and has no default; ",
              "give it one in the op's ops.yaml scalars (default:)");
  if (spec == "max" || spec == "lowest") {
    return AT_DISPATCH_FLOATING_TYPES_AND_HALF(dtype, "default_scalar", [&] {
      return c10::Scalar(spec == "max" ? std::numeric_limits<scalar_t>::max() : std::numeric_limits<scalar_t>::lowest());
    });
  }
  return c10::Scalar(std::stod(spec));
}

// The dtype whose kernel runs a reduced floating point (float16, bfloat16) op whose second operand
// is one value over the whole range. ATen's CPU mul and div kernels (BinaryOpsKernel.cpp: mul,
// div_true, div_trunc, div_floor) read that operand in float, their opmath type, as it was given:
// x.half() / 1e5 divides by 1e5, not by half(1e5) = inf. The float32 kernel computes exactly that:
// the float16 operand widened on the device (exact), the scalar filled in float, the result
// rounded to float16 once, when it is cast back. When the value is the same in the op's dtype, the
// op's own kernel gives the same bits without the widening copies.
at::ScalarType with_opmath_scalar(const at::TensorIteratorBase& iter, const KernelRef& kernel, at::ScalarType dtype) {
  if (!at::isReducedFloatingType(dtype) || iter.ntensors() != 3 || iter.noutputs() != 1 || !iter.is_scalar(2) ||
      iter.dtype(2) == dtype) {
    return dtype;
  }
  static constexpr const char* kOpmathScalarOps[] = {"mul", "div", "div_trunc", "div_floor"};
  if (std::none_of(std::begin(kOpmathScalarOps), std::end(kOpmathScalarOps),
                   [&](const char* op) { return std::strcmp(kernel.name, op) == 0; })) {
    return dtype;
  }
  if (iter.is_cpu_scalar(2)) {
    const at::Tensor& value = iter.tensor(2);
    const float v = c10::fetch_and_cast<float>(value.scalar_type(), value.const_data_ptr());
    const bool exact = AT_DISPATCH_REDUCED_FLOATING_TYPES(dtype, "opmath_scalar", [&] {
      return static_cast<float>(static_cast<scalar_t>(v)) == v;
    });
    if (exact) return dtype;
  }
  // ATen rounds the result to the op's dtype before casting it to an output of another dtype; the
  // float32 kernel would write it unrounded: the counted fallback computes it as ATen does.
  if (iter.dtype(0) != dtype) throw KernelUnavailable(std::string(kernel.name) + " of a scalar into another dtype");
  return at::toOpMathType(dtype);
}

}  // namespace

const KernelInfo& kernel_for(const KernelRef& kernel, at::ScalarType dtype, c10::Device where) {
  const KernelInfo* info = find_kernel(kernel, where.index(), dtype);
  if (info == nullptr) kernel_unavailable(kernel, where, dtype);
  return *info;
}

c10::Scalar scalar_or_default(const KernelRef& kernel, c10::ArrayRef<std::optional<c10::Scalar>> scalars,
                              size_t index, at::ScalarType dtype) {
  return scalars[index].has_value() ? *scalars[index] : default_scalar(kernel, index, dtype);
}

uint64_t encode_scalar(const c10::Scalar& s, const KernelArgInfo& arg) {
  uint64_t bits = 0;
  auto put = [&bits](const auto& v) { std::memcpy(&bits, &v, sizeof(v)); };
  switch (arg.type) {
    case 'f':
      if (arg.bytes == 4) put(s.to<float>()); else put(s.to<double>());
      break;
    case 'c': put(s.to<c10::complex<float>>()); break;
    case 'b': put(s.to<bool>()); break;
    case 'i': put(s.to<int64_t>()); break;  // low bytes first: also right for 32-bit registers
    case 'u': put(static_cast<uint64_t>(s.to<int64_t>())); break;
    default: TORCH_CHECK(false, "kernel argument ", arg.name, " has an unknown type '", arg.type, "'");
  }
  return bits;
}


at::ScalarType kernel_dtype(const at::TensorIteratorBase& iter, const KernelRef& kernel) {
  return kernel.dtype_operand < 0 ? iter.common_dtype() : iter.dtype(kernel.dtype_operand);
}

void require_kernel(const at::TensorIteratorBase& iter, const KernelRef& kernel) {
  kernel_for(kernel, kernel_dtype(iter, kernel), iter.device(0));
}

void require_kernel(std::initializer_list<std::reference_wrapper<const at::Tensor>> operands,
                    const KernelRef& kernel) {
  at::native::ResultTypeState state{};
  const at::Tensor* on_fpga = nullptr;
  for (const at::Tensor& t : operands) {
    state = at::native::update_result_type_state(t, state);
    if (on_fpga == nullptr && t.is_privateuseone()) on_fpga = &t;
  }
  const at::ScalarType dtype = at::native::result_type(state);
  if (on_fpga == nullptr) throw KernelUnavailable(kernel_name(kernel, dtype) + " for operands on the CPU");
  kernel_for(kernel, dtype, on_fpga->device());
}

void fpga_kernel(at::TensorIteratorBase& iter, const KernelRef& kernel,
                 c10::ArrayRef<std::optional<c10::Scalar>> scalars) {
  const at::ScalarType dtype = with_opmath_scalar(iter, kernel, kernel_dtype(iter, kernel));
  const c10::Device where = iter.device(0);
  KernelLaunch launch(kernel, dtype, where);
  const KernelInfo& info = launch.info();

  const int nt = iter.ntensors(), nout = iter.noutputs();
  launch.expect_args(nt + scalars.size() + 1, "template and stub disagree: fix kernels/hls/.../ops.yaml 'scalars'");
  const int64_t n = iter.numel();
  if (n == 0) return;
  // No device guard: whatever this makes on the device (temporaries, copies) names `where`.

  // Kernel ports in order: the inputs, then the outputs; each in the dtype the kernel declares.
  // At most one repeating broadcast input is read as a block (periodic_port): `chunk` elements,
  // the same for every chunk of the range; 0 when none.
  c10::SmallVector<Port, 4> ports(nt);
  c10::SmallVector<size_t, 4> elsize(nt);
  int64_t chunk = 0;
  int block_port = -1;
  for (int p = 0; p < nt; ++p) {
    const int arg = p < nt - nout ? nout + p : p - (nt - nout);
    const at::ScalarType pdtype = port_dtype(info.args[p], info.name);
    elsize[p] = c10::elementSize(pdtype);
    const int word = std::max<int>(info.args[p].bytes, iter.element_size(arg));
    if (arg < nout) {
      ports[p] = output_port(iter, arg, pdtype, word);
      continue;
    }
    const size_t dims = block_port < 0 && !iter.is_cpu_scalar(arg) ? period_dims(iter, arg) : iter.ndim();
    int64_t period = 1;
    for (size_t d = 0; d < dims; ++d) period *= iter.shape()[d];
    const int64_t c = period < n ? chunk_of(n, period) : 0;
    if (c != 0) {
      ports[p] = periodic_port(iter, arg, pdtype, dims, period, c);
      chunk = c;
      block_port = p;
    } else {
      ports[p] = input_port(iter, arg, pdtype, word);
    }
  }
  // Only the bytes the kernel reads move; an output's other bytes keep their state.
  for (int p = 0; p < nt - nout; ++p) {
    sync_to_device(ports[p].alloc, ports[p].offset, (p == block_port ? chunk : n) * elsize[p]);
  }
  // The scalar arguments, encoded once for every run.
  c10::SmallVector<uint64_t, 4> scalar_bits;
  for (size_t s = 0; s < scalars.size(); ++s) {
    scalar_bits.push_back(encode_scalar(scalar_or_default(kernel, scalars, s, dtype), info.args[nt + s]));
  }

  // Split each chunk (the whole range when no input is a block) across the compute units at whole
  // port words (every port has as many elements per word: a vector port's lanes); one launch per
  // chunk.
  const int64_t lanes = std::max<int64_t>(1, info.args[0].bytes / static_cast<int64_t>(elsize[0]));
  const int64_t step = chunk != 0 ? chunk : n;
  for (int64_t begin = 0; begin < n; begin += step) {
    for (const CuRange& r : launch.split(std::min(step, n - begin), lanes)) {
      RunArgs args = launch.add_run();
      for (int p = 0; p < nt; ++p) {
        const int64_t first = (p == block_port ? 0 : begin) + r.begin;
        args.buffer(ports[p].alloc, ports[p].offset + first * elsize[p], r.size() * elsize[p]);
      }
      for (uint64_t b : scalar_bits) args.bits(b);
      args.size(r.size());
    }
    launch.run();
  }

  for (int p = nt - nout; p < nt; ++p) {
    mark_device_written(ports[p].alloc, ports[p].offset, n * elsize[p]);
    if (ports[p].tensor.defined()) {
      const int arg = p - (nt - nout);
      iter_view(iter, arg).copy_(ports[p].tensor);  // on the device: scatter and cast back
    }
  }
}

}  // namespace aten_fpga
