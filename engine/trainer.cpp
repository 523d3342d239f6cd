// engine/trainer.cpp — train(): one rank's run, from validation to the saved
// parameters, handing the loop to its role.
//
// Phases: the TrainJob (validation: every usage error, on every rank), a
// barrier, the liveness ring (comm/watchdog.hpp, --heartbeat-timeout; every
// rank but in a 1-rank job), rank 0's placement table (engine/placement.hpp:
// host, CPUs and GPU of every rank), rank 0's run folder
// (engine/run_folder.hpp), the exchange (every rank but in a 1-rank job) with
// the start-up broadcast of rank 0's parameters, then the role: a ServerLoop
// on the parameter servers, a WorkerLoop (with its Evaluator and RunRecorder)
// on the workers; last, rank 0
// saves the parameters and buffers (--save-params), and every rank sends its
// timeline to rank 0, which writes it (--timeline, engine/timeline.hpp; its
// first clock measurement comes before the exchange). Start-up broadcast and
// --save-params go through host copies on a device (download, upload).
#include "engine/trainer.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "comm/exchange.hpp"
#include "comm/wait.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "engine/checkpoint.hpp"
#include "engine/exit.hpp"
#include "engine/metrics.hpp"
#include "engine/placement.hpp"
#include "engine/tune.hpp"
#include "engine/preemption.hpp"
#include "engine/run_recorder.hpp"  // Clock, seconds_since
#include "engine/run_folder.hpp"
#include "engine/server_loop.hpp"
#include "engine/timeline.hpp"
#include "engine/train_job.hpp"
#include "engine/worker_loop.hpp"
#include "io/float_arrays.hpp"
#include "layers/cpu/onednn.hpp"

