// engine/checkpoint.cpp — Checkpointer (checkpoint.hpp): the state of a job
// in and out of checkpoint files, and the thread that writes them.
#include "engine/checkpoint.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/settings.hpp"
#include "core/format.hpp"
#include "layers/format.hpp"
#include "core/hash.hpp"
#include "core/log.hpp"
#include "engine/exit.hpp"

namespace dtrain::engine {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FNV-1a over the arena's layout: names, offsets and counts of the parameter
// and buffer ranges. Two nets with the same model and class count agree.
int64_t layout_hash(const layers::Net& net) {
  uint64_t h = kFnvOffset;
  for (const auto* ranges : {&net.param_ranges(), &net.buffer_ranges()})
    for (const layers::ParamRange& r : *ranges) {
      h = fnv1a(r.name, h);
      h = fnv1a(&r.offset, sizeof r.offset, h);
      h = fnv1a(&r.count, sizeof r.count, h);
    }
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

// What the job trains on, and how, beyond the optimisation's numbers: kept in
// each checkpoint as "input:KEY" strings and compared on resume, where a
// difference is logged as a changed lr is. A job file edited between a stop
// and its requeue (another training file of the same size, other mean/std,
// augmentation, clipping) resumed without a word (a break report,
// 2026-12-05). A checkpoint written before them holds none: nothing compared.
// dropout: only for a model with dropout layers (any other ignores the key: a
// changed --dropout was warned about on a ResNet's resume).
std::vector<std::pair<std::string, std::string>> input_settings(const TrainConfig& cfg, const layers::Net& net) {
  auto list = [](const std::vector<float>& v) {
    std::string t;
    for (float x : v) {
      if (!t.empty()) t += ',';
      t += format::shortest(x);
    }
    return t.empty() ? std::string("(default)") : t;
  };
  auto yes = [](bool b) { return std::string(b ? "true" : "false"); };
  std::error_code ec;  // the absolute path: a requeue from another folder names the same file
  const std::filesystem::path data = std::filesystem::weakly_canonical(cfg.train_data, ec);
  std::vector<std::pair<std::string, std::string>> v = {
      {"train-data", ec ? cfg.train_data : data.string()},
      {"mean", list(cfg.mean)},
      {"std", list(cfg.std)},
      {"augment", io::crop_mode_name(cfg.augment)},
      {"augment-pad", std::to_string(cfg.augment_pad)},
      {"augment-flip", yes(cfg.augment_flip)},
      {"clip-grad-norm", format::shortest(cfg.clip_grad_norm)},
      {"decay-bias-bn", yes(cfg.decay_bias_bn)}};
  const auto layers = net.summary();
  if (std::any_of(layers.begin(), layers.end(), [](const layers::LayerSummary& l) { return l.kind == "dropout"; }))
    v.emplace_back("dropout", format::shortest(cfg.dropout));
  if (cfg.augment == io::CropMode::rrc) {  // read only by rrc crops: compared only when both runs crop so
    v.emplace_back("rrc-scale", range_text(cfg.rrc_scale_min, cfg.rrc_scale_max));
    v.emplace_back("rrc-ratio", range_text(cfg.rrc_ratio_min, cfg.rrc_ratio_max));
  }
  return v;
}
constexpr const char* kInputPrefix = "input:";

// Chunked MPI_Bcast of floats (counts above 2^31 − 1 are cut).
void bcast_floats(float* p, size_t n, MPI_Comm comm) {
  constexpr size_t kChunk = size_t{1} << 30;
  for (size_t off = 0; off < n; off += kChunk)
    DT_CHECK_MPI(MPI_Bcast(p + off, static_cast<int>(std::min(kChunk, n - off)), MPI_FLOAT, 0, comm));
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

int64_t get_int(const io::CheckpointState& s, const std::string& path, const char* key) {
  auto it = s.ints.find(key);
  if (it == s.ints.end()) DT_USAGE("checkpoint ", path, ": attribute '", key, "' is missing");
  return it->second;
}

const io::FloatArray& get_array(const io::CheckpointState& s, const std::string& path, const char* key, size_t n) {
  auto it = s.arrays.find(key);
  if (it == s.arrays.end()) DT_USAGE("checkpoint ", path, ": array '", key, "' is missing");
  if (n != static_cast<size_t>(-1) && it->second.data.size() != n)
    DT_USAGE("checkpoint ", path, ": array '", key, "' has ", it->second.data.size(), " values, expected ", n);
  return it->second;
}

}  // namespace

// ---------------------------------------------------------------- the writer

// One thread on rank 0; at most one write in flight (submit waits for the
// previous one). An error of a write is rethrown by the next take_done (every
// step boundary polls it), submit or wait: the job ends at the first boundary
// after the write failed, not at the next checkpoint — training on without a
// checkpoint to fall back on would only lose more on a preemption.
struct Checkpointer::Writer {
  explicit Writer(io::CheckpointStore& s) : store(s), thread([this] { loop(); }) {}
  ~Writer() {
    {
      std::lock_guard<std::mutex> lk(mu);
      quit = true;
    }
    cv.notify_all();
    thread.join();
  }

  void submit(int64_t step, io::CheckpointState&& s, double snapshot_s) {
    wait_idle();
    {
      std::lock_guard<std::mutex> lk(mu);
      pending_step = step;
      pending = std::move(s);
      pending_snapshot_s = snapshot_s;
      has_pending = true;
    }
    cv.notify_all();
  }
  void wait_idle() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return !has_pending && !busy; });
    if (error) {
      std::exception_ptr e = error;
      error = nullptr;
      std::rethrow_exception(e);
    }
  }
  // The arrays of the last state written (empty before the first write ends).
  io::CheckpointState take_spare() {
    std::lock_guard<std::mutex> lk(mu);
    io::CheckpointState s = std::move(spare);
    spare = io::CheckpointState{};
    return s;
  }
  std::vector<CheckpointWritten> take_done() {
    std::lock_guard<std::mutex> lk(mu);
    if (error) {
      std::exception_ptr e = error;
      error = nullptr;
      std::rethrow_exception(e);
    }
    std::vector<CheckpointWritten> d;
    d.swap(done);
    return d;
  }

  void loop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return quit || has_pending; });
      if (!has_pending) return;  // quit
      io::CheckpointState s = std::move(pending);
      const int64_t step = pending_step;
      CheckpointWritten w;
      w.step = step;
      w.snapshot_s = pending_snapshot_s;
      has_pending = false;
      busy = true;
      lk.unlock();
      const double t0 = now_s();
      std::exception_ptr err;
      try {
        w.path = store.write(step, s);
        std::error_code ec;
        w.bytes = std::filesystem::file_size(w.path, ec);
      } catch (...) {
        err = std::current_exception();
      }
      w.write_s = now_s() - t0;
      lk.lock();
      busy = false;
      spare = std::move(s);  // its arrays serve the next snapshot: no new allocation per checkpoint
      if (err) error = err;
      else done.push_back(w);
      cv.notify_all();
    }
  }

  io::CheckpointStore& store;
  std::mutex mu;
  std::condition_variable cv;
  bool quit = false, has_pending = false, busy = false;
  int64_t pending_step = 0;
  double pending_snapshot_s = 0;
  io::CheckpointState pending, spare;
  std::exception_ptr error;
  std::vector<CheckpointWritten> done;
  std::thread thread;  // last: starts after the members above exist
};

