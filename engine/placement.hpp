// engine/placement.hpp — where each rank runs: its host, the CPUs it may run
// on and its GPU, as the engine finds them (not as a launcher meant them).
//
// widen_initial_thread(): with OMP_PROC_BIND set (slurm/train.sbatch exports
// OMP_PROC_BIND=close, OMP_PLACES=cores), the OpenMP runtime binds the initial
// thread to its first place when the program loads, and every thread started
// from it later — the loader's, the exchange's, the watchdog's — would inherit
// that one core. main() calls this first: the initial thread gets the
// process's CPU set back (the union of the places); the OpenMP team's other
// threads are still bound to their places by the runtime.
//
// log_placement(): collective over the job's world; rank 0 prints one line
// per rank (stdout):
//   dtrain: placement: 6 ranks on 2 hosts (host, CPUs it may run on, GPU)
//   dtrain:   rank 0 worker node1 cpus 0-1 gpu none threads 1 + 1 loader
//   dtrain:   rank 4 server node1 cpus 4 gpu none threads 1
//   dtrain:   rank 1 worker gpu-n3 cpus 8-15 gpu 1 (GPU-6f… pci 0000:3b:00, CUDA_VISIBLE_DEVICES=0,1) threads 1 + 7 loader
// cpus: sched_getaffinity of the rank's main thread, in list notation
// (core/cpuset.hpp); gpu: the CUDA device the worker drives, or none (CPU
// backends, servers). Throws Error on an MPI failure.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <vector>

namespace dtrain::engine {

class TrainJob;

void widen_initial_thread();
void log_placement(const TrainJob& job);

// This rank's CPUs and who else may run on them, from every rank's CPU set on
// its host (an MPI_COMM_TYPE_SHARED split of `world`, collective).
//   cpus:    this rank's CPU set (sched_getaffinity), ascending.
//   sharers: the ranks of the host whose sets overlap it, this one included
//            (1: the launcher or Slurm bound the ranks apart, or it is the
//            host's only rank).
//   owned(): cpus when sharers == 1, else {} (shared CPUs: pinning would stack
//            ranks' threads). The trainer pins its compute team to them
//            (layers::pin_cpu_threads) when the OpenMP runtime binds nothing
//            itself (no OMP_PROC_BIND).
//   share(): cpus / sharers, at least 1: the CPUs the default thread counts
//            spread over (engine/train_job.hpp choose_thread_counts) — so a
//            rank that `mpirun` bound to one core, or started under `taskset`,
//            does not run more compute threads than it has CPUs.
struct HostCpus {
  std::vector<int> cpus;
  int sharers = 1;
  std::vector<int> owned() const { return sharers == 1 ? cpus : std::vector<int>{}; }
  int share() const { return std::max(1, static_cast<int>(cpus.size()) / std::max(1, sharers)); }
};
HostCpus host_cpus(MPI_Comm world);

}  // namespace dtrain::engine
