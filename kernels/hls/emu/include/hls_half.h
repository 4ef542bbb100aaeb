// aten_fpga's own g++ stand-in for Vitis HLS <hls_half.h>: `half`, an IEEE binary16 value.
//
// It converts implicitly to float and back, so arithmetic on halves happens in float and rounds
// once to binary16 (round to nearest even) when stored -- how Vitis C simulation evaluates half
// expressions, and how ATen computes float16 ops (in float, its opmath type). Storage is the
// compiler's _Float16, whose conversions are the F16C instructions on x86.
#pragma once

class half {
 public:
  half() = default;
  half(float f) : v_(static_cast<_Float16>(f)) {}  // NOLINT: implicit, like Vitis' half
  operator float() const { return static_cast<float>(v_); }  // NOLINT

 private:
  _Float16 v_;
};

static_assert(sizeof(half) == 2, "half must be 16 bits: it is a tensor element");
