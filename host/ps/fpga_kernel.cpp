#include "fpga_kernel.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/complex.h>

#include <ATen/Dispatch.h>

#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "allocator.h"
#include "runtime.h"

namespace aten_fpga {
namespace {

// Below this many elements per CU, splitting costs more than it saves.
constexpr int64_t kMinElementsPerCU = 1 << 14;

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kComplexFloat: return "complex64";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kBool: return "bool";
    default: return nullptr;
  }
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
  std::vector<int64_t> sizes(shape.rbegin(), shape.rend()), elem_strides;
  for (auto it = strides.rbegin(); it != strides.rend(); ++it) elem_strides.push_back(*it / elsize);
  const auto* base = static_cast<const char*>(t.storage().data());
  const int64_t offset = (static_cast<const char*>(iter.data_ptr(arg)) - base) / elsize;
  return t.as_strided(sizes, elem_strides, offset);
}

std::vector<int64_t> iter_sizes(const at::TensorIteratorBase& iter) {
  return std::vector<int64_t>(iter.shape().rbegin(), iter.shape().rend());
}

// A kernel port's buffer: n elements of the compute dtype, unit stride, aligned to the port word.
struct Port {
  at::Tensor tensor;  // holds the bytes: the operand itself, or a temporary made on the device
  Allocation* alloc = nullptr;
  size_t offset = 0;
  bool is_temp = false;
};

size_t byte_offset(const at::TensorIteratorBase& iter, int arg) {
  const auto* base = static_cast<const char*>(iter.tensor(arg).storage().data());
  return static_cast<const char*>(iter.data_ptr(arg)) - base;
}

at::Tensor device_temp(const at::TensorIteratorBase& iter, at::ScalarType dtype) {
  return at::empty(iter_sizes(iter), at::TensorOptions().dtype(dtype).device(iter.device(0)));
}

Port input_port(const at::TensorIteratorBase& iter, int arg, at::ScalarType dtype, int word) {
  if (iter.is_cpu_scalar(arg)) {
    // A Python number or 0-dim CPU tensor: broadcast into a device buffer (through the host shadow).
    at::Tensor t = device_temp(iter, dtype);
    t.copy_(iter.tensor(arg).to(dtype).expand(t.sizes()));
    return {t, allocation_of(t), 0, true};
  }
  const size_t offset = byte_offset(iter, arg);
  if (iter.dtype(arg) == dtype && dense_in_iter_order(iter, arg) && offset % word == 0) {
    return {iter.tensor(arg), allocation_of(iter.tensor(arg)), offset, false};
  }
  at::Tensor t = device_temp(iter, dtype);
  t.copy_(iter_view(iter, arg));  // on the device: broadcast, gather and cast in one pass
  return {t, allocation_of(t), 0, true};
}

Port output_port(const at::TensorIteratorBase& iter, int arg, at::ScalarType dtype, int word) {
  const at::Tensor& t = iter.tensor(arg);
  const size_t offset = byte_offset(iter, arg);
  Allocation* a = allocation_of(t);
  const size_t end = offset + iter.numel() * iter.element_size(arg);
  // A wide port writes whole words: the last one may only spill into this allocation's padding.
  const bool whole_words = end % word == 0 || (a != nullptr && end == a->requested);
  if (iter.dtype(arg) == dtype && dense_in_iter_order(iter, arg) && offset % word == 0 && whole_words) {
    return {t, a, offset, false};
  }
  at::Tensor tmp = device_temp(iter, dtype);
  return {tmp, allocation_of(tmp), 0, true};
}

// The dtype of a kernel port, from the image's argument metadata (element kind and size).
at::ScalarType port_dtype(const KernelArgInfo& arg, const std::string& kernel) {
  switch (arg.type) {
    case 'f':
      if (arg.elem_bytes == 2) return at::kHalf;
      if (arg.elem_bytes == 4) return at::kFloat;
      if (arg.elem_bytes == 8) return at::kDouble;
      break;
    case 'c':
      if (arg.elem_bytes == 8) return at::kComplexFloat;
      break;
    case 'i':
      if (arg.elem_bytes == 4) return at::kInt;
      if (arg.elem_bytes == 8) return at::kLong;
      break;
    case 'b': return at::kBool;
  }
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

}  // namespace

