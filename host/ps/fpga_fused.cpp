// Fused kernels: the kernels torch.compile's backend (aten_fpga/compile) generates from a model's
// graph. On the emulated device each is compiled on demand into its own shared object, with the
// image's ABI (kernels/hls/emu/image.h), and loaded here beside the image; on a card it is part of
// the loaded xclbin (built with `scons fused=<dir>`). Either way it runs through the one launch
// path, KernelLaunch, so launches, bytes, time and the profiler see it like any table kernel;
// report() books its launches to the op "aten_fpga::fused".
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/core/DeviceGuard.h>

#include <map>
#include <memory>
#include <mutex>

#include "../../kernels/hls/emu/image.h"
#include "allocator.h"
#include "fpga_gemm.h"
#include "launch.h"
#include "runtime.h"

namespace py = pybind11;

namespace aten_fpga {
namespace {

std::mutex fused_mu;
// Kernels loaded from fused shared objects, by name; a KernelInfo's address stays valid (launches
// keep a pointer to its name until the op books them).
std::map<std::string, std::unique_ptr<KernelInfo>>& loaded() {
  static auto* kernels = new std::map<std::string, std::unique_ptr<KernelInfo>>();
  return *kernels;
}

// Kernels replaced by the same kernel at another image level, kept alive.
std::vector<std::unique_ptr<KernelInfo>>& retired() {
  static auto* kernels = new std::vector<std::unique_ptr<KernelInfo>>();
  return *kernels;
}

// dlopens `path` (a fused kernel object) and registers its kernels; returns their names.
std::vector<std::string> load_fused(const std::string& path) {
  TORCH_CHECK(device_kind() == "emu", "fused kernel objects run on the emulated device; on a card the fused "
              "kernels are part of the xclbin (build it with `scons fused=<dir>`)");
  // Never closed: a kernel's code must outlive every KernelInfo that points at it.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(lib != nullptr, "cannot load the fused kernels '", path, "': ", dlerror(),
              ". Delete it (the compile cache, ATEN_FPGA_CACHE) to have it rebuilt.");
  using ListFn = const afpga_emu_kernel* (*)(int*);
  auto list = reinterpret_cast<ListFn>(dlsym(lib, "afpga_emu_kernels"));
  TORCH_CHECK(list, "'", path, "' holds no aten_fpga kernels (no afpga_emu_kernels)");
  int count = 0;
  const afpga_emu_kernel* compiled = list(&count);
  std::vector<std::string> names;
  std::lock_guard<std::mutex> g(fused_mu);
  for (int i = 0; i < count; ++i) {
    const afpga_emu_kernel& code = compiled[i];
    names.emplace_back(code.name);
    auto& slot = loaded()[code.name];
    if (slot && slot->handle == &code) continue;  // this object's kernel, loaded already
    // The same kernel built for another image level (the loaded image changed): this object's
    // replaces it; the old KernelInfo is kept, since a launch may still point at it.
    if (slot) retired().push_back(std::move(slot));
    auto info = std::make_unique<KernelInfo>();
    info->name = code.name;
    // A fused GEMM gets the table GEMM's compute units (host threads, as the image has them: it
    // may run in bands of rows); a fused chain is one instance, its dataflow stages the parallelism.
    info->cus = 1;
    const KernelInfo* gemm = std::string(code.name).rfind("v_fused_gemm_", 0) == 0
                                 ? device(0).find_kernel("v_gemm_float32") : nullptr;
    if (gemm != nullptr) info->cus = gemm->cus;
    info->handle = &code;
    std::string arg_names = code.arg_names;
    for (int a = 0; a < code.nargs; ++a) {
      const size_t comma = arg_names.find(',');
      const afpga_emu_arg& c = code.args[a];
      info->args.push_back({arg_names.substr(0, comma), c.is_pointer != 0, c.bytes, c.type, c.elem_bytes});
      arg_names = comma == std::string::npos ? "" : arg_names.substr(comma + 1);
    }
    slot = std::move(info);
  }
  return names;
}

// The fused kernel `name` for the device `index`: loaded on demand (emulator), or in the image.
const KernelInfo* find_fused(const std::string& name, int index) {
  if (device_kind() == "emu") {
    std::lock_guard<std::mutex> g(fused_mu);
    auto it = loaded().find(name);
    if (it != loaded().end()) return it->second.get();
  }
  return device(index).find_kernel(name);
}

// A port of fused kernel `name`: a unit-stride tensor of device `where` starting on a port word.
Allocation* port(const std::string& name, const at::Tensor& t, c10::Device where) {
  TORCH_CHECK(t.device() == where && t.is_contiguous() && byte_offset(t) % kWordBytes == 0, name, ": operand on ",
              t.device(), " is not a port-aligned contiguous tensor of ", where);
  return allocation_of(t);
}

// Runs `launch_on(launch)` for fused kernel `name` on `where`, booked to the op "aten_fpga::fused".
template <typename F>
void launch_fused(const std::string& name, c10::Device where, F launch_on) {
  const KernelInfo* info = find_fused(name, where.index());
  TORCH_CHECK(info != nullptr, "fused kernel ", name, " is not loaded on ", where);
  static OpStats& op = op_stats("aten_fpga::fused");
  const LaunchMark mark = launch_mark();
  {
    c10::DeviceGuard guard(where);
    KernelLaunch launch(*info, where);
    launch_on(launch);
  }
  op.fpga_runs.add_run(mark);
}

// Runs fused kernel `name` once: its ports are `inputs` then `outputs` (unit-stride fpga tensors,
// each starting on a port word), then the `sizes`.
void run_fused(const std::string& name, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
               const std::vector<int64_t>& sizes) {
  TORCH_CHECK(!outputs.empty(), name, ": a fused kernel writes at least one output");
  const c10::Device where = outputs[0].device();
  launch_fused(name, where, [&](KernelLaunch& launch) {
    launch.expect_args(inputs.size() + outputs.size() + sizes.size(),
                       "the fused kernel's source and aten_fpga/compile disagree: clear ATEN_FPGA_CACHE");
    RunArgs run = launch.add_run();
    for (const at::Tensor& t : inputs) {
      Allocation* a = port(name, t, where);
      sync_to_device(a);
      run.buffer(a, byte_offset(t));
    }
    for (const at::Tensor& t : outputs) {
      Allocation* a = port(name, t, where);
      prepare_device_write(a, byte_offset(t), t.nbytes());
      run.buffer(a, byte_offset(t));
    }
    for (int64_t s : sizes) run.size(s);
    launch.run();
    for (const at::Tensor& t : outputs) mark_device_written(allocation_of(t));
  });
}

// Runs fused GEMM `name` once: c = alpha * a @ b + beta * self with its epilogue, whose ports are
// `inputs` (self among them) then `outputs` (c first); a and b are addressed as the GEMM driver does.
void run_fused_gemm_kernel(const std::string& name, const at::Tensor& a, const at::Tensor& b, double alpha,
                           double beta, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
                           const std::vector<int64_t>& band_strides) {
  TORCH_CHECK(!outputs.empty(), name, ": a fused GEMM writes c");
  const c10::Device where = outputs[0].device();
  TORCH_CHECK(a.device() == where && b.device() == where, name, ": a and b must be on ", where);
  // Its ports are laid out as c, whose rows may be padded to whole words: a unit column stride and
  // a port-word start (the driver checks c's pitch).
  for (const auto* ports : {&inputs, &outputs}) {
    for (const at::Tensor& t : *ports) {
      TORCH_CHECK(t.device() == where && (t.dim() == 0 || t.stride(-1) == 1 || t.numel() <= 1) &&
                      byte_offset(t) % kWordBytes == 0,
                  name, ": operand on ", t.device(), " is not a port-aligned row-major tensor of ", where);
    }
  }
  launch_fused(name, where,
               [&](KernelLaunch& launch) { run_fused_gemm(launch, a, b, alpha, beta, inputs, outputs, band_strides); });
}

}  // namespace

void register_fused(py::module_& m) {
  m.def("fused_load", &load_fused, py::arg("path"), "load a fused kernel object; the names of its kernels");
  m.def("fused_available", [](const std::string& name, int index) { return find_fused(name, index) != nullptr; },
        py::arg("name"), py::arg("device") = 0, "whether fused kernel `name` can run on the device");
  m.def("fused_run", &run_fused, py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("sizes"),
        "run a fused kernel: its ports are inputs then outputs, then its size arguments");
  m.def("fused_gemm_run", &run_fused_gemm_kernel, py::arg("name"), py::arg("a"), py::arg("b"), py::arg("alpha"),
        py::arg("beta"), py::arg("inputs"), py::arg("outputs"), py::arg("band_strides"),
        "run a fused GEMM: c = alpha * a @ b + beta * self, its epilogue's ports are inputs then outputs (c first)");
}

}  // namespace aten_fpga
