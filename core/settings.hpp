// core/settings.hpp — the one place that reads environment variables.
//
// Every environment variable dtrain honours is listed here (after NCCL_PARAM /
// Horovod's common.h). Nothing else in the tree calls getenv().
//
//   DTRAIN_DATA_DIR       default folder of converted datasets (default "data")
//   DTRAIN_FASHION_DIR    folder with Fashion-MNIST's gzipped IDX files
//                         (default /usr/share/datasets/fashion-mnist, Debian's
//                         dataset-fashion-mnist package)
// The test-only *_AT_STEP variables take a step's 0-based index (the trainer's
// loop counter); what a user reads — progress lines, metrics, checkpoint
// names, and the messages of a diverged loss, a skipped or aborted step, the
// watchdog and the exchange timeout — counts steps from 1, so index i is
// "step i + 1" there. The injected failures' own messages name the index.
//
//   DTRAIN_FAIL_AT_STEP   test only: the trainer throws at this step (with
//   DTRAIN_FAIL_RANK      DTRAIN_FAIL_RANK, only on that rank (a worker, or a
//                         server in its update; a speculating ps server runs
//                         it also in a step later rolled back); default every
//                         worker)
//   DTRAIN_FAIL_MODE      test only: how that rank fails: throw (default), kill
//                         (raise SIGKILL on itself), stop (raise SIGSTOP)
//   DTRAIN_CKPT_KILL_AT   test only: the checkpoint writer raises SIGKILL on
//                         itself at its N-th kill point (io/checkpoint.hpp)
//   DTRAIN_STARTUP_TIMEOUT seconds `dtrain train` may take from exec to its
//                         liveness ring (MPI_Init, the first collectives);
//                         past it the rank exits 1 with a message, and the
//                         launcher ends the job (default 300; 0 = no limit)
//   DTRAIN_SIGNAL_AT_STEP test only: the rank DTRAIN_SIGNAL_RANK (default 0)
//   DTRAIN_SIGNAL_RANK    raises DTRAIN_SIGNAL (USR1 default, or TERM) on
//   DTRAIN_SIGNAL         itself at this step (a worker before it, a server in
//                         its update, speculative or not): a stop request at
//                         a known step
//   DTRAIN_TRACE_SAMPLES  test only: every worker appends "step i0 i1 …" (the
//                         dataset indices of its minibatch) to <value>.<rank>
//   DTRAIN_NONFINITE_AT_STEP test only: the worker of DTRAIN_NONFINITE_RANK
//   DTRAIN_NONFINITE_RANK (world rank, default 0) writes +Inf into its
//                         gradient at this step (at index 0: the range
//                         backward reports last)
//   DTRAIN_CONVERT_KILL_AT test only: `dtrain data imagefolder` raises SIGKILL
//                         on itself in the first checkpoint at which this run
//                         has stored at least this many images, after writing
//                         them and before recording them (io/image_store.hpp)
//   SLURM_NTASKS          checked against the MPI world size (comm/) when srun
//                         started the ranks (not under mpirun, see below)
//   OMPI_COMM_WORLD_SIZE  set by OpenMPI's mpirun for the processes it starts:
//                         then mpirun, not the allocation, sets the world size
//   SLURM_CPUS_PER_TASK   default loader / compute thread count
//   DTRAIN_CHECKPOINT_LOCK_WAIT  seconds a job waits for another process's lock
//                         on its --checkpoint-dir before it is refused
//                         (io::CheckpointStore::lock). Default 120 under Slurm
//                         (SLURM_JOB_ID set): a job requeued after its node
//                         died may find its predecessor's lock on a network
//                         file system until the server's lease ends; else 0
//   CUDA_VISIBLE_DEVICES  shown in the start-up placement table (the CUDA
//                         runtime itself applies it)
#pragma once

#include <optional>
#include <string>

namespace dtrain::settings {

std::optional<std::string> get(const char* name);           // unset or empty → nullopt
std::string get_or(const char* name, const std::string& fallback);
std::optional<long> get_long(const char* name);              // throws Error on a non-number
// get_or for a folder the user set and messages show: UsageError on a control character.
std::string get_text_or(const char* name, const std::string& fallback);

inline std::string fashion_dir() {
  return get_text_or("DTRAIN_FASHION_DIR", "/usr/share/datasets/fashion-mnist");
}
inline std::string data_dir() { return get_text_or("DTRAIN_DATA_DIR", "data"); }
inline std::optional<long> fail_at_step() { return get_long("DTRAIN_FAIL_AT_STEP"); }
inline std::optional<long> fail_rank() { return get_long("DTRAIN_FAIL_RANK"); }
inline std::string fail_mode() { return get_or("DTRAIN_FAIL_MODE", "throw"); }
inline std::string fail_point() { return get_or("DTRAIN_FAIL_POINT", "start"); }
inline std::optional<long> ckpt_kill_at() { return get_long("DTRAIN_CKPT_KILL_AT"); }
inline std::optional<long> nonfinite_at_step() { return get_long("DTRAIN_NONFINITE_AT_STEP"); }
inline std::optional<long> nonfinite_rank() { return get_long("DTRAIN_NONFINITE_RANK"); }
// Tests only: the smallest arena (parameters) whose allreduce-mode non-finite
// check is shared out (engine/worker_loop.cpp kSharedCheckMinParams), so
// LeNet-5's integration runs take that path too.
inline std::optional<long> shared_check_min_params() { return get_long("DTRAIN_SHARED_CHECK_MIN_PARAMS"); }
inline double startup_timeout_s() {
  const std::optional<long> v = get_long("DTRAIN_STARTUP_TIMEOUT");
  return v ? static_cast<double>(*v) : 300.0;
}
// DTRAIN_STARTED_FILE: rank 0 creates this file once every rank is through
// MPI_Init and the first collective (slurm/train.sbatch relaunches a step that
// died before it existed: nothing had been computed; slurm/README.md).
inline std::optional<std::string> started_file() { return get("DTRAIN_STARTED_FILE"); }
inline std::optional<long> signal_at_step() { return get_long("DTRAIN_SIGNAL_AT_STEP"); }
inline long signal_rank() { return get_long("DTRAIN_SIGNAL_RANK").value_or(0); }
inline std::string signal_name() { return get_or("DTRAIN_SIGNAL", "USR1"); }
inline std::optional<long> convert_kill_at() { return get_long("DTRAIN_CONVERT_KILL_AT"); }
inline std::optional<std::string> trace_samples() { return get("DTRAIN_TRACE_SAMPLES"); }
inline std::optional<long> slurm_ntasks() { return get_long("SLURM_NTASKS"); }
inline bool started_by_mpirun() { return get("OMPI_COMM_WORLD_SIZE").has_value(); }
inline std::optional<long> slurm_cpus_per_task() { return get_long("SLURM_CPUS_PER_TASK"); }
inline double checkpoint_lock_wait_s() {
  const std::optional<long> v = get_long("DTRAIN_CHECKPOINT_LOCK_WAIT");
  return v ? static_cast<double>(*v) : get("SLURM_JOB_ID") ? 120.0 : 0.0;
}
inline std::optional<std::string> cuda_visible_devices() { return get("CUDA_VISIBLE_DEVICES"); }

}  // namespace dtrain::settings
