// aten_fpga._C: the Python face of the host runtime. Importing it registers the device
// (allocator, guard, hooks, minimal ops, fallback and the generated kernels) with PyTorch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/Generator.h>

#include "afpga_abi.h"  // generated from codegen/abi.py: AFPGA_LEVELS
#include "allocator.h"
#include "generator.h"
#include "pinned.h"
#include "runtime.h"
#include "projection.h"
#include "stats.h"
#include "xrt_device.h"

namespace py = pybind11;

namespace aten_fpga {
void register_fused(py::module_& m);  // fpga_fused.cpp: torch.compile's fused kernels
}

namespace {

py::dict memory_stats_dict(int device) {
  const aten_fpga::MemoryStats s = aten_fpga::memory_stats(device);
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes;
  d["allocated_bytes.all.peak"] = s.allocated_bytes_peak;
  d["requested_bytes.all.current"] = s.requested_bytes;
  d["requested_bytes.all.peak"] = s.requested_bytes_peak;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.reserved_bytes_peak;
  d["allocation.all.current"] = s.allocations;
  d["allocation.all.peak"] = s.allocations_peak;
  d["allocation.all.allocated"] = s.total_allocations;
  d["allocation.all.freed"] = s.total_frees;
  d["segment.all.allocated"] = s.device_allocs;
  d["segment.all.freed"] = s.device_frees;
  d["num_cache_hits"] = s.cache_hits;
  d["num_alloc_retries"] = s.alloc_retries;
  d["num_ooms"] = s.ooms;
  return d;
}

py::list cu_activity(int device) {
  py::list out;
  for (const auto& a : aten_fpga::device(device).cu_activity()) {
    py::list args;
    for (int i = 0; i < a.last_nargs; ++i) {
      const auto& arg = a.last_args[i];
      args.append(arg.buffer ? py::make_tuple("buffer", arg.offset) : py::make_tuple("scalar", arg.bits));
    }
    py::dict d;
    d["runs"] = a.runs;
    d["busy_ns"] = a.busy_ns;
    d["last_start_ns"] = a.last_start_ns;
    d["last_end_ns"] = a.last_end_ns;
    d["last_thread"] = a.last_thread;
    d["last_args"] = args;
    out.append(d);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "aten_fpga host runtime";
#define AFPGA_LEVEL_NAME(level, name) {level, name},
  m.attr("levels") = std::map<int, std::string>{AFPGA_LEVELS(AFPGA_LEVEL_NAME)};  // the ABI table's XCL_OPT levels
#undef AFPGA_LEVEL_NAME
  m.def("device_kind", &aten_fpga::device_kind, "the device layer serving fpga: 'emu' or 'xrt'");
  m.def("xrt_built", &aten_fpga::xrt_built, "whether this build has the XRT device");
  m.def("device_count", &aten_fpga::device_count, "number of fpga devices");
  m.def("default_generator", [](int i) {
    // The same Python object every time, as torch.cuda.default_generators.
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(aten_fpga::default_fpga_generator(static_cast<c10::DeviceIndex>(i))));
  }, py::arg("device"), "the default Philox generator of fpga device i");
  m.def("current_device", [] { return static_cast<int>(aten_fpga::current_device()); });
  m.def("set_device", [](int i) { aten_fpga::set_current_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("load_image", &aten_fpga::load_image, py::arg("path"),
        "load a device image (emulated .so or xclbin) on every fpga device");
  m.def("image_path", [](int i) { return aten_fpga::device(i).image_path(); }, py::arg("device") = 0);
  m.def("device_name", [](int i) { return aten_fpga::device(i).name(); }, py::arg("device") = 0);
  m.def("device_capacity", [](int i) { return aten_fpga::device(i).capacity(); }, py::arg("device") = 0);
  m.def("kernel_names", [](int i) { return aten_fpga::device(i).kernel_names(); }, py::arg("device") = 0);
  m.def("kernel_cus", [](const std::string& name, int i) {
    const auto* k = aten_fpga::device(i).find_kernel(name);
    return k ? k->cus : 0;
  }, py::arg("name"), py::arg("device") = 0);
  m.def("kernel_args", [](const std::string& name, int i) {
    std::vector<py::tuple> args;
    if (const auto* k = aten_fpga::device(i).find_kernel(name)) {
      for (const auto& a : k->args) args.push_back(py::make_tuple(a.name, a.is_pointer, a.bytes, std::string(1, a.type)));
    }
    return args;
  }, py::arg("name"), py::arg("device") = 0, "a kernel's arguments: (name, is_pointer, bytes, type)");
  m.def("cu_activity", &cu_activity, py::arg("device") = 0,
        "per compute unit: runs, busy time, and the last run's interval, host thread and arguments");
  m.def("stats", [] {
    py::dict out;
    for (const auto& [op, c] : aten_fpga::stats_snapshot()) {
      py::dict kernels;
      for (const auto& [k, n] : c.kernels) {
        py::list sizes;
        for (const auto& [named, count] : n.sizes) {
          py::dict d;
          for (const auto& [name, value] : named) d[py::str(name)] = value;
          sizes.append(py::make_tuple(d, count));
        }
        kernels[py::str(k)] = py::make_tuple(n.launches, n.bytes, n.work, sizes);
      }
      out[py::str(op)] = py::make_tuple(c.fpga_runs, c.cpu_fallbacks, c.bytes_to_device, c.bytes_to_host,
                                        c.fpga_ns, c.cpu_ns, c.launches, kernels, c.kernel_bytes);
    }
    return out;
  }, "{op: (fpga_runs, cpu_fallbacks, bytes_to_device, bytes_to_host, fpga_ns, cpu_ns, launches, "
     "{kernel: (launches, bytes, work, [({size argument: value}, launches)])}, kernel_bytes)}");
  m.def("set_work_specs", &aten_fpga::set_work_specs, py::arg("specs"),
        "per kernel, the first list of size-argument names it has all of makes a launch's work (\"2^x\": 2**x)");
  m.def("set_record_sizes", &aten_fpga::set_record_sizes, py::arg("on"),
        "count every launch's size arguments per op and kernel (stats()) while on");
  m.def("set_projection", [](std::string platform, const std::map<std::string, std::tuple<std::vector<double>, double, double>>& kernels) {
    std::unordered_map<std::string, aten_fpga::KernelProjection> table;
    for (const auto& [name, k] : kernels) {
      table.emplace(name, aten_fpga::KernelProjection{std::get<0>(k), std::get<1>(k), std::get<2>(k)});
    }
    aten_fpga::set_projection(std::move(platform), std::move(table));
  }, py::arg("platform"), py::arg("kernels"),
     "{kernel: (seconds at 2**i bytes, fixed seconds, seconds per work)}: the projected seconds torch.profiler "
     "ranges carry (an empty table removes them)");
  m.def("reset_stats", &aten_fpga::reset_stats);
  m.def("memory_stats", &memory_stats_dict, py::arg("device") = 0);
  m.def("reset_peak_memory_stats", &aten_fpga::reset_peak_memory_stats, py::arg("device") = 0);
  m.def("empty_cache", [] {
    aten_fpga::empty_cache();
    aten_fpga::empty_pinned_cache();
  }, "free the cached blocks of device memory and of pinned host memory");
  aten_fpga::register_fused(m);
}
