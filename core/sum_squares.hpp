// core/sum_squares.hpp — Σ x² of a float array in a fixed order: the gradient
// norm's square behind the non-finite check and clipping, on workers
// (layers::sum_of_squares, which splits a whole arena over threads) and on
// parameter servers (comm/ps_server.cpp, one piece as it arrives).
//
// Element e goes to lane e mod kSumSquaresLanes (32), each lane sums in
// double, the lanes are added in lane order at the end: a fixed order (the
// same bits on every rank and run), and 32 independent chains rather than one
// dependent add per element. The same bits on every instruction set: a float
// times a float is exact in double (24 + 24 significant bits < 53), so each
// lane's sum rounds the same whether the product and the add are fused or
// vectorised. On x86-64 with AVX2 and FMA the lanes live in 8 registers
// (sum_squares.cpp), elsewhere the portable loop. In a scratch benchmark on
// one AMD EPYC core, 256 KiB in L2: ~61 GB/s, against ~22 GB/s for the
// compiler's vectorisation of the 8 lanes this had before (2 add chains); a
// ps server's check of a 4 MiB step took 0.17–0.38 ms then (bench/README.md).
// Neither throws.
#pragma once

#include <cstddef>

namespace dtrain {

// The lanes of the fixed order; a caller that splits an array and adds the
// parts (layers::sum_of_squares) cuts it at multiples of this.
inline constexpr size_t kSumSquaresLanes = 32;

// Σ x[i]² over n floats, in double; non-finite when any x[i] is.
double sum_squares(const float* x, size_t n);
// g[i] += other[i] for i < n (in float), and Σ g[i]² of the result (as sum_squares).
double add_and_sum_squares(float* g, const float* other, size_t n);

namespace detail {
// The portable loops, whatever the CPU (tests: the same bits as the above).
double sum_squares_portable(const float* x, size_t n);
double add_and_sum_squares_portable(float* g, const float* other, size_t n);
}  // namespace detail

}  // namespace dtrain
