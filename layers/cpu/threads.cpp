// layers/cpu/threads.cpp — thread count of the CPU kernels.
#include <cblas.h>
#include <omp.h>

#include "layers/backend.hpp"

namespace dtrain::layers {

void set_cpu_threads(int threads) {
  if (threads < 1) threads = 1;
  omp_set_num_threads(threads);     // oneDNN (OpenMP runtime) and our loops
  openblas_set_num_threads(threads);
}

}  // namespace dtrain::layers
