// aten_fpga's own g++ stand-in for Vitis HLS <hls_stream.h>, used only when kernels are compiled
// for the software-emulated device (never by v++).
//
// C-simulation semantics: a stream is an unbounded FIFO and DATAFLOW stages run one after the
// other in program order, so every element a producer writes is buffered until its consumer runs.
// The buffer is reused once drained, and a stream that goes out of scope hands its storage to the
// next stream of its type on this thread, so a tiled kernel allocates only on its first tile.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace hls {

template <typename T>
class stream {
 public:
  stream() { take_spare(); }
  explicit stream(const char*) { take_spare(); }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    buf_.clear();
    spares().push_back(std::move(buf_));
  }

  void write(const T& v) { buf_.push_back(v); }
  void operator<<(const T& v) { write(v); }

  T read() {
    if (head_ == buf_.size()) {
      // A read from an empty stream deadlocks on hardware; in simulation it is a kernel bug.
      std::fprintf(stderr, "hls::stream: read from an empty stream (the kernel would hang)\n");
      std::abort();
    }
    T v = buf_[head_++];
    if (head_ == buf_.size()) {  // drained: rewind so the storage is reused by the next tile
      head_ = 0;
      buf_.clear();
    }
    return v;
  }
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

  bool empty() const { return head_ == buf_.size(); }
  bool full() const { return false; }
  std::size_t size() const { return buf_.size() - head_; }

 private:
  // Drained buffers of destroyed streams (capacity kept), per element type and thread.
  static std::vector<std::vector<T>>& spares() {
    thread_local std::vector<std::vector<T>> pool;
    return pool;
  }
  void take_spare() {
    auto& pool = spares();
    if (!pool.empty()) {
      buf_ = std::move(pool.back());
      pool.pop_back();
    }
  }

  std::vector<T> buf_;
  std::size_t head_ = 0;
};

}  // namespace hls
