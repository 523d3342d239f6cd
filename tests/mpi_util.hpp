// tests/mpi_util.hpp — small helpers shared by the MPI test files.
#pragma once

#include <mpi.h>

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
}  // namespace dtrain::test
