// The device layer: one interface, two implementations (EmuDevice in-process, XrtDevice through
// XRT). Everything above it -- allocator, copies, fpga_kernel -- is written against this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
};

// A value for one kernel argument: a buffer region or a scalar's bytes.
struct KernelArg {
  Buffer* buffer = nullptr;  // null for a scalar
  size_t offset = 0;         // byte offset into the buffer
  uint64_t bits = 0;         // a scalar's bytes, low bytes first
};

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
  // The device copy's address in this process, where the device memory is addressable (the
  // emulator); nullptr otherwise. Device-side copies use it as the device's data mover.
  virtual void* device_address(Buffer& b) = 0;

  // The image (xclbin or emulated image) and its kernels.
  virtual void load_image(const std::string& path) = 0;
  virtual const std::string& image_path() const = 0;
  virtual const KernelInfo* find_kernel(const std::string& name) const = 0;
  virtual std::vector<std::string> kernel_names() const = 0;

  // Start one run per compute unit (runs[i] goes to CU i), concurrently, and wait for all.
  virtual void run(const KernelInfo& k, const std::vector<std::vector<KernelArg>>& runs) = 0;
};

}  // namespace aten_fpga
