// The one skeleton of every generated wrapper (build/gen/FPGAType_*.cpp): structured wrappers,
// forwarders and the wrappers of `host:` entries differ only in how they run the op on the FPGA.
#pragma once

#include <c10/util/TypeTraits.h>

#include <atomic>
#include <type_traits>
#include <utility>

#include "fallback.h"
#include "fpga_kernel.h"
#include "stats.h"

namespace aten_fpga {

// Runs the op on the FPGA (`run`, which returns what the op returns) and counts the run on `stats`
// if it launched a kernel (or the ops it is made of did).
// A driver throws KernelUnavailable before any side effect when the loaded image lacks the kernel
// (or cannot run these arguments): then the op runs on the CPU through the counted fallback, given
// the wrapper's own arguments `args`.
template <class Op, class Run, class... Args>
typename c10::guts::infer_function_traits_t<typename Op::schema>::return_type run_or_fallback(
    OpStats& stats, Run&& run, Args&&... args) {
  const LaunchMark since = launch_mark();
  try {
    if constexpr (std::is_void_v<decltype(run())>) {  // the in-place _foreach_* ops return nothing
      run();
      stats.fpga_runs.add_run(since);
    } else {
      decltype(auto) result = run();
      stats.fpga_runs.add_run(since);
      return result;
    }
  } catch (const KernelUnavailable&) {
    return cpu_fallback_call<Op>(std::forward<Args>(args)...);
  }
}

}  // namespace aten_fpga
