// core/cpuset.hpp — CPU sets as the kernel gives them and as people read them.
//
// thread_cpus(): the CPUs the calling thread may run on (sched_getaffinity),
// ascending. set_thread_cpus(): the same, written (sched_setaffinity).
// cpu_ranges(): a set in the kernel's own list notation (cpuset(7), taskset -c,
// /proc/PID/status Cpus_allowed_list): consecutive CPUs become a range,
// {0,1,2,3,8} → "0-3,8", {5} → "5", {} → "none". Used by the start-up
// placement table (engine/placement.hpp).
#pragma once

#include <string>
#include <vector>

namespace dtrain::cpuset {

// Ascending CPU numbers; throws Error (with errno's text) when the kernel refuses.
std::vector<int> thread_cpus();
// Throws Error when the kernel refuses (e.g. a CPU outside the cgroup's set); {} is refused.
void set_thread_cpus(const std::vector<int>& cpus);
// Any order, duplicates allowed; negative numbers are a usage mistake (Error).
std::string cpu_ranges(std::vector<int> cpus);

}  // namespace dtrain::cpuset
