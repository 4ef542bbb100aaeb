#include "emu_device.h"

#include <dlfcn.h>

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "../../kernels/hls/emu/image.h"

namespace aten_fpga {

// Device memory is page aligned, like a card's buffer objects; the host shadow is separate.
struct EmuDevice::EmuBuffer final : Buffer {
  EmuDevice* owner;
  void* device;
  EmuBuffer(EmuDevice* o, size_t n) : owner(o) {
    bytes = n;
    host = std::aligned_alloc(4096, n);
    device = std::aligned_alloc(4096, n);
  }
  ~EmuBuffer() override {
    std::free(host);
    std::free(device);
    owner->release(bytes);
  }
};

EmuDevice::EmuDevice(int index, size_t capacity) : index_(index), capacity_(capacity) {}

EmuDevice::~EmuDevice() {
  stop_cu_threads();
  // The image library stays loaded: tensors freed at interpreter exit may still run destructors.
}

std::string EmuDevice::name() const {
  return "aten_fpga emulated device " + std::to_string(index_);
}

std::unique_ptr<Buffer> EmuDevice::allocate(size_t bytes) {
  size_t used = used_.fetch_add(bytes) + bytes;
  if (used > capacity_) {
    used_.fetch_sub(bytes);
    TORCH_CHECK_WITH(OutOfMemoryError, false, "emulated fpga:", index_, ": ", used - bytes, " of ", capacity_,
                     " bytes in use, no room for ", bytes, " more");
  }
  auto b = std::make_unique<EmuBuffer>(this, bytes);
  if (b->host == nullptr || b->device == nullptr) {
    b.reset();  // releases the accounting
    TORCH_CHECK_WITH(OutOfMemoryError, false, "fpga:", index_, ": the host could not back a ",
                     bytes, "-byte emulated device buffer");
  }
  return b;
}

void EmuDevice::release(size_t bytes) { used_.fetch_sub(bytes); }

void EmuDevice::to_device(Buffer& b, size_t offset, size_t n) {
  auto& e = static_cast<EmuBuffer&>(b);
  std::memcpy(static_cast<char*>(e.device) + offset, static_cast<char*>(e.host) + offset, n);
}

void EmuDevice::to_host(Buffer& b, size_t offset, size_t n) {
  auto& e = static_cast<EmuBuffer&>(b);
  std::memcpy(static_cast<char*>(e.host) + offset, static_cast<char*>(e.device) + offset, n);
}

void EmuDevice::copy_on_device(Buffer& dst, size_t dst_offset, Buffer& src, size_t src_offset, size_t n) {
  std::memmove(static_cast<char*>(static_cast<EmuBuffer&>(dst).device) + dst_offset,
               static_cast<char*>(static_cast<EmuBuffer&>(src).device) + src_offset, n);
}

void* EmuDevice::device_address(Buffer& b) { return static_cast<EmuBuffer&>(b).device; }

void EmuDevice::load_image(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(lib != nullptr, "cannot load emulated device image '", path, "': ", dlerror(),
              ". Build it with `scons` (or `scons opt=N` for another level).");
  using ListFn = const afpga_emu_kernel* (*)(int*);
  using IntFn = int (*)();
  auto list = reinterpret_cast<ListFn>(dlsym(lib, "afpga_emu_kernels"));
  auto cus = reinterpret_cast<IntFn>(dlsym(lib, "afpga_emu_cus"));
  TORCH_CHECK(list && cus, "'", path, "' is not an aten_fpga emulated image (no afpga_emu_kernels)");

  std::unordered_map<std::string, KernelInfo> kernels;
  int count = 0;
  const afpga_emu_kernel* ks = list(&count);
  for (int i = 0; i < count; ++i) {
    KernelInfo info;
    info.name = ks[i].name;
    info.cus = cus();
    info.handle = &ks[i];
    std::stringstream names(ks[i].arg_names);
    for (int a = 0; a < ks[i].nargs; ++a) {
      std::string arg_name;
      std::getline(names, arg_name, ',');
      const auto& d = ks[i].args[a];
      info.args.push_back({arg_name, d.is_pointer != 0, d.bytes, d.type});
    }
    kernels.emplace(info.name, std::move(info));
  }
  {
    std::lock_guard<std::mutex> g(run_mu_);
    stop_cu_threads();
    kernels_ = std::move(kernels);
    library_ = lib;  // an earlier image stays mapped: its kernels may be referenced by caches
    image_path_ = path;
    start_cu_threads(cus() - 1);
  }
}

const KernelInfo* EmuDevice::find_kernel(const std::string& name) const {
  auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> EmuDevice::kernel_names() const {
  std::vector<std::string> names;
  for (const auto& kv : kernels_) names.push_back(kv.first);
  return names;
}

void EmuDevice::run_on_cu(const KernelInfo& k, int cu, const std::vector<KernelArg>& args) {
  uint64_t slots[CuActivity::kMaxArgs];
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& a = args[i];
    slots[i] = a.buffer ? reinterpret_cast<uintptr_t>(static_cast<char*>(device_address(*a.buffer)) + a.offset)
                        : a.bits;
  }
  const int64_t start = now_ns();
  static_cast<const afpga_emu_kernel*>(k.handle)->invoke(slots);
  record_cu_run(cu, start, now_ns(), std::hash<std::thread::id>()(std::this_thread::get_id()), args);
}

void EmuDevice::run(const KernelInfo& k, const std::vector<std::vector<KernelArg>>& runs) {
  TORCH_CHECK(!runs.empty() && static_cast<int>(runs.size()) <= k.cus, k.name, ": ", runs.size(), " runs for ",
              k.cus, " CUs");
  for (const auto& args : runs) {
    TORCH_CHECK(args.size() == k.args.size(), k.name, " takes ", k.args.size(), " arguments, got ", args.size());
  }
  std::lock_guard<std::mutex> owner(run_mu_);
  if (runs.size() > 1) {
    std::unique_lock<std::mutex> g(mu_);
    for (size_t i = 1; i < runs.size(); ++i) {
      pending_[i - 1] = [this, &k, &runs, i] { run_on_cu(k, static_cast<int>(i), runs[i]); };
    }
    outstanding_ = runs.size() - 1;
    cv_.notify_all();
  }
  run_on_cu(k, 0, runs[0]);  // CU 0 runs in this thread
  if (runs.size() > 1) {
    std::unique_lock<std::mutex> g(mu_);
    done_cv_.wait(g, [this] { return outstanding_ == 0; });
  }
}

void EmuDevice::start_cu_threads(int n) {
  stopping_ = false;
  pending_.assign(n, nullptr);
  for (int w = 0; w < n; ++w) {
    cu_threads_.emplace_back([this, w] {
      std::unique_lock<std::mutex> g(mu_);
      for (;;) {
        cv_.wait(g, [this, w] { return stopping_ || pending_[w] != nullptr; });
        if (stopping_) return;
        auto job = std::move(pending_[w]);
        pending_[w] = nullptr;
        g.unlock();
        job();
        g.lock();
        if (--outstanding_ == 0) done_cv_.notify_one();
      }
    });
  }
}

void EmuDevice::stop_cu_threads() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : cu_threads_) t.join();
  cu_threads_.clear();
}

}  // namespace aten_fpga