// ---------------------------------------------------------------- Checkpointer

Checkpointer::Checkpointer(TrainJob& job) : job_(job) {
  if (!job.cfg.checkpoint_dir.empty())
    store_ = std::make_unique<io::CheckpointStore>(job.cfg.checkpoint_dir, job.cfg.checkpoint_keep);
  last_time_ = now_s();
}

Checkpointer::~Checkpointer() {
  if (!writer_) return;
  try {
    writer_->wait_idle();
  } catch (const std::exception& e) {
    log::warn("the last checkpoint write failed: ", e.what());
  }
}

std::string resolve_auto_resume(const io::CheckpointStore& store) {
  std::vector<std::string> skipped;
  const std::string path = store.find_latest_valid(&skipped);
  for (const std::string& s : skipped) log::warn("--resume auto: skipping ", s);
  if (path.empty() && !store.list().empty())
    DT_USAGE("option 'resume' = auto: ", store.dir(), " holds checkpoint files but none is valid (",
             skipped.empty() ? std::string("see above") : skipped.front(),
             "); move them away to start afresh, or give --resume PATH");
  if (!path.empty() && !skipped.empty()) log::warn("--resume auto: falling back to ", path);
  return path;
}

bool Checkpointer::prepare() {
  const TrainConfig& cfg = job_.cfg;
  layers::Net& net = *job_.net;
  const size_t P = net.num_params();
  const size_t nb = static_cast<size_t>(net.buffers().numel());
  int resuming = 0;
  // Every refusal below comes after the folder's lock: a refused start takes
  // its .lock away again (it writes nothing).
  auto checks = [&] {
    std::string path;
    if (store_) {
      // keep + 1 checkpoints exist at once: the new one is written before the oldest is removed.
      const uint64_t one = (2 * P + static_cast<size_t>(job_.topo.num_workers()) * nb) * sizeof(float) + (1u << 20);
      store_->check_writable(static_cast<uint64_t>(cfg.checkpoint_keep + 1) * one);
      store_->lock(settings::checkpoint_lock_wait_s());  // held for the job's life: another job is refused
      store_->check_names_free();
      if (const int n = store_->remove_stray_temporaries(); n > 0)
        log::info("dtrain: removed ", n, " temporary file(s) of an interrupted checkpoint write in ", store_->dir());
      if (cfg.resume == "none" && !store_->list().empty())
        DT_USAGE("option 'checkpoint-dir': ", store_->dir(), " holds checkpoints of an earlier run (",
                 store_->list().back(), "); continue it with --resume auto, or give another folder");
      if (cfg.resume == "auto") {
        path = resolve_auto_resume(*store_);
        if (path.empty()) log::info("dtrain: --resume auto: no checkpoint in ", store_->dir(), "; a fresh start");
      }
    }
    if (cfg.resume != "none" && cfg.resume != "auto") {
      path = cfg.resume;
      // A given file, and a folder for the new checkpoints that already holds
      // some: only when the file is the folder's newest, else the new run
      // would overwrite another timeline's checkpoints.
      if (store_ && !store_->list().empty()) {
        std::error_code ec;
        const std::string newest = store_->list().back();
        if (!std::filesystem::equivalent(path, newest, ec))
          DT_USAGE("option 'resume': ", store_->dir(), " (option 'checkpoint-dir') holds checkpoints up to ", newest,
                   ", which the new run would overwrite; resume from it with --resume auto, or give another "
                   "--checkpoint-dir for a run from ", path);
      }
    }
    if (path.empty()) return;
    io::CheckpointState s;
    try {
      s = io::read_checkpoint(path);  // UsageError naming the file
    } catch (const UsageError& e) {
      if (cfg.resume == "auto") throw;
      DT_USAGE("option 'resume': ", e.what());
    }
    auto str = [&](const char* k) {
      auto it = s.strings.find(k);
      return it == s.strings.end() ? std::string("?") : it->second;
    };
    const int64_t ck_params = get_int(s, path, "num_params");
    if (str("model") != cfg.model || ck_params != static_cast<int64_t>(P) ||
        get_int(s, path, "num_buffers") != static_cast<int64_t>(nb) ||
        get_int(s, path, "layout_crc") != layout_hash(net))
      DT_USAGE("checkpoint ", path, " is of model ", str("model"), " (", ck_params,
               " parameters); this job trains model ", cfg.model, " (", P,
               " parameters): give the job's own checkpoint folder, or the same model and class count");
    const int64_t gb = get_int(s, path, "global_batch");
    if (gb != job_.global_batch()) {
      const int W = job_.topo.num_workers();
      DT_USAGE("checkpoint ", path, " was taken with a global minibatch of ", gb, " (",
               get_int(s, path, "workers"), " workers × ", get_int(s, path, "minibatch"), "); this job's is ",
               job_.global_batch(), " (", W, " × ", cfg.minibatch, "): ",
               gb % W == 0 ? "set --minibatch " + std::to_string(gb / W)
                           : "no minibatch gives " + std::to_string(gb) + " with " + std::to_string(W) +
                                 " workers: use a worker count that divides it",
               " (a different global minibatch would silently change the optimisation)");
    }
    if (get_int(s, path, "n_train") != job_.n_train || get_int(s, path, "steps_per_epoch") != job_.steps_per_epoch())
      DT_USAGE("checkpoint ", path, " was taken on ", get_int(s, path, "n_train"),
               " training samples; this job has ", job_.n_train, " (train-data / max-train-samples changed)");
    if (get_int(s, path, "seed") != cfg.seed)
      log::warn("checkpoint ", path, " was taken with seed ", get_int(s, path, "seed"), "; this job has ",
                cfg.seed, ": the data order from here on follows the new seed");
    // The optimisation may be changed on purpose (a longer run, a lower lr),
    // but never silently: every difference is logged.
    auto real = [&](const char* k) {
      auto it = s.reals.find(k);
      return it == s.reals.end() ? std::nan("") : it->second;
    };
    std::string changes;
    auto note = [&](const std::string& what, const std::string& was, const std::string& now) {
      if (was != now) changes += (changes.empty() ? "" : ", ") + what + " " + was + " → " + now;
    };
    note("lr-schedule", str("lr_schedule"), lr_schedule_name(cfg.lr_schedule));
    // The master weights and optimizer state are f32 in either precision, so a
    // checkpoint resumes in the other one; the change is said (older ones lack it).
    if (s.strings.count("precision")) note("precision", s.strings.at("precision"), layers::precision_name(cfg.precision));
    note("planned steps", std::to_string(get_int(s, path, "planned_steps")), std::to_string(job_.planned_steps()));
    const int64_t st = get_int(s, path, "step");
    if (st < job_.planned_steps() && std::isfinite(real("lr")))
      note("lr at step " + std::to_string(st), format::shortest(static_cast<float>(real("lr"))),
           format::shortest(job_.schedule.at(st)));
    if (s.reals.count("momentum")) note("momentum", format::shortest(static_cast<float>(real("momentum"))), format::shortest(cfg.momentum));
    if (s.reals.count("weight_decay"))
      note("weight-decay", format::shortest(static_cast<float>(real("weight_decay"))), format::shortest(cfg.weight_decay));
    for (const auto& [k, v] : input_settings(cfg, *job_.net))
      if (auto it = s.strings.find(kInputPrefix + k); it != s.strings.end()) note(k, it->second, v);
    if (std::none_of(s.strings.begin(), s.strings.end(), [](const auto& e) { return e.first.starts_with(kInputPrefix); }))
      log::warn("checkpoint ", path, " records none of the job's inputs (written by a dtrain before 2026-12-05): its "
                "training file, mean/std, augmentation, dropout and clipping are not compared with this job's");
    if (!changes.empty())
      log::warn("checkpoint ", path, " was taken with another optimisation (", changes,
                "): from step ", st, " on, this job's applies");
    get_array(s, path, "params", P);
    get_array(s, path, "momentum", P);
    get_array(s, path, "buffers", static_cast<size_t>(-1));
    resume_ = std::move(s);
    resume_path_ = path;
    resuming = 1;
  };
  rank0_usage_check(job_.topo.world(), [&] {
    try {
      checks();
    } catch (const UsageError&) {
      if (store_) store_->release_lock_and_remove();
      throw;
    }
  });
  DT_CHECK_MPI(MPI_Bcast(&resuming, 1, MPI_INT, 0, job_.topo.world()));
  has_checkpoint_ = store_ && resuming != 0;
  return resuming != 0;
}

