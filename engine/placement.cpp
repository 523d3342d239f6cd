// engine/placement.cpp — the start-up placement table (engine/placement.hpp).
#include "engine/placement.hpp"

#include <mpi.h>

#include <set>
#include <string>
#include <vector>

#include "core/cpuset.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "engine/train_job.hpp"
#include "layers/backend.hpp"
#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

namespace dtrain::engine {

void widen_initial_thread() {
  const std::vector<int> places = layers::cpu_place_cpus();
  if (places.empty()) return;  // OpenMP binds nothing: the thread has the process's set
  try {
    if (cpuset::thread_cpus() != places) cpuset::set_thread_cpus(places);
  } catch (const Error&) {
    // A kernel that refuses leaves the runtime's binding: the table shows it.
  }
}

HostCpus host_cpus(MPI_Comm world) {
  MPI_Comm host = MPI_COMM_NULL;
  DT_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int n = 1, me = 0;
  MPI_Comm_size(host, &n);
  MPI_Comm_rank(host, &me);
  const std::vector<int> mine = cpuset::thread_cpus();
  // Every rank's set as a bitmap of kMaxCpus bits.
  constexpr int kMaxCpus = 4096;
  std::vector<uint8_t> bits(kMaxCpus / 8, 0), all(static_cast<size_t>(n) * kMaxCpus / 8);
  for (int c : mine)
    if (c < kMaxCpus) bits[static_cast<size_t>(c) / 8] |= static_cast<uint8_t>(1u << (c % 8));
  const int rc = MPI_Allgather(bits.data(), kMaxCpus / 8, MPI_BYTE, all.data(), kMaxCpus / 8, MPI_BYTE, host);
  MPI_Comm_free(&host);
  DT_CHECK_MPI(rc);
  HostCpus h{mine, 1};
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    for (int i = 0; i < kMaxCpus / 8; ++i)
      if (all[static_cast<size_t>(r) * kMaxCpus / 8 + static_cast<size_t>(i)] & bits[static_cast<size_t>(i)]) {
        ++h.sharers;
        break;
      }
  }
  return h;
}

namespace {

// "none" (CPU backends, servers), else "1 (GPU-<uuid> pci …, CUDA_VISIBLE_DEVICES=…)".
std::string gpu_text(const TrainJob& job) {
  if (job.cuda_device < 0) return "none";
  std::string physical;
#ifdef DTRAIN_HAVE_CUDA
  physical = layers::cuda_device_key(job.cuda_device) + ", ";
#endif
  return std::to_string(job.cuda_device) + " (" + physical +
         "CUDA_VISIBLE_DEVICES=" + settings::cuda_visible_devices().value_or("unset") + ")";
}

}  // namespace

void log_placement(const TrainJob& job) {
  MPI_Comm world = job.topo.world();
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  DT_CHECK_MPI(MPI_Get_processor_name(name, &len));
  const std::string host(name, static_cast<size_t>(len));
  const std::string line = "rank " + std::to_string(job.rank()) + (job.topo.is_server() ? " server " : " worker ") +
                           host + " cpus " + cpuset::cpu_ranges(cpuset::thread_cpus()) + " gpu " + gpu_text(job) +
                           " threads " + std::to_string(job.threads) +
                           (job.pinned.empty() ? std::string() : " (pinned to " + cpuset::cpu_ranges(job.pinned) + ")") +
                           (job.topo.is_server() ? std::string() : " + " + std::to_string(job.loader_threads) + " loader");
  // Rank 0 gathers every rank's line (and host name, to count the hosts).
  const std::string mine = host + '\n' + line;
  const int n = static_cast<int>(mine.size());
  const int size = job.world_size;
  const bool root = job.rank() == 0;
  std::vector<int> sizes(root ? static_cast<size_t>(size) : 0), offsets(sizes.size());
  DT_CHECK_MPI(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, world));
  int total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    offsets[r] = total;
    total += sizes[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  DT_CHECK_MPI(MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0, world));
  if (!root) return;
  std::set<std::string> hosts;
  std::vector<std::string> lines;
  for (size_t r = 0; r < sizes.size(); ++r) {
    const std::string e = all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(sizes[r]));
    const size_t nl = e.find('\n');
    hosts.insert(e.substr(0, nl));
    lines.push_back(e.substr(nl + 1));
  }
  log::info("dtrain: placement: ", size, size == 1 ? " rank" : " ranks", " on ", hosts.size(),
            hosts.size() == 1 ? " host" : " hosts", " (host, CPUs it may run on, GPU, threads: compute + loader)");
  for (const std::string& l : lines) log::info("dtrain:   ", l);
}

}  // namespace dtrain::engine
