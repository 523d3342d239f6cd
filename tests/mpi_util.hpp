// tests/mpi_util.hpp — small helpers shared by the MPI test files.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace dtrain::test {
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
// Collective over the world: v holds on every rank.
inline bool all_ranks(bool v) {
  int in = v ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out == 1;
}
// Collective over c: every rank of c holds the same bits in x (an FNV-1a
// digest of the bytes and the size, compared with rank 0's).
inline bool same_on_all_ranks(const std::vector<float>& x, MPI_Comm c) {
  unsigned long long h = 1469598103934665603ull ^ x.size();
  for (float f : x) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    h = (h ^ b) * 1099511628211ull;
  }
  unsigned long long root = h;
  MPI_Bcast(&root, 1, MPI_UNSIGNED_LONG_LONG, 0, c);
  int in = root == h ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, c);
  return out == 1;
}
}  // namespace dtrain::test
