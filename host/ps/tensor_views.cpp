#include "tensor_views.h"

namespace aten_fpga {
namespace {
at::Tensor alias_at(void* base, const at::Tensor& t) {
  char* p = static_cast<char*>(base) + t.storage_offset() * t.element_size();
  at::Tensor alias = at::from_blob(p, t.sizes(), t.strides(), [](void*) {}, t.options().device(at::kCPU));
  // A lazily conjugated or negated view stays one: the CPU resolves the bits when it reads it.
  alias._set_conj(t.is_conj());
  alias._set_neg(t.is_neg());
  return alias;
}
}  // namespace

at::Tensor host_alias(const at::Tensor& t) {
  Allocation* a = allocation_of(t);
  if (a == nullptr) return at::empty(t.sizes(), t.options().device(at::kCPU));  // no bytes to alias
  return alias_at(a->buffer->host, t);
}

}  // namespace aten_fpga
