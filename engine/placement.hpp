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

#include <vector>

namespace dtrain::engine {

class TrainJob;

void widen_initial_thread();
void log_placement(const TrainJob& job);

// The CPUs this rank owns: its CPU set when no other rank on its host (an
// MPI_COMM_TYPE_SHARED split of `world`, collective) may run on any of them
// (the launcher or Slurm bound the ranks apart, or it is the host's only
// rank), else {} (shared CPUs: pinning would stack ranks' threads). The
// trainer pins its compute team to them (layers::pin_cpu_threads) when the
// OpenMP runtime binds nothing itself (no OMP_PROC_BIND).
std::vector<int> owned_cpus(MPI_Comm world);

}  // namespace dtrain::engine
