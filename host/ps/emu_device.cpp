#include "emu_device.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../../kernels/hls/emu/image.h"
#include "engine_members.h"
#include "xclbin.h"

namespace aten_fpga {

namespace {
// n bytes, page aligned, like a card's buffer objects. A buffer of a huge page or more is aligned
// to one and its whole huge pages are asked for (MADV_HUGEPAGE; transparent huge pages in the
// common `madvise` mode): a streaming kernel then walks 2 MiB pages, not 4 KiB ones, and its
// TLB misses stop costing it. A card's memory has no pages at all; this is the emulator getting
// out of the way (x.sum() of 64 MiB: 10-25% faster, docs/runtime.md).
void* allocate_pages(size_t n) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (n < kHuge) return std::aligned_alloc(4096, n);
  void* p = std::aligned_alloc(kHuge, n);  // glibc takes any size; the tail keeps small pages
  if (p != nullptr) madvise(p, n / kHuge * kHuge, MADV_HUGEPAGE);  // advice: ignored where unsupported
  return p;
}
}  // namespace

// The host shadow is separate from the device memory, except in pinned memory (no owner): there
// the device reads and writes the host's bytes themselves.
struct EmuDevice::EmuBuffer final : Buffer {
  EmuDevice* owner;
  void* device;
  EmuBuffer(EmuDevice* o, size_t n) : owner(o) {
    bytes = n;
    host = allocate_pages(n);
    device = o == nullptr ? host : allocate_pages(n);
  }
  ~EmuBuffer() override {
    std::free(host);
    if (owner == nullptr) return;
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

std::unique_ptr<Buffer> EmuDevice::allocate_pinned(size_t bytes) {
  auto b = std::make_unique<EmuBuffer>(nullptr, bytes);
  TORCH_CHECK_WITH(OutOfMemoryError, b->host != nullptr, "the host could not allocate ", bytes, " bytes of pinned memory");
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

namespace {
// Both take a path that contains a '/'.
std::string folder_of(const std::string& path) { return path.substr(0, path.find_last_of('/') + 1); }

// The xclbin that describes an emulated image: `path` itself, or, for the g++ image's .so, the
// torch.xclbin the build writes beside it.
std::string xclbin_of(const std::string& path) {
  const bool so = path.size() > 3 && path.compare(path.size() - 3, 3, ".so") == 0;
  return so ? folder_of(path) + "torch.xclbin" : path;
}
}  // namespace

void EmuDevice::load_image(const std::string& path) {
  // Kernels, arguments and CU counts come from the xclbin, as on an XRT device; the g++ image
  // it names supplies the code.
  const std::string given = path.find('/') == std::string::npos ? "./" + path : path;  // dlopen: not a search
  const std::string xclbin_path = xclbin_of(given);
  xclbin::Image xclbin;
  try {
    xclbin = xclbin::read(xclbin_path);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "cannot load fpga image '", path, "': ", e.what());
  }
  TORCH_CHECK(!xclbin.emulation_image.empty(), "'", xclbin_path, "' is a v++ image for ", xclbin.platform,
              ": it runs on a card through XRT, not on the emulated device. Load an emulated image "
              "(`scons target=emu` builds build/emu/opt<N>/torch.xclbin).");
  const std::string library = folder_of(xclbin_path) + xclbin.emulation_image;
  TORCH_CHECK(xclbin_path == given || library == given, "'", path, "' is not the image '", xclbin_path,
              "' names (", xclbin.emulation_image, "); load '", xclbin_path, "'");
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(lib != nullptr, "cannot load the emulated kernels '", library, "' named by '", xclbin_path,
              "': ", dlerror(), ". Build them with `scons` (or `scons opt=N` for another level).");
  using ListFn = const afpga_emu_kernel* (*)(int*);
  auto list = reinterpret_cast<ListFn>(dlsym(lib, "afpga_emu_kernels"));
  TORCH_CHECK(list, "'", library, "' is not an aten_fpga emulated image (no afpga_emu_kernels)");
  int count = 0;
  const afpga_emu_kernel* compiled = list(&count);

  std::unordered_map<std::string, KernelInfo> kernels;
  int max_cus = 1;
  const std::string rebuild = ". The xclbin and the g++ image are out of step: rebuild with `scons`.";
  for (const xclbin::Kernel& k : xclbin.kernels) {
    const afpga_emu_kernel* code = std::find_if(compiled, compiled + count,
                                                [&](const afpga_emu_kernel& c) { return k.name == c.name; });
    TORCH_CHECK(code != compiled + count, "'", xclbin_path, "' lists kernel ", k.name, " but '", library,
                "' lacks it", rebuild);
    TORCH_CHECK(!k.cus.empty(), "'", xclbin_path, "' has no compute unit of kernel ", k.name, rebuild);
    TORCH_CHECK(static_cast<int>(k.args.size()) == code->nargs, k.name, " has ", k.args.size(),
                " arguments in '", xclbin_path, "' but ", code->nargs, " in '", library, "'", rebuild);
    KernelInfo info;
    info.name = k.name;
    info.cus = static_cast<int>(k.cus.size());
    info.handle = code;
    for (size_t a = 0; a < k.args.size(); ++a) {
      const xclbin::Arg& x = k.args[a];
      const afpga_emu_arg& c = code->args[a];
      const int bytes = x.is_pointer ? xclbin::word_bytes(x) : static_cast<int>(x.size);
      const char type = xclbin::encoding(x.type);
      TORCH_CHECK(x.is_pointer == (c.is_pointer != 0) && bytes == c.bytes && type == c.type, k.name,
                  " argument ", x.name, " is ", x.type, " (", bytes, " bytes) in '", xclbin_path,
                  "' but differs in '", library, "'", rebuild);
      info.args.push_back({x.name, x.is_pointer, bytes, type, c.elem_bytes});
    }
    max_cus = std::max(max_cus, info.cus);
    kernels.emplace(info.name, std::move(info));
  }
  // Members run the engine's code above: their arguments are the engine's, checked against it.
  add_members(xclbin, xclbin_path, kernels);
  {
    std::lock_guard<std::mutex> g(run_mu_);
    stop_cu_threads();
    kernels_ = std::move(kernels);
    library_ = lib;  // an earlier image stays mapped: its kernels may be referenced by caches
    image_path_ = path;
    start_cu_threads(max_cus - 1);
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

void EmuDevice::run_on_cu(const KernelInfo& k, int cu, const std::vector<KernelArg>& args,
                          const std::vector<KernelArg>& passed) {
  uint64_t slots[AFPGA_EMU_MAX_ARGS];
  TORCH_CHECK(args.size() <= AFPGA_EMU_MAX_ARGS, k.name, " takes more arguments than the emulator's ABI holds");
  // An engine's launch passes one buffer in many slots (the member's spare): its address once.
  Buffer* last = nullptr;
  char* address = nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& a = args[i];
    if (a.buffer != nullptr && a.buffer != last) {
      last = a.buffer;
      address = static_cast<char*>(static_cast<EmuBuffer*>(a.buffer)->device);
    }
    slots[i] = a.buffer ? reinterpret_cast<uintptr_t>(address + a.offset) : a.bits;
  }
  const int64_t start = now_ns();
  static_cast<const afpga_emu_kernel*>(k.handle)->invoke(slots);
  record_cu_run(cu, start, now_ns(), std::hash<std::thread::id>()(std::this_thread::get_id()), passed);
}

void EmuDevice::launch(const KernelInfo& k, const KernelRuns& runs, const KernelRuns& passed) {
  TORCH_CHECK(!runs.empty() && static_cast<int>(runs.size()) <= k.cus, k.name, ": ", runs.size(), " runs for ",
              k.cus, " CUs");
  for (const auto& args : runs) {
    TORCH_CHECK(args.size() == k.args.size(), k.name, " takes ", k.args.size(), " arguments, got ", args.size());
  }
  std::lock_guard<std::mutex> owner(run_mu_);
  if (runs.size() > 1) {
    {
      std::lock_guard<std::mutex> g(mu_);
      for (size_t i = 1; i < runs.size(); ++i) {
        pending_[i - 1] = [this, &k, &runs, &passed, i] { run_on_cu(k, static_cast<int>(i), runs[i], passed[i]); };
      }
      outstanding_ = runs.size() - 1;
    }
    // Notified with the lock released: a worker woken while the caller holds it would block on it
    // again, and with more CUs than cores the caller is often preempted right there -- every CU
    // then waited for it (80 us of nothing per launch, measured on 2 cores).
    cv_.notify_all();
  }
  run_on_cu(k, 0, runs[0], passed[0]);  // CU 0 runs in this thread
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
        if (--outstanding_ == 0) {
          g.unlock();  // as above: the caller wakes to a free lock
          done_cv_.notify_one();
          g.lock();
        }
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
