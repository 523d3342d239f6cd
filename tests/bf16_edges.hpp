// tests/bf16_edges.hpp — float32 values at the edges of the float32 → bfloat16
// rounding (layers::bf16_bits, layers/format.hpp) with the bf16 bits worked
// out by hand: a bf16 is the top 16 bits of a float32, and the low 16 bits
// decide the rounding (below 0x8000 down, above up, exactly 0x8000 to the even
// one of the two). tests/test_formats.cpp checks the host against this table,
// tests/test_cuda_bf16.cpp the device kernel against the host.
#pragma once

#include <bit>
#include <cstdint>

namespace dtrain::test {

struct Bf16Edge {
  uint32_t f32;   // the input's bits
  uint16_t bf16;  // the expected result's bits
  const char* what;
};

inline constexpr Bf16Edge kBf16Edges[] = {
    {0x3f800000u, 0x3f80u, "1"},
    {0x3f808000u, 0x3f80u, "1 + 2^-8: a tie, the even neighbour is 1 (down)"},
    {0x3f818000u, 0x3f82u, "1 + 3·2^-8: a tie, the even neighbour is 1 + 2^-6 (up)"},
    {0x3f807fffu, 0x3f80u, "just below a tie: down"},
    {0x3f808001u, 0x3f81u, "just above a tie: up"},
    {0xbf818000u, 0xbf82u, "-(1 + 3·2^-8): ties to even on the negative side too"},
    {0x3fffffffu, 0x4000u, "the carry runs into the exponent: 2 − 2^-23 → 2"},
    {0x7f7f7fffu, 0x7f7fu, "the largest float32 that rounds to bf16's largest finite (3.3895e38)"},
    {0x7f7f8000u, 0x7f80u, "the smallest that rounds to +inf: a tie whose even neighbour is inf"},
    {0x7f7fffffu, 0x7f80u, "float32's largest finite (3.4028e38) → +inf"},
    {0xff7f8000u, 0xff80u, "the negative of it → −inf"},
    {0x7f800000u, 0x7f80u, "+inf"},
    {0xff800000u, 0xff80u, "−inf"},
    {0x7fc00000u, 0x7fc0u, "quiet NaN"},
    {0xffc00001u, 0xffc0u, "negative quiet NaN with a low payload: sign and top bits kept"},
    {0x7f800001u, 0x7fc0u, "signalling NaN with only a low payload: made quiet, not truncated to inf"},
    {0x7fa00000u, 0x7fe0u, "signalling NaN with a high payload: kept, made quiet"},
    {0x7fffffffu, 0x7fffu, "NaN whose rounding would carry into the sign (to −0 without the NaN test)"},
    {0x00000000u, 0x0000u, "+0"},
    {0x80000000u, 0x8000u, "−0 keeps its sign"},
    {0x00000001u, 0x0000u, "the smallest subnormal → +0"},
    {0x80000001u, 0x8000u, "the smallest negative subnormal → −0"},
    {0x00008000u, 0x0000u, "a subnormal tie, even neighbour 0 (down)"},
    {0x00018000u, 0x0002u, "a subnormal tie, even neighbour 2·2^-133 (up)"},
    {0x00010000u, 0x0001u, "bf16's smallest subnormal, exact"},
    {0x807fffffu, 0x8080u, "the largest negative subnormal → −(the smallest normal)"},
};

inline float f32_of(uint32_t bits) { return std::bit_cast<float>(bits); }

}  // namespace dtrain::test
