// Per-op accounting: how often each ATen op ran on the FPGA (launched at least one kernel) and how
// often it fell back to the CPU, which kernels it launched how often, the bytes it synced between
// host shadow and device copy, and its time. Counters are atomics reached through a reference
// cached per call site, so counting costs a few relaxed adds.
//
// Attribution: an OpScope (the CPU fallback, copies, .item(), resize) makes its op the target of
// this thread's syncs while it runs; the outermost scope wins, so the copies a fallback makes
// count for the fallback's op. A KernelLaunch (launch.h), which does not know its ATen op, books
// its time, syncs and launch as pending on the thread; the generated wrapper's
// `fpga_runs.add_run(since)` moves them to its op, and counts the op as an FPGA run only if a
// kernel was launched while it ran (by itself or by the ops it is made of): an op whose impl never
// reached a kernel (one that bypasses the stub, or an empty tensor) is no FPGA run.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace aten_fpga {

struct OpStats;
struct ThreadAccount;  // stats.cpp: a thread's pending bookings

// Where this thread's launches stood when an op began: it launched a kernel (itself, or an op it
// is made of) iff the thread launched since; its own launches are those still pending after it.
struct LaunchMark {
  int64_t epoch;   // launches so far on this thread
  size_t pending;  // launches booked to no op yet (an enclosing op's)
};
LaunchMark launch_mark();

// The FPGA run counter of an op.
class RunCounter {
 public:
  explicit RunCounter(OpStats* owner) : owner_(owner) {}
  // Books the thread's pending kernel time and syncs, and the launches since `since` (the op's
  // launch_mark() when it began), for the op, and counts a run if it launched a kernel.
  void add_run(LaunchMark since);
  // Books every pending time, sync and launch without counting a run.
  void book_pending(size_t first_launch = 0);
  void book_pending(ThreadAccount& account, size_t first_launch = 0);
  int64_t load() const { return n_.load(std::memory_order_relaxed); }
  void reset() { n_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> n_{0};
  OpStats* owner_;
};

// One kernel's launches for one op: how many, the device memory they span, their work (launch_work:
// what the projection's compute arrays count) and, while sizes are recorded (set_record_sizes), how
// often each launch's size arguments occurred (under the op's kernels_mu).
struct KernelCounts {
  std::atomic<int64_t> launches{0}, bytes{0}, work{0};
  std::map<std::vector<std::pair<std::string, int64_t>>, int64_t> sizes;
};

// A launch's size arguments by name: a value every CU was given once, one the CUs split summed.
using LaunchSizes = std::vector<std::pair<std::string, int64_t>>;

struct OpStats {
  explicit OpStats(std::string op_name) : name(std::move(op_name)) {}
  const std::string name;
  RunCounter fpga_runs{this};
  std::atomic<int64_t> cpu_fallbacks{0};
  std::atomic<int64_t> bytes_to_device{0};
  std::atomic<int64_t> bytes_to_host{0};
  std::atomic<int64_t> fpga_ns{0};  // time in fpga_kernel (syncs, device-side copies, the runs)
  std::atomic<int64_t> cpu_ns{0};   // time in the CPU fallback, its copies included
  std::atomic<int64_t> launches{0};  // kernel launches (one per KernelLaunch::run, all CUs)
  std::atomic<int64_t> kernel_bytes{0};  // device memory the launches' buffer arguments span
  // Per kernel name. Entries are added under kernels_mu and never erased (reset_stats zeroes
  // them), so a thread that found a counter once counts into it without the lock.
  std::mutex kernels_mu;
  std::map<std::string, KernelCounts> kernels;
};

// The counters of one op ("add.out"), created on first use; the reference stays valid.
OpStats& op_stats(const std::string& op);

// Makes `op` the target of this thread's syncs and times it (into cpu_ns) for its lifetime,
// unless an outer scope or a kernel booking is already active.
class OpScope {
 public:
  explicit OpScope(OpStats& op);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpStats* op_ = nullptr;  // null when an outer scope owns the thread
  int64_t start_ns_ = 0;
};

// fpga_kernel's share, for its lifetime: its time and syncs (the copies it makes included) are
// booked as pending until the wrapper counts the run; if it throws they go to "(outside ops)".
class KernelBooking {
 public:
  KernelBooking();
  ~KernelBooking();
  void done();  // the kernel completed: keep its bookings
  KernelBooking(const KernelBooking&) = delete;
  KernelBooking& operator=(const KernelBooking&) = delete;

 private:
  bool outer_;
  bool done_ = false;
  int64_t start_ns_ = 0;
};
// A sync between host shadow and device copy of `bytes`, booked to the thread's current op.
void record_sync(bool to_device, int64_t bytes);
// A kernel launch (KernelLaunch::run), booked to the op whose wrapper counts the run next on this
// thread. `kernel` must stay valid until then (it is the image's kernel name). `bytes`: the device
// memory its buffer arguments span (what it may read and write).
// `work`: launch_work of its units' sizes; `sizes`: its size arguments, kept while sizes are recorded.
void record_launch(const std::string& kernel, int64_t bytes = 0, int64_t work = 0, LaunchSizes* sizes = nullptr);

// Which size arguments make a launch's work: per kernel, the first spec all of whose names it has,
// the product over its CUs of those arguments' values ("2^x": 2 to the x), summed over its CUs;
// 0 when none applies. Set by the Python package (aten_fpga.projection) before any launch.
void set_work_specs(std::vector<std::vector<std::string>> specs);
const std::vector<std::vector<std::string>>& work_specs();
// While on, every launch's size arguments are counted per op and kernel (aten_fpga.record).
void set_record_sizes(bool on);
bool record_sizes();

struct KernelSnapshot {
  int64_t launches, bytes, work;
  std::map<LaunchSizes, int64_t> sizes;
};
struct OpCounts {
  int64_t fpga_runs, cpu_fallbacks, bytes_to_device, bytes_to_host, fpga_ns, cpu_ns, launches, kernel_bytes;
  std::map<std::string, KernelSnapshot> kernels;
};
std::map<std::string, OpCounts> stats_snapshot();
void reset_stats();

int64_t now_ns();

}  // namespace aten_fpga
