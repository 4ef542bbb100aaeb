// The one launch path. Every host driver (fpga_kernel, fpga_reduce, and each kernel family after
// them) runs its kernels through a KernelLaunch, which:
//   - finds v_<ref.name>_<dtype> in the loaded image (KernelUnavailable when it has none: the
//     generated wrapper then runs the op through the counted CPU fallback);
//   - books this thread's syncs, device-side copies and time, from construction to the end of
//     run(), to the ATen op whose wrapper counts the run;
//   - splits the work over the compute units the image reports;
//   - packs each unit's arguments, checking them against the kernel's metadata;
//   - runs the units concurrently inside a profiler range named after the kernel, and counts the
//     launch (per op, and per kernel in report()).
//
//   KernelLaunch launch(kernel, dtype, where);   // before preparing operands: their copies count
//   ... make operands unit-stride on the device, sync_to_device / prepare_device_write ...
//   for (const CuRange& r : launch.split(n, lanes))
//     launch.add_run().buffer(in, in_off + r.begin * esize).buffer(out, out_off + r.begin * esize)
//                     .scalar(alpha).size(r.size());
//   launch.run();                                  // then mark outputs written
#pragma once

#include <ATen/core/ScalarType.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "device.h"
#include "fpga_kernel.h"
#include "stats.h"

namespace aten_fpga {

struct Allocation;

// Below this many elements per compute unit, splitting costs more than it saves.
constexpr int64_t kMinElementsPerCU = int64_t(1) << 14;

// One compute unit's share of the work items: [begin, end).
struct CuRange {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};

// The arguments of one compute unit's run, in the kernel's argument order. Each call takes the
// next argument and checks its kind (pointer or scalar) against the kernel's metadata.
// The device memory a launch's buffer arguments span (report()'s kernel_bytes): per allocation,
// from the lowest byte offset any unit was passed to the highest end of the bytes a unit was told it
// reaches, or to the allocation's end where a driver did not say.
struct BufferSpan {
  Allocation* alloc;
  size_t begin, end;
};
using BufferSpans = c10::SmallVector<BufferSpan, 8>;

// A size argument a unit was given: its unit, argument index and value (a launch's work and, while
// recorded, its sizes: stats.h).
struct SizeArg {
  uint32_t unit, arg;
  int64_t value;
};
using SizeArgs = c10::SmallVector<SizeArg, 16>;

class RunArgs {
 public:
  RunArgs(const KernelInfo& info, std::vector<KernelArg>& args, BufferSpans& spans, SizeArgs& sizes, uint32_t unit)
      : info_(&info), args_(&args), spans_(&spans), sizes_(&sizes), unit_(unit) {}
  // A buffer from byte_offset; `bytes`: how far the unit reaches (its end by default).
  RunArgs& buffer(Allocation* a, size_t byte_offset, size_t bytes = SIZE_MAX);
  RunArgs& scalar(const c10::Scalar& value);  // encoded as the kernel declares the argument
  RunArgs& bits(uint64_t raw);                // a scalar already encoded (encode_scalar)
  RunArgs& size(int64_t n);                   // a size argument (uint64_t)

 private:
  const KernelArgInfo& next(bool pointer);
  const KernelInfo* info_;
  std::vector<KernelArg>* args_;
  BufferSpans* spans_;
  SizeArgs* sizes_;
  uint32_t unit_;
};

class KernelLaunch {
 public:
  KernelLaunch(const KernelRef& ref, at::ScalarType dtype, c10::Device where);
  // A kernel found by its caller (a fused kernel loaded on demand, host/ps/fpga_fused.cpp).
  KernelLaunch(const KernelInfo& info, c10::Device where);
  ~KernelLaunch();
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;

  const KernelInfo& info() const { return *info_; }
  Device& device() const { return *device_; }
  int cus() const { return info_->cus; }

  // Throws, naming `fix`, unless the kernel takes exactly `n` arguments.
  void expect_args(size_t n, const char* fix) const;

  // [0, items) split over at most cus() units in contiguous ranges of whole `granule`s, so that
  // each unit gets at least kMinElementsPerCU elements (`elements_per_item` each). Empty when
  // items == 0.
  c10::SmallVector<CuRange, 8> split(int64_t items, int64_t granule = 1, int64_t elements_per_item = 1) const;

  // The next compute unit's arguments (units are numbered in the order they are added).
  RunArgs add_run();

  // Runs every unit added, concurrently, and waits. Counts the launch for the op.
  void run();

 private:
  KernelBooking booking_;
  const KernelInfo* info_;
  Device* device_;
  // This thread's argument lists at this launch's depth (launches nest: a driver's operand
  // copies may be kernels themselves).
  std::vector<std::vector<KernelArg>>* runs_;
  size_t units_ = 0;  // runs added
  BufferSpans spans_;
  SizeArgs sizes_;
};

}  // namespace aten_fpga
