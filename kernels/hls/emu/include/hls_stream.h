// aten_fpga's own g++ stand-in for Vitis HLS <hls_stream.h>, used only when kernels are compiled
// for the software-emulated device (never by v++).
//
// C-simulation semantics: a stream is an unbounded FIFO and DATAFLOW stages run one after the
// other in program order, so every element a producer writes is buffered until its consumer runs.
//
// Speed: a stage's pipelined loop (`for i < n: out.write(op(in.read()))`) must stay a loop g++
// can vectorize, as the card runs it at one element per cycle. So write() and read() are a store or
// a load and an index bump, with no branch: the storage is a reservation of kCapacity bytes of
// address space whose pages are committed on first use and reused after, with a guard page behind
// it (a stream overfilled past it faults there); an underflow -- a read from an empty stream, which
// would hang the card -- is reported when the stream goes out of scope. Streams live in a DATAFLOW
// region (per tile or block), so a stream is written, then drained, then destroyed: its storage goes
// back to a per-thread pool for the next stream of its type.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <vector>

namespace hls {

template <typename T>
class stream {
  static_assert(std::is_trivially_copyable<T>::value, "hls::stream elements are bus words: trivially copyable");

 public:
  // What one stream may hold between its first write and the end of its region (the largest, a
  // GEMM operand's chunk stream, holds TM x k floats: 64 MiB at k = 2^20 on a 16-row array).
  static constexpr std::size_t kCapacity = std::size_t(1) << 30;

  stream() : data_(take()) {}
  explicit stream(const char*) : data_(take()) {}
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (head_ > tail_) {
      std::fprintf(stderr, "hls::stream: %zu read(s) from an empty stream (the kernel would hang)\n", head_ - tail_);
      std::abort();
    }
    pool().push_back(data_);
  }

  void write(const T& v) { new (data_ + tail_++) T(v); }
  void operator<<(const T& v) { write(v); }
  T read() { return data_[head_++]; }
  void operator>>(T& v) { v = read(); }
  bool read_nb(T& v) {
    if (empty()) return false;
    v = read();
    return true;
  }
  bool write_nb(const T& v) {
    write(v);
    return true;
  }

  bool empty() const { return head_ >= tail_; }
  bool full() const { return false; }
  std::size_t size() const { return empty() ? 0 : tail_ - head_; }

 private:
  static constexpr std::size_t kGuard = 4096;

  // Reservations of destroyed streams, per element type and thread; released when the thread ends.
  struct Pool {
    std::vector<T*> spare;
    ~Pool() {
      for (T* p : spare) munmap(p, kCapacity + kGuard);
    }
  };
  static std::vector<T*>& pool() {
    thread_local Pool pool;
    return pool.spare;
  }
  static T* take() {
    auto& spare = pool();
    if (!spare.empty()) {
      T* p = spare.back();
      spare.pop_back();
      return p;
    }
    void* m = mmap(nullptr, kCapacity + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED || mprotect(static_cast<char*>(m) + kCapacity, kGuard, PROT_NONE) != 0) {
      std::fprintf(stderr, "hls::stream: cannot reserve %zu bytes of address space for a stream\n", kCapacity);
      std::abort();
    }
    return static_cast<T*>(m);
  }

  T* data_;
  std::size_t head_ = 0, tail_ = 0;  // elements [head_, tail_) are in the FIFO
};

}  // namespace hls