namespace dtrain::engine {

namespace {

// The exchange of a multi-rank job (null for one rank), parameters broadcast
// from rank 0. Servers take part in its construction; workers' device set-up
// (NCCL communicators) happens inside, after the device-binding check.
std::unique_ptr<comm::Exchange> make_exchange(TrainJob& job, Timeline* tl) {
  if (job.world_size == 1) return nullptr;
  const TrainConfig& cfg = job.cfg;
  comm::ExchangeOptions eo;
  eo.mode = cfg.mode;
  eo.bucket_bytes = static_cast<size_t>(cfg.bucket_mb * 1048576.0);
  eo.max_chunk_elems = static_cast<size_t>(cfg.max_chunk_elems);
  eo.step_timeout_s = cfg.comm_timeout;
  if (tl) eo.timeline = job.topo.is_server() ? tl->main() : tl->exchange();  // the thread that runs the transfers
  if (job.on_device()) {
    layers::Backend& be = *job.backend;
    eo.device.enabled = true;
    eo.device.cuda_device = job.cuda_device;
    eo.device.host_addressable = job.cuda_device < 0;  // cpu-staged: MPI may touch its memory
    eo.device.download = [&be](const float* d, float* h, size_t n) { be.download(d, h, n * sizeof(float)); };
    eo.device.upload = [&be](const float* h, float* d, size_t n) { be.upload(h, d, n * sizeof(float)); };
    eo.device.host_alloc = [&be](size_t bytes) { return be.host_alloc(bytes); };
    eo.device.host_free = [&be](void* p) { be.host_free(p); };
  }
  layers::Net& net = *job.net;
  auto ex = std::make_unique<comm::Exchange>(job.topo, eo, net.num_params());
  with_host_copy(*job.backend, net.params().data(), net.num_params(), /*write_back=*/true,
                 [&](float* p) { ex->broadcast_params(p); });
  return ex;
}

// /params and /buffers of the net, HDF5 (io/float_arrays.hpp).
void save_params(TrainJob& job, const std::string& path) {
  layers::Net& net = *job.net;
  layers::Backend& be = *job.backend;
  const size_t nb = static_cast<size_t>(net.buffers().numel());
  with_host_copy(be, net.params().data(), net.num_params(), false, [&](float* p) {
    with_host_copy(be, net.buffers().data(), nb, false, [&](float* bufs) {
      std::vector<std::pair<std::string, std::string>> attrs;
      if (job.cfg.compute_stand_in_ms > 0)  // not a trained model: the file says so (issue 16)
        attrs.emplace_back("compute_stand_in",
                           format::shortest(job.cfg.compute_stand_in_ms) +
                               " ms per step instead of forward and backward: an emulation of the exchange; these "
                               "parameters were updated with stand-in gradients and are not a trained model");
      io::save_float_arrays(path, {{"params", {p, net.num_params()}}, {"buffers", {bufs, nb}}}, attrs);
    });
  });
}

// Every rank must run the same job: ranks started with different job files
// or arguments (an MPMD launch, a node with another copy of the job file)
// would run different collectives and hang. Each rank hashes its parsed job
// (the keys a tuned job file holds, engine/tune.hpp, and the data paths);
// rank 0 compares and names the first rank that differs (exit 2 on every rank).
void check_same_job(const TrainConfig& cfg, MPI_Comm world) {
  int size = 1, rank = 0;
  DT_CHECK_MPI(MPI_Comm_size(world, &size));
  DT_CHECK_MPI(MPI_Comm_rank(world, &rank));
  if (size == 1) return;
  struct Id {
    uint64_t hash;
    char host[64];
  } mine{}, *all = nullptr;
  // The timeline's collectives run on every rank or on none.
  mine.hash = fnv1a(job_file_text(cfg) + "\n" + cfg.train_data + "\n" + cfg.test_data + "\ntimeline " +
                    (cfg.timeline.empty() ? std::string("off") : std::to_string(cfg.timeline_steps)));
  int len = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Get_processor_name(name, &len);
  std::snprintf(mine.host, sizeof mine.host, "%.63s", name);
  std::vector<Id> ids(rank == 0 ? static_cast<size_t>(size) : 0);
  all = rank == 0 ? ids.data() : nullptr;
  DT_CHECK_MPI(MPI_Gather(&mine, sizeof(Id), MPI_BYTE, all, sizeof(Id), MPI_BYTE, 0, world));
  rank0_usage_check(world, [&] {
    for (int r = 1; r < size; ++r)
      if (ids[static_cast<size_t>(r)].hash != ids[0].hash)
        DT_USAGE("rank ", r, " on ", ids[static_cast<size_t>(r)].host, " runs another job than rank 0 on ",
                 ids[0].host, ": its job file (", cfg.job.empty() ? std::string("none") : cfg.job,
                 " on rank 0) or its arguments differ; every rank must be started with the same job");
  });
}

}  // namespace

TrainResult train(const TrainConfig& cfg, MPI_Comm world_comm) {
  // The liveness ring (comm/watchdog.hpp) from the start to the end: a rank
  // killed, stopped or frozen at any point — validation, reading the
  // checkpoint to resume from, training, the last writes — ends the job, named.
  // Roles follow from the layout alone (the last --ps ranks serve).
  int world_size = 1, world_rank = 0;
  DT_CHECK_MPI(MPI_Comm_size(world_comm, &world_size));
  DT_CHECK_MPI(MPI_Comm_rank(world_comm, &world_rank));
  std::unique_ptr<comm::Watchdog> watchdog;
  if (world_size > 1 && cfg.heartbeat_timeout > 0) {
    comm::WatchdogOptions wo;
    wo.timeout_s = cfg.heartbeat_timeout;
    const int first_server = world_size - std::clamp(cfg.ps, 0, world_size);
    const std::string role = world_rank >= first_server
                                 ? "parameter server " + std::to_string(world_rank - first_server)
                                 : "worker " + std::to_string(world_rank);
    watchdog = std::make_unique<comm::Watchdog>(world_comm, role, wo);
  } else if (world_size > 1 && world_rank == 0) {
    // --comm-timeout bounds only a step's gradient exchange: a rank stopped in
    // the evaluation, a checkpoint or the last writes hung the job for good,
    // without a word (a break report, 2026-12-05).
    log::warn("--heartbeat-timeout 0: a rank that stops or freezes outside a step's gradient exchange "
              "(evaluation, checkpoints, the final writes) can hang this job; --comm-timeout covers only the exchange");
  }
  disarm_startup_guard();  // from here the ring (or a 1-rank job's own errors) covers a stuck rank
  check_same_job(cfg, world_comm);
  TrainJob job(cfg, world_comm);
  job.watchdog = watchdog.get();
  // bf16 that runs yet runs slower than fp32 (AVX512-BF16 without AMX on
  // Sapphire/Emerald Rapids-class cores): said once, by rank 0 (a worker),
  // measured with its team (~0.1 s). Rank 0's CPU stands for the job's.
  // Advice only: a failed measurement never fails the job.
  if (world_rank == 0 && cfg.device == Device::cpu && cfg.precision == layers::DType::bf16) {
    std::string w;
    try {
      w = layers::measure_bf16_slower_warning();
    } catch (const std::exception&) {
    }
    if (!w.empty()) log::warn(w);
  }
  // Checkpoint folder and resume file: checked (and read) before anything is
  // written, every rank failing with rank 0's message (exit 2).
  Checkpointer ckpt(job);
  const bool resuming = ckpt.prepare();
  // Stop requests (handlers installed at start-up, engine/main.cpp) become a
  // checkpoint only where there is a folder for it; without one, SIGTERM and
  // SIGUSR1 get their default action back (the job ends), also for one that
  // arrived during start-up.
  if (!ckpt.enabled()) restore_default_stop_actions();

  // Validation ends here. Every rank passed it before rank 0 writes anything
  // (a rank that failed is in the exit agreement, engine/exit.hpp, and never
  // reaches this barrier: the job ends without a run folder).
  DT_CHECK_MPI(MPI_Barrier(world_comm));
  log_placement(job);  // rank 0 prints where every rank runs: host, CPUs, GPU
  TrainResult result;
  result.nodes = job.topo.num_nodes();
  RunOutputs out;
  if (job.rank() == 0) {
    out = make_outputs(cfg);
    result.metrics_path = out.metrics;
    result.run_dir = out.dir;
    // A job that fails from here leaves its reason in the metrics file (core/error.hpp).
    if (!out.metrics.empty())
      set_failure_recorder([path = out.metrics, t0 = Clock::now()](const std::string& what, int exit_code) {
        MetricsWriter::try_append_record(
            path, {{"kind", "failed"}, {"error", what}, {"exit_code", exit_code}, {"wall_s", seconds_since(t0)}}, 2.0);
      });
  }

  ResumePoint from;
  if (resuming) {
    from = ckpt.restore();  // before the exchange broadcasts rank 0's parameters
    result.resumed_from_step = from.step;
  }
  std::unique_ptr<Timeline> timeline;
  if (!cfg.timeline.empty()) {
    // Buffer capacity: slices and buckets of the arena (an upper bound), each with up to world-size peers.
    const size_t arena = job.net->num_params();
    const size_t slice = comm::ExchangeOptions{}.max_slice;
    const size_t bucket = std::max<size_t>(1, static_cast<size_t>(cfg.bucket_mb * 1048576.0) / sizeof(float));
    const size_t parts = (arena + slice - 1) / slice + static_cast<size_t>(job.topo.num_servers()) +
                         (arena + bucket - 1) / bucket + 1;
    timeline = std::make_unique<Timeline>(job.topo, from.step, cfg.timeline_steps,
                                          timeline_events_per_step(parts, job.world_size));
    timeline->compute_stand_in_ms = cfg.compute_stand_in_ms;
  }
  std::unique_ptr<comm::Exchange> ex = make_exchange(job, timeline.get());
  if (job.topo.is_server()) {
    ServerLoop server(job, *ex, ckpt);
    server.run();
    result.server = true;
    result.requeue = server.requeue();
  } else {
    {
      WorkerLoop worker(job, ex.get(), out, ckpt, from, timeline ? timeline->main() : nullptr);
      worker.run(result);
    }
    if (!result.requeue && !out.save_params.empty() && job.rank() == 0) save_params(job, out.save_params);
  }
  // Every recording thread is done: the workers' exchange threads wait
  // between steps (stop() was called), the servers left serve().
  if (timeline) {
    timeline->write(out.timeline);
    if (job.rank() == 0) log::info("dtrain: timeline ", out.timeline);
  }
  // Every rank leaves together, after rank 0's last files (parameters, the
  // final checkpoint) are on disk: on a stop, no rank exits "requeue me" before
  // the checkpoint exists (a failed write aborts the job instead); and the
  // watchdog watches every rank to the end, so a rank 0 that freezes in its
  // last write is named rather than leaving the others in MPI_Finalize. The
  // barrier waits under the wait policy: ranks that finished early do not spin
  // on cores rank 0 still computes on.
  MPI_Request done = MPI_REQUEST_NULL;
  DT_CHECK_MPI(MPI_Ibarrier(world_comm, &done));
  comm::wait_request(done);
  return result;
}

}  // namespace dtrain::engine
