// layers/cpu/threads.cpp — thread count and places of the CPU kernels.
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "core/error.hpp"
#include "layers/backend.hpp"

namespace dtrain::layers {

void set_cpu_threads(int threads) {
  if (threads < 1) threads = 1;
  omp_set_num_threads(threads);     // oneDNN (OpenMP runtime) and our loops
  openblas_set_num_threads(threads);
}

std::vector<int> pin_cpu_threads(const std::vector<int>& cpus) {
  const int team = omp_get_max_threads();
  if (team < 2 || static_cast<int>(cpus.size()) < team) return {};
  int failed = -1;
#pragma omp parallel num_threads(team)
  {
    const int i = omp_get_thread_num();
    if (i > 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[static_cast<size_t>(i)], &set);
      if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
#pragma omp critical
        failed = cpus[static_cast<size_t>(i)];
      }
    }
  }
  DT_CHECK(failed < 0, "cannot pin a compute thread to CPU ", failed);
  return std::vector<int>(cpus.begin(), cpus.begin() + team);
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
