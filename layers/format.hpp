// layers/format.hpp — how an activation lies in memory: its element type and
// its layout.
//
// Element types: float32, and bfloat16 (the top 16 bits of a float32: same
// exponent range, 8 bits of mantissa; Kalamkar et al., "A Study of BFLOAT16
// for Deep Learning Training", 2019). bf16 is a storage and compute type of
// activations and of the weights' copies that kernels make; parameters,
// gradients, optimizer state, batch-norm statistics and the loss stay float32
// (mixed precision, Micikevicius et al. 2018).
//
// Layouts of an activation [N, C, H, W] (a 2-D [N, F] is [N, F, 1, 1]):
//   plain     NCHW, dense row-major (cblock = 1) — what every backend reads
//   blocked   NCHW{b}c, b = cblock ∈ {8, 16}: [N, ⌈C/b⌉, H, W, b], channel c
//             of pixel (h, w) at ((n·⌈C/b⌉ + c/b)·H + h)·W·b + w·b + c%b; the
//             channels from C up to the next multiple of b exist and are zero
//             (oneDNN's nChw16c / nChw8c; the layouts its direct convolutions
//             read and write without reordering)
// A Tensor carries its Format (tensor.hpp); a Net lets each kernel choose the
// formats it reads and writes, and converts only where a producer and a
// consumer disagree (net.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtrain::layers {

struct Shape;

enum class DType : uint8_t { f32, bf16 };

size_t dtype_size(DType t);        // bytes per element: 4, 2
const char* dtype_name(DType t);   // "f32", "bf16"
// The option's spelling (--precision): "fp32" | "bf16"; UsageError naming
// option 'precision' otherwise.
DType parse_precision(const std::string& s);
const char* precision_name(DType t);  // "fp32", "bf16"

struct Format {
  DType dtype = DType::f32;
  int cblock = 1;  // 1: plain NCHW; 8 or 16: NCHW{cblock}c

  static Format plain(DType t = DType::f32) { return Format{t, 1}; }
  static Format blocked(int b, DType t = DType::f32) { return Format{t, b}; }
  bool is_plain() const { return cblock == 1; }
  bool is_plain_f32() const { return cblock == 1 && dtype == DType::f32; }
  // Stored elements and bytes of a tensor of shape s, the padding channels included.
  size_t elements(const Shape& s) const;
  size_t bytes(const Shape& s) const { return elements(s) * dtype_size(dtype); }
  std::string str() const;  // "f32 nchw", "bf16 nChw16c"
  bool operator==(const Format& o) const { return dtype == o.dtype && cblock == o.cblock; }
  bool operator!=(const Format& o) const { return !(*this == o); }
};

// float32 ↔ bfloat16 on the host: round to nearest even (NaN stays a quiet
// NaN), and exact widening. The reference for the kernels' conversions.
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);
// x rounded to the nearest bfloat16, as a float.
inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }

}  // namespace dtrain::layers
