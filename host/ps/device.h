// The device layer: one interface, two implementations (EmuDevice in-process, XrtDevice through
// XRT). Everything above it -- allocator, copies, fpga_kernel -- is written against this.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stats.h"  // now_ns

namespace aten_fpga {

// A device buffer and its host-visible shadow (what xrt::bo::map gives). Which side holds the
// valid bytes is tracked above this layer, per allocation (allocator.h).
struct Buffer {
  virtual ~Buffer() = default;
  void* host = nullptr;  // the host shadow: a tensor's data_ptr points here
  size_t bytes = 0;      // capacity, a multiple of the widest port word (64 bytes)
};

// One argument of a kernel, from the image's metadata.
struct KernelArgInfo {
  std::string name;
  bool is_pointer;
  int bytes;  // pointer: the port word (element size, or 64 for a 512-bit port); scalar: its size
  // A scalar's encoding, or a pointer's element type: 'f' float, 'i' signed, 'u' unsigned,
  // 'c' complex, 'b' bool.
  char type;
  int elem_bytes;  // a pointer's element size (with `type`, the port's dtype); a scalar's size
};

struct KernelInfo {
  std::string name;
  std::vector<KernelArgInfo> args;
  int cus = 1;  // compute units in the image
  const void* handle = nullptr;  // the device's own kernel object
  // A member of an engine (the image's member table, xclbin.h) runs as `engine` with `opcode` in
  // engine argument `opcode_slot` and its argument i in engine argument `slots[i]`; its `args` are
  // those engine arguments under the member's names, its `cus` the engine's. Null engine: a kernel
  // the image holds itself.
  const KernelInfo* engine = nullptr;
  uint32_t opcode = 0;
  int opcode_slot = -1;
  std::vector<int> slots;
  int spare_buffer = -1;  // the member argument whose buffer fills the engine buffers it leaves unused
  std::vector<int> unused_buffers;  // the engine's buffer arguments the member leaves unused
};

// A value for one kernel argument: a buffer region or a scalar's bytes.
struct KernelArg {
  Buffer* buffer = nullptr;  // null for a scalar
  size_t offset = 0;         // byte offset into the buffer
  uint64_t bits = 0;         // a scalar's bytes, low bytes first
};

// One argument list per compute unit: runs[i] goes to CU i.
using KernelRuns = std::vector<std::vector<KernelArg>>;

// What one compute unit did: totals over the process, and its last run (when, on which host
// thread, with which arguments). Tests use it to see that CUs run concurrently on disjoint
// ranges; reports use the totals.
struct CuActivity {
  static constexpr int kMaxArgs = 16;
  int64_t runs = 0;
  int64_t busy_ns = 0;
  int64_t last_start_ns = 0, last_end_ns = 0;  // steady clock
  uint64_t last_thread = 0;                    // the host thread that drove the run
  int last_nargs = 0;
  KernelArg last_args[kMaxArgs];               // buffer args: offset; scalars: bits
};

// Fill n bytes at p with a repeating 8-byte pattern, low byte first (n need not be a multiple of 8).
inline void fill_repeating(void* p, size_t n, uint64_t pattern) {
  auto* bytes = static_cast<unsigned char*>(p);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) std::memcpy(bytes + i, &pattern, 8);
  if (i < n) std::memcpy(bytes + i, &pattern, n - i);
}

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;

  // Device memory. allocate() throws c10::OutOfMemoryError when the device is full.
  virtual std::unique_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual size_t capacity() const = 0;
  // Move bytes [offset, offset + n) between the host shadow and the device copy.
  virtual void to_device(Buffer& b, size_t offset, size_t n) = 0;
  virtual void to_host(Buffer& b, size_t offset, size_t n) = 0;
  // Pinned host memory (tensor.pin_memory()): host memory the device moves bytes to and from
  // directly -- a host-only buffer object on a card; on the emulator, memory that is the buffer's
  // host shadow and device copy at once. Not counted in capacity(). copy_on_device() takes it on
  // either side: a copy between it and a device buffer is the transfer itself.
  virtual std::unique_ptr<Buffer> allocate_pinned(size_t bytes) = 0;
  // Copy n bytes between two buffers of this device, device copy to device copy (a DMA on a
  // card); the host shadows are untouched.
  virtual void copy_on_device(Buffer& dst, size_t dst_offset, Buffer& src, size_t src_offset, size_t n) = 0;
  // The device copy's address in this process, where the device memory is addressable (the
  // emulator); nullptr otherwise. Device-side copies use it as the device's data mover, and the
  // coherence sanitizer to poison a stale device copy.
  virtual void* device_address(Buffer& b) = 0;

  // The image (xclbin or emulated image) and its kernels.
  virtual void load_image(const std::string& path) = 0;
  virtual const std::string& image_path() const = 0;
  virtual const KernelInfo* find_kernel(const std::string& name) const = 0;
  virtual std::vector<std::string> kernel_names() const = 0;

  // Start one run per compute unit (runs[i] goes to CU i), concurrently, and wait for all. A
  // member runs as its engine, each run translated into the engine's arguments. Not virtual: the
  // translation is the same on every device (engine_members.cpp defines it), which then calls its
  // device's launch().
  void run(const KernelInfo& k, const KernelRuns& runs);

  // Per compute unit accounting (index = CU), as recorded by run().
  std::vector<CuActivity> cu_activity() const {
    std::lock_guard<std::mutex> g(activity_mu_);
    return activity_;
  }

 protected:
  // Runs `runs` of kernel `k` (never a member: an engine or a kernel the image holds itself) as
  // run() says. `passed` are the arguments the host passed (a member's, for a member; else `runs`):
  // what record_cu_run books, so that accounting reads the same whether the image holds a kernel
  // itself or as an engine's member.
  virtual void launch(const KernelInfo& k, const KernelRuns& runs, const KernelRuns& passed) = 0;

  // Called by launch() once per CU run, from the thread that drove it.
  void record_cu_run(int cu, int64_t start_ns, int64_t end_ns, uint64_t thread, const std::vector<KernelArg>& args) {
    std::lock_guard<std::mutex> g(activity_mu_);
    if (static_cast<int>(activity_.size()) <= cu) activity_.resize(cu + 1);
    CuActivity& a = activity_[cu];
    a.runs += 1;
    a.busy_ns += end_ns - start_ns;
    a.last_start_ns = start_ns;
    a.last_end_ns = end_ns;
    a.last_thread = thread;
    a.last_nargs = static_cast<int>(std::min<size_t>(args.size(), CuActivity::kMaxArgs));
    for (int i = 0; i < a.last_nargs; ++i) a.last_args[i] = args[i];
  }

 private:
  mutable std::mutex activity_mu_;
  std::vector<CuActivity> activity_;
};

}  // namespace aten_fpga
