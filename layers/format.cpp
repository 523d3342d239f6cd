// layers/format.cpp — element types, layouts and the host bf16 conversions.
#include "layers/format.hpp"

#include <cstring>

#include "core/error.hpp"
#include "layers/tensor.hpp"

namespace dtrain::layers {

size_t dtype_size(DType t) { return t == DType::bf16 ? 2 : 4; }
const char* dtype_name(DType t) { return t == DType::bf16 ? "bf16" : "f32"; }
const char* precision_name(DType t) { return t == DType::bf16 ? "bf16" : "fp32"; }

DType parse_precision(const std::string& s) {
  if (s == "fp32" || s == "f32" || s == "float32") return DType::f32;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  DT_USAGE("option 'precision' = '", s, "': expected fp32 or bf16");
}

size_t Format::elements(const Shape& s) const {
  if (cblock == 1 || cblock == 0) return static_cast<size_t>(s.numel());  // nchw, nhwc: no padding
  const int64_t cpad = (s.c() + cblock - 1) / cblock * cblock;
  return static_cast<size_t>(s.n() * cpad * s.h() * s.w());
}

Format Format::for_shape(const Shape& s) const {
  return is_nhwc() && (s.c() == 1 || s.h() * s.w() == 1) ? Format{dtype, 1} : *this;
}

std::string Format::str() const {
  std::string layout = cblock == 1 ? "nchw" : cblock == 0 ? "nhwc" : "nChw" + std::to_string(cblock) + "c";
  return std::string(dtype_name(dtype)) + " " + layout;
}

uint16_t to_bf16(float x) { return bf16_bits(x); }

float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace dtrain::layers
