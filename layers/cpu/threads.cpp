// layers/cpu/threads.cpp — thread count and places of the CPU kernels.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "layers/backend.hpp"

namespace dtrain::layers {

void set_cpu_threads(int threads) {
  if (threads < 1) threads = 1;
  omp_set_num_threads(threads);     // oneDNN (OpenMP runtime) and our loops
  openblas_set_num_threads(threads);
}

std::vector<int> cpu_place_cpus() {
  std::vector<int> cpus;
  if (omp_get_proc_bind() == omp_proc_bind_false) return cpus;
  for (int p = 0; p < omp_get_num_places(); ++p) {
    std::vector<int> ids(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
    if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
    cpus.insert(cpus.end(), ids.begin(), ids.end());
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace dtrain::layers
