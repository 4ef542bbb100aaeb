#include "tensor_views.h"

namespace aten_fpga {
namespace {
at::Tensor alias_at(void* base, const at::Tensor& t) {
  char* p = static_cast<char*>(base) + t.storage_offset() * t.element_size();
  return at::from_blob(p, t.sizes(), t.strides(), [](void*) {}, t.options().device(at::kCPU));
}
}  // namespace

at::Tensor host_alias(const at::Tensor& t) {
  Allocation* a = allocation_of(t);
  if (a == nullptr) return at::empty(t.sizes(), t.options().device(at::kCPU));  // no bytes to alias
  return alias_at(a->buffer->host, t);
}

}  // namespace aten_fpga