ResumePoint Checkpointer::restore() {
  layers::Net& net = *job_.net;
  layers::Backend& be = *job_.backend;
  const size_t P = net.num_params();
  const size_t nb = static_cast<size_t>(net.buffers().numel());
  const bool rank0 = job_.rank() == 0;
  ResumePoint r;
  // Scalars: [step, epoch, step_in_epoch, skips, consecutive, workers]; train_seconds.
  int64_t ints[6] = {0, 0, 0, 0, 0, 0};
  double secs = 0;
  if (rank0) {
    const io::CheckpointState& s = *resume_;
    const std::string& p = resume_path_;
    ints[0] = get_int(s, p, "step");
    ints[1] = get_int(s, p, "epoch");
    ints[2] = get_int(s, p, "step_in_epoch");
    ints[3] = get_int(s, p, "nonfinite_skips");
    ints[4] = get_int(s, p, "consecutive_skips");
    ints[5] = get_int(s, p, "workers");
    auto it = s.reals.find("train_seconds");
    secs = it == s.reals.end() ? 0 : it->second;
    auto str = [&](const char* k) {
      auto i = s.strings.find(k);
      return i == s.strings.end() ? std::string("?") : i->second;
    };
    log::info("dtrain: resuming from ", p, ": ", ints[0], " steps done, epoch ", ints[1] + 1, " step ", ints[2] + 1,
              " next");
    const int64_t servers = get_int(s, p, "servers");
    if (ints[5] != job_.topo.num_workers() || servers != job_.topo.num_servers() ||
        str("mode") != comm::mode_name(job_.cfg.mode))
      log::info("dtrain: the checkpoint was taken with ", ints[5], " worker(s), ", servers, " server(s), mode ",
                str("mode"), "; this run has ", job_.topo.num_workers(), ", ", job_.topo.num_servers(), ", ",
                comm::mode_name(job_.cfg.mode), ": the arena is re-sharded",
                ints[5] != job_.topo.num_workers() && nb > 0
                    ? " and every worker starts from the mean batch-norm statistics"
                    : "");
  }
  MPI_Comm world = job_.topo.world();
  DT_CHECK_MPI(MPI_Bcast(ints, 6, MPI_INT64_T, 0, world));
  DT_CHECK_MPI(MPI_Bcast(&secs, 1, MPI_DOUBLE, 0, world));
  r.step = ints[0];
  r.epoch = static_cast<int>(ints[1]);
  r.step_in_epoch = ints[2];
  r.nonfinite_skips = ints[3];
  r.consecutive_skips = ints[4];
  r.train_seconds = secs;
  r.path = resume_path_;
  DT_CHECK(r.epoch * job_.steps_per_epoch() + r.step_in_epoch == r.step, "checkpoint ", resume_path_, ": step ",
           r.step, " is not epoch ", r.epoch, " step ", r.step_in_epoch, " of ", job_.steps_per_epoch());

  // Parameters: into rank 0's arena (the exchange's start-up broadcast takes them everywhere).
  if (rank0) be.upload(resume_->arrays.at("params").data.data(), net.params().data(), P * sizeof(float));
  // Momentum: every rank (servers keep their slices).
  std::vector<float> mom(std::max<size_t>(P, 1));
  if (rank0) std::copy_n(resume_->arrays.at("momentum").data.data(), P, mom.data());
  bcast_floats(mom.data(), P, world);
  be.upload(mom.data(), job_.sgd->momentum_state(), P * sizeof(float));
  // Batch-norm statistics: each worker its own row, or the mean of the rows.
  if (nb > 0 && job_.topo.is_worker()) {
    const int W = job_.topo.num_workers();
    const int Wc = static_cast<int>(ints[5]);
    std::vector<float> row(nb);
    if (rank0) {
      const std::vector<float>& all = resume_->arrays.at("buffers").data;
      DT_CHECK(all.size() == static_cast<size_t>(Wc) * nb, "checkpoint ", resume_path_, ": buffers hold ", all.size(),
               " values, expected ", Wc, " × ", nb);
      if (Wc != W) {
        std::fill(row.begin(), row.end(), 0.0f);
        for (int w = 0; w < Wc; ++w)
          for (size_t i = 0; i < nb; ++i) row[i] += all[static_cast<size_t>(w) * nb + i];
        for (float& x : row) x /= static_cast<float>(Wc);
      }
    }
    MPI_Comm workers = job_.topo.workers();
    if (Wc == W) {
      const float* all = rank0 ? resume_->arrays.at("buffers").data.data() : nullptr;
      if (W > 1) DT_CHECK_MPI(MPI_Scatter(all, static_cast<int>(nb), MPI_FLOAT, row.data(), static_cast<int>(nb),
                                          MPI_FLOAT, 0, workers));
      else std::copy_n(all, nb, row.data());
    } else if (W > 1) {
      bcast_floats(row.data(), nb, workers);
    }
    be.upload(row.data(), net.buffers().data(), nb * sizeof(float));
  }
  resume_.reset();
  return r;
}

