// aten_fpga._C: the Python face of the host runtime. Importing it registers the device
// (allocator, guard, hooks, minimal ops, fallback and the generated kernels) with PyTorch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "runtime.h"
#include "stats.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "aten_fpga host runtime";
  m.def("device_count", &aten_fpga::device_count, "number of fpga devices");
  m.def("current_device", [] { return static_cast<int>(aten_fpga::current_device()); });
  m.def("set_device", [](int i) { aten_fpga::set_current_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("load_image", &aten_fpga::load_image, py::arg("path"),
        "load a device image (emulated .so) on every fpga device");
  m.def("image_path", [](int i) { return aten_fpga::device(i).image_path(); }, py::arg("device") = 0);
  m.def("device_name", [](int i) { return aten_fpga::device(i).name(); }, py::arg("device") = 0);
  m.def("kernel_names", [](int i) { return aten_fpga::device(i).kernel_names(); }, py::arg("device") = 0);
  m.def("kernel_cus", [](const std::string& name, int i) {
    const auto* k = aten_fpga::device(i).find_kernel(name);
    return k ? k->cus : 0;
  }, py::arg("name"), py::arg("device") = 0);
  m.def("stats", [] {
    py::dict out;
    for (const auto& [op, c] : aten_fpga::stats_snapshot()) out[py::str(op)] = py::make_tuple(c.fpga_runs, c.cpu_fallbacks);
    return out;
  }, "{op: (fpga_runs, cpu_fallbacks)}");
  m.def("reset_stats", &aten_fpga::reset_stats);
}