const KernelInfo& kernel_for(const KernelRef& kernel, at::ScalarType dtype, c10::Device where) {
  Device& dev = device(where.index());
  TORCH_CHECK(!dev.image_path().empty(), "no fpga device image is loaded on ", where,
              ": build one with `scons`, then `import aten_fpga` (or aten_fpga.load(path))");
  const char* dname = dtype_name(dtype);
  const std::string name = std::string("v_") + kernel.name + "_" + (dname ? dname : "unsupported");
  const KernelInfo* info = dname ? dev.find_kernel(name) : nullptr;
  if (info == nullptr) throw KernelUnavailable(name);
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


void fpga_kernel(at::TensorIteratorBase& iter, const KernelRef& kernel,
                 c10::ArrayRef<std::optional<c10::Scalar>> scalars) {
  const at::ScalarType dtype = kernel.dtype_operand < 0 ? iter.common_dtype() : iter.dtype(kernel.dtype_operand);
  const c10::Device where = iter.device(0);
  Device& dev = device(where.index());
  const KernelInfo* info = &kernel_for(kernel, dtype, where);
  const std::string& name = info->name;

  const int nt = iter.ntensors(), nout = iter.noutputs();
  const size_t nscalars = info->args.size() - nt - 1;  // pointers, scalars, then size
  TORCH_CHECK(info->args.size() >= static_cast<size_t>(nt) + 1 && nscalars == scalars.size(), name,
              " takes ", info->args.size(), " arguments; the op passes ", nt, " tensors and ", scalars.size(),
              " scalars (template and stub disagree: fix kernels/hls/.../ops.yaml 'scalars')");
  for (size_t a = 0; a < info->args.size(); ++a) {
    TORCH_CHECK(info->args[a].is_pointer == (a < static_cast<size_t>(nt)), name, ": argument ", info->args[a].name,
                " should be ", a < static_cast<size_t>(nt) ? "a pointer (one per tensor: inputs, then outputs)"
                                                           : "a scalar (scalars and size follow the pointers)");
  }
  const int64_t n = iter.numel();
  if (n == 0) return;
  c10::DeviceGuard guard(where);

  // Kernel ports in order: the inputs, then the outputs; each in the dtype the kernel declares.
  std::vector<Port> ports(nt);
  std::vector<size_t> elsize(nt);
  for (int p = 0; p < nt; ++p) {
    const int arg = p < nt - nout ? nout + p : p - (nt - nout);
    const at::ScalarType pdtype = port_dtype(info->args[p], name);
    elsize[p] = c10::elementSize(pdtype);
    const int word = std::max<int>(info->args[p].bytes, iter.element_size(arg));
    ports[p] = arg < nout ? output_port(iter, arg, pdtype, word) : input_port(iter, arg, pdtype, word);
  }
  for (int p = 0; p < nt - nout; ++p) sync_to_device(ports[p].alloc);
  for (int p = nt - nout; p < nt; ++p) prepare_device_write(ports[p].alloc, ports[p].offset, n * elsize[p]);

  std::vector<uint64_t> scalar_bits;
  for (size_t s = 0; s < nscalars; ++s) {
    scalar_bits.push_back(encode_scalar(scalar_or_default(kernel, scalars, s, dtype), info->args[nt + s]));
  }

  // Split the range across the compute units, at whole port words (every port has as many
  // elements per word: a vector port's lanes).
  const int64_t lanes = std::max<int64_t>(1, info->args[0].bytes / static_cast<int64_t>(elsize[0]));
  const int64_t cus = std::max<int64_t>(1, std::min<int64_t>(info->cus, n / kMinElementsPerCU));
  const int64_t per_cu = (n + cus - 1) / cus;
  const int64_t chunk = (per_cu + lanes - 1) / lanes * lanes;
  std::vector<std::vector<KernelArg>> runs;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    std::vector<KernelArg> args;
    for (int p = 0; p < nt; ++p) args.push_back({ports[p].alloc->buffer.get(), ports[p].offset + start * elsize[p], 0});
    for (uint64_t bits : scalar_bits) args.push_back({nullptr, 0, bits});
    args.push_back({nullptr, 0, static_cast<uint64_t>(len)});
    runs.push_back(std::move(args));
  }
  dev.run(*info, runs);

  for (int p = nt - nout; p < nt; ++p) {
    mark_device_written(ports[p].alloc);
    if (ports[p].is_temp) {
      const int arg = p - (nt - nout);
      iter_view(iter, arg).copy_(ports[p].tensor);  // on the device: scatter and cast back
    }
  }
}

}  // namespace aten_fpga
