#include "xrt_device.h"

#include "engine_members.h"
#include "xclbin.h"

#include <c10/util/Exception.h>

#ifdef AFPGA_WITH_XRT

#include <experimental/xrt_system.h>
#include <experimental/xrt_xclbin.h>
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <thread>
#include <unordered_map>

namespace aten_fpga {
namespace {

struct XrtBuffer final : Buffer {
  xrt::bo bo;
};

// One xrt::kernel per compute unit ("name:{cu}"), so that run i goes to CU i.
struct XrtKernel {
  std::vector<xrt::kernel> cus;
};

class XrtDevice final : public Device {
 public:
  explicit XrtDevice(int index) : index_(index) {
    try {
      device_ = xrt::device(static_cast<unsigned int>(index));
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "XRT cannot open device ", index, ": ", e.what(),
                  ". Check the card with `xbutil examine`, or unset ATEN_FPGA_DEVICE for the emulated device.");
    }
  }

  std::string name() const override {
    std::string card;
    try {
      card = device_.get_info<xrt::info::device::name>();
    } catch (const std::exception&) {
      card = std::getenv("XCL_EMULATION_MODE") ? std::string("XRT emulation (") + std::getenv("XCL_EMULATION_MODE") + ")"
                                               : "unnamed";
    }
    return "aten_fpga XRT device " + std::to_string(index_) + ": " + card;
  }

  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    auto b = std::make_unique<XrtBuffer>();
    try {
      b->bo = xrt::bo(device_, bytes, xrt::bo::flags::normal, group_);
      b->host = b->bo.map();
    } catch (const std::exception& e) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "XRT device ", index_, " cannot allocate a ", bytes,
                       "-byte buffer in memory group ", group_, ": ", e.what());
    }
    b->bytes = bytes;
    return b;
  }

  std::unique_ptr<Buffer> allocate_pinned(size_t bytes) override {
    auto b = std::make_unique<XrtBuffer>();
    try {
      b->bo = xrt::bo(device_, bytes, xrt::bo::flags::host_only, group_);
      b->host = b->bo.map();
    } catch (const std::exception& e) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "XRT device ", index_, " cannot allocate ", bytes,
                       " bytes of pinned (host-only) memory: ", e.what());
    }
    b->bytes = bytes;
    return b;
  }

  size_t capacity() const override { return capacity_; }

  void to_device(Buffer& b, size_t offset, size_t n) override {
    static_cast<XrtBuffer&>(b).bo.sync(XCL_BO_SYNC_BO_TO_DEVICE, n, offset);
  }
  void to_host(Buffer& b, size_t offset, size_t n) override {
    static_cast<XrtBuffer&>(b).bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE, n, offset);
  }
  void copy_on_device(Buffer& dst, size_t dst_offset, Buffer& src, size_t src_offset, size_t n) override {
    static_cast<XrtBuffer&>(dst).bo.copy(static_cast<XrtBuffer&>(src).bo, n, src_offset, dst_offset);
  }
  void* device_address(Buffer&) override { return nullptr; }  // only kernels and DMA reach card memory

  void load_image(const std::string& path) override {
    std::unordered_map<std::string, KernelInfo> kernels;
    std::vector<std::unique_ptr<XrtKernel>> handles;
    int group = 0;
    size_t capacity = 0;
    try {
      xrt::xclbin x(path);
      // Our reader gives what the xrt::xclbin API lacks: each argument's port width (a vector
      // port's lanes) and element type.
      const xclbin::Image image = xclbin::read(path);
      const xrt::uuid uuid = device_.load_xclbin(x);
      for (const auto& mem : x.get_mems()) {
        if (mem.get_used()) capacity += static_cast<size_t>(mem.get_size_kb()) * 1024;
      }
      for (const auto& k : x.get_kernels()) {
        KernelInfo info;
        info.name = k.get_name();
        const auto described = std::find_if(image.kernels.begin(), image.kernels.end(),
                                            [&](const xclbin::Kernel& d) { return d.name == info.name; });
        TORCH_CHECK(described != image.kernels.end(), path, ": kernel ", info.name, " is missing from its metadata");
        for (const xclbin::Arg& a : described->args) {
          const int bytes = a.is_pointer ? xclbin::word_bytes(a) : static_cast<int>(a.size);
          info.args.push_back({a.name, a.is_pointer, bytes, xclbin::encoding(a.type),
                               a.is_pointer ? xclbin::element_bytes(a.type) : bytes});
        }
        auto handle = std::make_unique<XrtKernel>();
        for (const auto& cu : k.get_cus()) {
          const std::string ip = cu.get_name();  // "kernel:cu"
          handle->cus.emplace_back(device_, uuid, info.name + ":{" + ip.substr(ip.find(':') + 1) + "}");
        }
        TORCH_CHECK(!handle->cus.empty(), path, ": kernel ", info.name, " has no compute unit in IP_LAYOUT");
        info.cus = static_cast<int>(handle->cus.size());
        info.handle = handle.get();
        if (kernels.empty()) {
          for (size_t i = 0; i < info.args.size(); ++i) {
            if (info.args[i].is_pointer) {
              group = handle->cus[0].group_id(static_cast<int>(i));
              break;
            }
          }
        }
        handles.push_back(std::move(handle));
        kernels.emplace(info.name, std::move(info));
      }
      add_members(image, path, kernels);  // run through their engine's xrt::kernel objects above
    } catch (const c10::Error&) {
      throw;
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "XRT cannot load '", path, "' on device ", index_, ": ", e.what());
    }
    kernels_ = std::move(kernels);
    // Earlier images' kernel objects stay: KernelInfo caches of other threads may still name them.
    for (auto& h : handles) handles_.push_back(std::move(h));
    group_ = group;
    capacity_ = capacity;
    image_path_ = path;
  }

  const std::string& image_path() const override { return image_path_; }

  const KernelInfo* find_kernel(const std::string& name) const override {
    auto it = kernels_.find(name);
    return it == kernels_.end() ? nullptr : &it->second;
  }

  std::vector<std::string> kernel_names() const override {
    std::vector<std::string> names;
    for (const auto& kv : kernels_) names.push_back(kv.first);
    return names;
  }

 protected:
  void launch(const KernelInfo& k, const KernelRuns& runs, const KernelRuns& passed) override {
    const auto& handle = *static_cast<const XrtKernel*>(k.handle);
    TORCH_CHECK(!runs.empty() && runs.size() <= handle.cus.size(), k.name, ": ", runs.size(), " runs for ",
                handle.cus.size(), " CUs");
    const uint64_t thread = std::hash<std::thread::id>()(std::this_thread::get_id());
    std::vector<xrt::run> started;
    std::vector<int64_t> start_ns;
    try {
      for (size_t cu = 0; cu < runs.size(); ++cu) {
        xrt::run r(handle.cus[cu]);
        const auto& args = runs[cu];
        TORCH_CHECK(args.size() == k.args.size(), k.name, " takes ", k.args.size(), " arguments, got ", args.size());
        for (size_t i = 0; i < args.size(); ++i) {
          if (args[i].buffer != nullptr) {
            const xrt::bo& bo = static_cast<XrtBuffer*>(args[i].buffer)->bo;
            if (args[i].offset == 0) {
              r.set_arg(static_cast<int>(i), bo);
            } else {  // a sub-buffer: the kernel sees its start as the argument's address
              r.set_arg(static_cast<int>(i), xrt::bo(bo, bo.size() - args[i].offset, args[i].offset));
            }
          } else {
            r.set_arg(static_cast<int>(i), static_cast<const void*>(&args[i].bits), static_cast<size_t>(k.args[i].bytes));
          }
        }
        start_ns.push_back(now_ns());
        r.start();
        started.push_back(std::move(r));
      }
      for (size_t cu = 0; cu < started.size(); ++cu) {
        const auto state = started[cu].wait();
        record_cu_run(static_cast<int>(cu), start_ns[cu], now_ns(), thread, passed[cu]);
        TORCH_CHECK(state == ERT_CMD_STATE_COMPLETED, k.name, " on CU ", cu, " ended in state ", static_cast<int>(state),
                    " (4 is completed)");
      }
    } catch (const c10::Error&) {
      for (auto& r : started) r.wait();  // a run must not outlive the buffers it writes
      throw;
    } catch (const std::exception& e) {
      for (auto& r : started) r.wait();
      TORCH_CHECK(false, "XRT run of ", k.name, " failed: ", e.what());
    }
  }

 private:
  int index_;
  xrt::device device_;
  int group_ = 0;  // the memory bank group of the kernels' buffers (DDR[0] until an image says)
  size_t capacity_ = 0;  // bytes of the image's used memory banks; 0 until an image is loaded
  std::string image_path_;
  std::unordered_map<std::string, KernelInfo> kernels_;
  std::vector<std::unique_ptr<XrtKernel>> handles_;
};

}  // namespace

bool xrt_built() { return true; }

int xrt_device_count() {
  const int n = static_cast<int>(xrt::system::enumerate_devices());
  return n == 0 && std::getenv("XCL_EMULATION_MODE") != nullptr ? 1 : n;
}

std::unique_ptr<Device> make_xrt_device(int index) { return std::make_unique<XrtDevice>(index); }

}  // namespace aten_fpga

#else  // built without XRT

namespace aten_fpga {

bool xrt_built() { return false; }

int xrt_device_count() {
  TORCH_CHECK(false, "ATEN_FPGA_DEVICE=xrt, but aten_fpga was built without XRT: install libxrt-dev "
              "(apt-get install libxrt-dev) and rebuild with `scons`, or unset ATEN_FPGA_DEVICE for the emulated device");
}

std::unique_ptr<Device> make_xrt_device(int) { return nullptr; }

}  // namespace aten_fpga

#endif
