// core/cpuset.cpp — CPU sets (core/cpuset.hpp).
#include "core/cpuset.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "core/error.hpp"

namespace dtrain::cpuset {

namespace {

// A dynamically sized cpu_set_t (machines with more than CPU_SETSIZE = 1024 CPUs exist).
struct Mask {
  explicit Mask(int ncpus) : n(ncpus), bytes(CPU_ALLOC_SIZE(ncpus)), set(CPU_ALLOC(ncpus), &free_set) {
    DT_CHECK(set, "CPU_ALLOC(", ncpus, ") failed");
    CPU_ZERO_S(bytes, set.get());
  }
  static void free_set(cpu_set_t* s) { CPU_FREE(s); }
  int n;
  size_t bytes;
  std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set;
};

}  // namespace

std::vector<int> thread_cpus() {
  // Grow the mask until the kernel's own (its nr_cpu_ids) fits: EINVAL means too small.
  for (int n = 1024;; n *= 2) {
    Mask m(n);
    if (sched_getaffinity(0, m.bytes, m.set.get()) == 0) {
      std::vector<int> cpus;
      for (int c = 0; c < n; ++c)
        if (CPU_ISSET_S(c, m.bytes, m.set.get())) cpus.push_back(c);
      return cpus;
    }
    DT_CHECK(errno == EINVAL && n < (1 << 20), "sched_getaffinity: ", std::strerror(errno));
  }
}

void set_thread_cpus(const std::vector<int>& cpus) {
  DT_CHECK(!cpus.empty(), "set_thread_cpus: an empty CPU set");
  const int top = *std::max_element(cpus.begin(), cpus.end());
  DT_CHECK(*std::min_element(cpus.begin(), cpus.end()) >= 0, "set_thread_cpus: a negative CPU number");
  Mask m(std::max(1024, top + 1));
  for (int c : cpus) CPU_SET_S(c, m.bytes, m.set.get());
  DT_CHECK(sched_setaffinity(0, m.bytes, m.set.get()) == 0, "sched_setaffinity(", cpu_ranges(cpus),
           "): ", std::strerror(errno));
}

std::string cpu_ranges(std::vector<int> cpus) {
  if (cpus.empty()) return "none";
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  DT_CHECK(cpus.front() >= 0, "cpu_ranges: a negative CPU number (", cpus.front(), ")");
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace dtrain::cpuset
