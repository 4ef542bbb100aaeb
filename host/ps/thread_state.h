#pragma once
// Per-thread state reached through a plain thread_local pointer: one TLS lookup per access (a
// thread_local object with a constructor costs a guard call on every access). The state is made on
// the thread's first use and freed when the thread ends.
#include <c10/macros/Macros.h>

#include <memory>

namespace aten_fpga {

template <typename T>
class ThreadState {
 public:
  static T& get() {
    T* p = current_;
    return C10_LIKELY(p != nullptr) ? *p : make();
  }

 private:
  struct Owner {
    std::unique_ptr<T> state = std::make_unique<T>();
    ~Owner() { current_ = nullptr; }
  };
  C10_NOINLINE static T& make() {
    thread_local Owner owner;
    current_ = owner.state.get();
    return *current_;
  }
  static inline thread_local T* current_ = nullptr;
};

}  // namespace aten_fpga