bool Checkpointer::due_by_steps(int64_t steps_done, bool epoch_end) const {
  if (!store_) return false;
  const TrainConfig& cfg = job_.cfg;
  if (steps_done >= job_.planned_steps()) return true;
  if (epoch_end && cfg.checkpoint_epoch_end) return true;
  return cfg.checkpoint_every_steps > 0 && steps_done % cfg.checkpoint_every_steps == 0;
}

bool Checkpointer::due_by_time() const {
  return store_ && job_.cfg.checkpoint_every_s > 0 && now_s() - last_time_ >= job_.cfg.checkpoint_every_s;
}

void Checkpointer::take(const LoopState& st, comm::Exchange* ex, bool final) {
  DT_CHECK(store_, "take() without --checkpoint-dir");
  has_checkpoint_ = true;  // this one, or (if its write fails) the job ends with that error
  const double t0 = now_s();
  layers::Net& net = *job_.net;
  layers::Backend& be = *job_.backend;
  const TrainConfig& cfg = job_.cfg;
  const size_t P = net.num_params();
  const size_t nb = static_cast<size_t>(net.buffers().numel());
  const int W = job_.topo.num_workers();
  const bool rank0 = job_.rank() == 0;

  if (rank0 && !writer_) writer_ = std::make_unique<Writer>(*store_);
  // The previous write first (submit would wait for it anyway): then its
  // arrays are free for this snapshot, and no new memory is taken.
  if (rank0) writer_->wait_idle();
  io::CheckpointState s = rank0 ? writer_->take_spare() : io::CheckpointState{};
  io::FloatArray params = std::move(s.arrays["params"]), momentum = std::move(s.arrays["momentum"]),
                 buffers = std::move(s.arrays["buffers"]);
  s.arrays.clear();
  if (rank0) {
    params.shape = {static_cast<int64_t>(P)};
    momentum.shape = {static_cast<int64_t>(P)};
    params.data.resize(P);
    momentum.data.resize(P);
    buffers.shape = {W, static_cast<int64_t>(nb)};
    buffers.data.resize(static_cast<size_t>(W) * nb);
  }
  if (ex && ex->servers_update()) {
    ex->request_checkpoint(final, rank0 ? params.data.data() : nullptr, rank0 ? momentum.data.data() : nullptr);
  } else if (rank0) {
    be.download(net.params().data(), params.data.data(), P * sizeof(float));
    be.download(job_.sgd->momentum_state(), momentum.data.data(), P * sizeof(float));
  }
  if (nb > 0) {
    std::vector<float> mine(nb);
    be.download(net.buffers().data(), mine.data(), nb * sizeof(float));
    if (W > 1)
      DT_CHECK_MPI(MPI_Gather(mine.data(), static_cast<int>(nb), MPI_FLOAT, rank0 ? buffers.data.data() : nullptr,
                              static_cast<int>(nb), MPI_FLOAT, 0, job_.topo.workers()));
    else
      buffers.data = mine;
  }
  if (!rank0) return;
  // Never a checkpoint with a non-finite value (a skipped step never updates,
  // so this is an update that overflowed): the previous one stays the latest.
  for (const auto* a : {&params, &momentum, &buffers})
    if (!all_finite(a->data))
      DT_FAIL("checkpoint of step ", st.step, " not written: the ",
              a == &params ? "parameters" : a == &momentum ? "momentum" : "batch-norm statistics",
              " hold a non-finite value (the previous checkpoint stays the latest); lower --lr or set --clip-grad-norm");
  s.arrays["params"] = std::move(params);
  s.arrays["momentum"] = std::move(momentum);
  s.arrays["buffers"] = std::move(buffers);
  s.ints = {{"step", st.step},
            {"epoch", st.epoch},
            {"step_in_epoch", st.step_in_epoch},
            {"seed", cfg.seed},
            {"workers", W},
            {"servers", job_.topo.num_servers()},
            {"minibatch", cfg.minibatch},
            {"global_batch", job_.global_batch()},
            {"num_params", static_cast<int64_t>(P)},
            {"num_buffers", static_cast<int64_t>(nb)},
            {"layout_crc", layout_hash(net)},
            {"steps_per_epoch", job_.steps_per_epoch()},
            {"n_train", job_.n_train},
            {"planned_steps", job_.planned_steps()},
            {"nonfinite_skips", st.nonfinite_skips},
            {"consecutive_skips", st.consecutive_skips}};
  s.reals = {{"train_seconds", st.train_seconds},
             {"lr", st.step < job_.planned_steps() ? job_.schedule.at(st.step) : 0.0},
             {"momentum", cfg.momentum},
             {"weight_decay", cfg.weight_decay}};
  s.strings = {{"model", cfg.model},
               {"mode", comm::mode_name(cfg.mode)},
               {"lr_schedule", lr_schedule_name(cfg.lr_schedule)},
               {"precision", layers::precision_name(cfg.precision)},
               {"rng", "counter-based: every stream is a function of (seed, epoch, sample) or (seed, step, worker)"}};
  for (auto& [k, v] : input_settings(cfg, *job_.net)) s.strings[kInputPrefix + k] = std::move(v);
  writer_->submit(st.step, std::move(s), now_s() - t0);
  if (final) writer_->wait_idle();
  last_time_ = now_s();
}

void Checkpointer::serve_side(comm::Exchange& ex) {
  ex.send_server_state(job_.net->params().data(), job_.sgd->momentum_state());
}

std::vector<CheckpointWritten> Checkpointer::finished() {
  return writer_ ? writer_->take_done() : std::vector<CheckpointWritten>{};
}

void Checkpointer::wait() {
  if (writer_) writer_->wait_idle();
}

}  // namespace dtrain::engine
