// Pinned host memory: tensor.pin_memory(), torch.empty(..., pin_memory=True),
// DataLoader(pin_memory=True). Blocks come from Device::allocate_pinned of the device current when
// they are made (a host-only buffer object on a card), so copies between them and that device's
// tensors are a transfer between two of its buffers, without the host shadow.
#pragma once

#include <c10/core/Allocator.h>

#include "device.h"

namespace aten_fpga {

// Where host address `p` lies in pinned memory: its buffer, the buffer's device, p's offset in it.
struct PinnedRef {
  Buffer* buffer = nullptr;  // null: p is not in pinned memory
  Device* device = nullptr;
  size_t offset = 0;
  size_t size = 0;  // bytes of the buffer from p on
};
PinnedRef find_pinned(const void* p);

c10::Allocator* pinned_allocator();
// Free the cached blocks of pinned memory (torch.fpga.empty_cache()).
void empty_pinned_cache();

}  // namespace aten_fpga
