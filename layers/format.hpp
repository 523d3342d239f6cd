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
//   nhwc      channels last (cblock = 0): [N, H, W, C], channel c of pixel
//             (h, w) at ((n·H + h)·W + w)·C + c — one block of all C channels,
//             no padding (oneDNN's acdb: what its AMX convolutions read and
//             write — seen on a Xeon with AMX, where oneDNN 2.6's bf16 kernels
//             for nChw16c are the slower AVX512-BF16 ones; docs/cpu-performance.md §4)
// A Tensor carries its Format (tensor.hpp); a Net lets each kernel choose the
// formats it reads and writes, and converts only where a producer and a
// consumer disagree (net.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

// Marks a function that nvcc compiles for the host and the device (a .cu file
// including this header); plain inline for the host compiler.
#ifdef __CUDACC__
#define DT_HOST_DEVICE __host__ __device__
#else
#define DT_HOST_DEVICE
#endif

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
  int cblock = 1;  // 1: plain NCHW; 8 or 16: NCHW{cblock}c; 0: NHWC

  static Format plain(DType t = DType::f32) { return Format{t, 1}; }
  static Format blocked(int b, DType t = DType::f32) { return Format{t, b}; }
  static Format nhwc(DType t = DType::f32) { return Format{t, 0}; }
  bool is_plain() const { return cblock == 1; }
  bool is_nhwc() const { return cblock == 0; }
  // This format for a tensor of shape s, said as the Net compares formats: nhwc
  // of one channel or one pixel per image is the same bytes as plain nchw (the
  // Net would convert between them otherwise).
  Format for_shape(const Shape& s) const;
  bool is_plain_f32() const { return cblock == 1 && dtype == DType::f32; }
  // Stored elements and bytes of a tensor of shape s, the padding channels included.
  size_t elements(const Shape& s) const;
  size_t bytes(const Shape& s) const { return elements(s) * dtype_size(dtype); }
  std::string str() const;  // "f32 nchw", "bf16 nChw16c", "bf16 nhwc"
  bool operator==(const Format& o) const { return dtype == o.dtype && cblock == o.cblock; }
  bool operator!=(const Format& o) const { return !(*this == o); }
};

// float32 → bfloat16 bits, the one definition of the rounding, for the host
// (to_bf16 below) and the CUDA kernels (layers/cuda/cuda_kernels.cu): add
// 0x7fff plus the lowest kept bit and truncate — round to nearest, ties to
// even, and a finite value past bf16's largest (3.3895e38) rounds to ±inf as
// it should; a NaN keeps its sign and top mantissa bits and is made quiet
// (bit 6 of the result), so truncation cannot turn it into ±inf.
DT_HOST_DEVICE inline uint16_t bf16_bits(float x) {
#ifdef __CUDA_ARCH__
  uint32_t u = __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
#endif
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// float32 ↔ bfloat16 on the host: bf16_bits, and exact widening. The
// reference for the kernels' conversions.
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);
// x rounded to the nearest bfloat16, as a float.
inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }

}  // namespace dtrain::layers
