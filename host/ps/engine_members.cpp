#include "engine_members.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace aten_fpga {

void add_members(const xclbin::Image& image, const std::string& path,
                 std::unordered_map<std::string, KernelInfo>& kernels) {
  for (const xclbin::Member& m : image.members) {
    if (kernels.count(m.name)) continue;  // the image holds it itself
    auto e = kernels.find(m.engine);
    TORCH_CHECK(e != kernels.end(), "'", path, "': member ", m.name, "'s engine ", m.engine,
                " is not among the kernels the device found in it");
    const KernelInfo& engine = e->second;
    // The xclbin reader checked every name against the engine's arguments in the same metadata.
    auto slot_of = [&](const std::string& arg) {
      auto it = std::find_if(engine.args.begin(), engine.args.end(), [&](const KernelArgInfo& a) { return a.name == arg; });
      TORCH_INTERNAL_ASSERT(it != engine.args.end(), m.engine, " has no argument ", arg);
      return static_cast<int>(it - engine.args.begin());
    };
    KernelInfo info;
    info.name = m.name;
    info.cus = engine.cus;
    info.handle = engine.handle;
    info.engine = &engine;
    info.opcode = m.opcode;
    info.opcode_slot = slot_of(std::find_if(image.engines.begin(), image.engines.end(), [&](const xclbin::Engine& x) {
                                 return x.kernel == m.engine;
                               })->opcode_arg);
    for (const auto& [arg, engine_arg] : m.args) {
      const int slot = slot_of(engine_arg);
      KernelArgInfo a = engine.args[slot];
      a.name = arg;
      if (a.is_pointer && info.spare_buffer < 0) info.spare_buffer = static_cast<int>(info.args.size());
      info.args.push_back(std::move(a));
      info.slots.push_back(slot);
    }
    for (size_t e = 0; e < engine.args.size(); ++e) {
      if (engine.args[e].is_pointer && std::find(info.slots.begin(), info.slots.end(), static_cast<int>(e)) == info.slots.end())
        info.unused_buffers.push_back(static_cast<int>(e));
    }
    kernels.emplace(m.name, std::move(info));
  }
}

void Device::run(const KernelInfo& k, const KernelRuns& runs) {
  if (k.engine == nullptr) return launch(k, runs, runs);
  const KernelInfo& engine = *k.engine;
  // Reused by every launch of this thread (a device run never nests): once grown, allocates nothing.
  thread_local KernelRuns engine_runs;
  engine_runs.resize(runs.size());
  for (size_t u = 0; u < runs.size(); ++u) {
    const std::vector<KernelArg>& args = runs[u];
    TORCH_CHECK(args.size() == k.args.size(), k.name, " takes ", k.args.size(), " arguments, got ", args.size());
    // Engine buffers the member leaves unused get one of its buffers (from its start: on XRT an
    // offset would cost a sub-buffer): the engine never touches them, but XRT needs a buffer in
    // every buffer argument. Unused scalars are 0.
    const KernelArg spare{k.spare_buffer >= 0 ? args[k.spare_buffer].buffer : nullptr, 0, 0};
    std::vector<KernelArg>& out = engine_runs[u];
    out.assign(engine.args.size(), KernelArg{});  // unused scalars 0
    for (int e : k.unused_buffers) out[e] = spare;
    out[k.opcode_slot].bits = k.opcode;
    for (size_t i = 0; i < args.size(); ++i) out[k.slots[i]] = args[i];
  }
  launch(engine, engine_runs, runs);
}

}  // namespace aten_fpga
