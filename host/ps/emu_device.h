// The software-emulated device: the generated HLS kernels compiled with g++ into a shared library
// (the "image"), called in-process. Device memory is separate from the host shadow, as on a card,
// so a missing sync is a wrong answer. Compute units are threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "device.h"

namespace aten_fpga {

class EmuDevice final : public Device {
 public:
  EmuDevice(int index, size_t capacity);
  ~EmuDevice() override;

  std::string name() const override;
  std::unique_ptr<Buffer> allocate(size_t bytes) override;
  std::unique_ptr<Buffer> allocate_pinned(size_t bytes) override;
  size_t capacity() const override { return capacity_; }
  void to_device(Buffer& b, size_t offset, size_t n) override;
  void to_host(Buffer& b, size_t offset, size_t n) override;
  void copy_on_device(Buffer& dst, size_t dst_offset, Buffer& src, size_t src_offset, size_t n) override;
  void* device_address(Buffer& b) override;

  void load_image(const std::string& path) override;
  const std::string& image_path() const override { return image_path_; }
  const KernelInfo* find_kernel(const std::string& name) const override;
  std::vector<std::string> kernel_names() const override;

 protected:
  void launch(const KernelInfo& k, const KernelRuns& runs, const KernelRuns& passed) override;

 private:
  struct EmuBuffer;
  void release(size_t bytes);
  void run_on_cu(const KernelInfo& k, int cu, const std::vector<KernelArg>& args, const std::vector<KernelArg>& passed);
  void start_cu_threads(int n);
  void stop_cu_threads();

  int index_;
  size_t capacity_;
  std::atomic<size_t> used_{0};
  void* library_ = nullptr;
  std::string image_path_;
  std::unordered_map<std::string, KernelInfo> kernels_;

  // One worker thread per compute unit beyond the first (CU 0 runs in the caller's thread).
  std::vector<std::thread> cu_threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::function<void()>> pending_;  // slot per worker
  size_t outstanding_ = 0;
  bool stopping_ = false;
  std::mutex run_mu_;  // one launch at a time owns the CUs
};

}  // namespace aten_fpga
