// core/sum_squares.hpp — Σ x² of a float array in a fixed order: the gradient
// norm's square behind the non-finite check and clipping, on workers
// (layers::sum_of_squares, which splits a whole arena over threads) and on
// parameter servers (comm/ps_server.cpp, one piece as it arrives).
//
// Element e goes to lane e mod 8, each lane sums in double, the lanes are
// added in lane order at the end: a fixed order (the same bits on every rank
// and run), and eight independent chains rather than one dependent add per
// element, so the pass runs at memory speed. The same bits on every
// instruction set: a float times a float is exact in double (24 + 24
// significant bits < 53), so each lane's sum rounds the same whether the
// product and the add are fused or vectorised; hence an AVX2 clone next to
// the baseline x86-64 one (about twice the throughput).
#pragma once

#include <cstddef>

namespace dtrain {

// Σ x[i]² over n floats, in double; non-finite when any x[i] is.
double sum_squares(const float* x, size_t n);
// g[i] += other[i] for i < n, and Σ g[i]² of the result (as sum_squares).
double add_and_sum_squares(float* g, const float* other, size_t n);

}  // namespace dtrain
