// engine/worker_loop.cpp — WorkerLoop (worker_loop.hpp).
//
// Device path (--device cuda, and cpu-staged, its test double): the worker's
// backend says discrete_memory(); the arenas (parameters, gradients, buffers,
// momentum), activations, the minibatch, its labels, probabilities and the loss
// gradient live on the device. Per step the loader's batch (pinned host memory
// from the backend's host_alloc) is uploaded; the exchange gets device
// pointers and stages gradients to pinned host buffers slice by slice as
// backward reports them, reducing inside the node with NCCL (or MPI), and puts
// the new parameters back on the device before finish_step returns
// (comm/ps_client.cpp, comm/staging.hpp). Batch-norm averaging and evaluation counts go
// through host copies (download, upload).
#include "engine/worker_loop.hpp"

#include <csignal>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/hash.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "engine/grad_check.hpp"
#include "io/batch.hpp"

namespace dtrain::engine {

namespace {

// The loader of this worker's batches, in step order (I/O hidden under compute):
// from `from` (a resumed run) to the schedule's total steps (max-steps
// applied), in pinned buffers on a device.
// Loader threads per rank: the job's choice (choose_thread_counts).
int po_threads(const TrainJob& job) { return job.loader_threads; }

io::Prefetcher make_loader(TrainJob& job, const ResumePoint& from) {
  const TrainConfig& cfg = job.cfg;
  io::PrefetchOptions po;
  po.threads = po_threads(job);
  po.depth = cfg.loader_depth;
  po.mean = cfg.mean;
  po.std = cfg.std;
  po.augment = job.train_transform.augment;
  po.input = job.train_transform.input;
  po.resize = job.train_transform.resize;
  po.dct_scaling = job.train_transform.dct_scaling;
  po.fit_raw = job.train_transform.fit_raw;
  po.seed = static_cast<uint64_t>(cfg.seed) * 0x9E3779B97F4A7C15ull + 11;
  po.start_epoch = from.epoch;
  po.start_step = from.step_in_epoch;
  po.total_batches = std::max<int64_t>(0, job.planned_steps() - from.step);
  if (job.on_device()) {  // pinned batch buffers: the per-step upload runs at full bandwidth
    layers::Backend& be = *job.backend;
    po.allocator.allocate = [&be](size_t bytes) { return be.host_alloc(bytes); };
    po.allocator.release = [&be](void* p) { be.host_free(p); };
  }
  return io::Prefetcher(*job.train_set, *job.sampler, po);
}

// The smallest arena whose allreduce-mode non-finite check is shared out
// (check_local_gradient): 1 Mi floats, 4 MB, ~0.3 ms of one core's read, where
// the small allreduce it costs instead takes microseconds. LeNet-5 and
// ResNet-20 stay below (each worker reads its whole sum), AlexNet-OWT and
// ResNet-50 above.
constexpr size_t kSharedCheckMinParams = size_t{1} << 20;

}  // namespace

WorkerLoop::WorkerLoop(TrainJob& job, comm::Exchange* ex, const RunOutputs& out, Checkpointer& ckpt,
                       const ResumePoint& from, timeline::Buffer* tl)
    : job_(job),
      ex_(ex),
      ckpt_(ckpt),
      from_(from),
      loader_(make_loader(job, from)),  // a prvalue: constructed in place (the Prefetcher does not move)
      recorder_(out.metrics, job.rank() == 0, job.planned_steps(), job.planned_epochs(), job.steps_per_epoch(),
                job.cfg.compute_stand_in_ms, job.cfg.metrics_append),
      dev_(*job.backend, job.cfg.minibatch, job.net->input_shape(), job.classes()),
      loss_scale_(1.0f / static_cast<float>(job.global_batch())),
      agreement_(job.world_size > 1 ? job.topo.workers() : MPI_COMM_NULL),
      timeline_(tl) {
  const TrainConfig& cfg = job.cfg;
  if (job.test_set)
    evaluator_.emplace(*job.test_set, cfg, job.topo.worker_index(), job.topo.num_workers(), ex, po_threads(job));
  if (settings::nonfinite_rank().value_or(0) == job.rank()) inject_at_ = settings::nonfinite_at_step();
  if (cfg.compute_stand_in_ms > 0) stand_in_.emplace(*job.net, cfg.compute_stand_in_ms, job.topo.num_workers());
  // The non-finite check (check_local_gradient). Without clipping only
  // finiteness matters, and the ranges backward proved finite need not be read
  // (Net::unproven_grad_ranges; AlexNet-OWT's fully connected layers, 234 of
  // its 244 MB): in a 1-process job, or in allreduce mode where the workers
  // add their bounds and each reads a share of the rest
  // (summed_grads_finite, engine/grad_check.hpp: one more small collective, so only for
  // arenas of kSharedCheckMinParams and more). The stand-in writes the arena
  // without a backward, the test's injected Inf after it: read it all, or
  // give no bounds. Where the bounds go unused, backward does not make them.
  const size_t shared_min = static_cast<size_t>(std::max(0L, settings::shared_check_min_params().value_or(
                                                                 static_cast<long>(kSharedCheckMinParams))));
  if (cfg.clip_grad_norm == 0 && !stand_in_ && !job.backend->discrete_memory()) {
    if (!ex && !inject_at_)
      check_ = GradCheck::bounded_local;
    else if (ex && !ex->servers_update() && job.net->num_params() >= shared_min)
      check_ = GradCheck::bounded_shared;
  }
  job.net->set_grad_bounds(check_ != GradCheck::whole);
  if (ex || inject_at_)
    on_ready_ = [this, ex](size_t begin, size_t end) {
      interval_.grads_ready_bytes += static_cast<double>(end - begin) * sizeof(float);
      // Test only: +Inf into this worker's gradient at index 0, in the last
      // range backward reports (so in ps mode the servers have returned the
      // other slices speculatively before they meet it), before it leaves.
      if (inject_ && begin == 0 && end > 0) {
        const float inf = std::numeric_limits<float>::infinity();
        job_.backend->upload(&inf, job_.net->grads().data(), sizeof(float));
        inject_ = false;
      }
      if (ex) ex->grads_ready(begin, end);
    };
  if (auto path = settings::trace_samples()) {
    const std::string file = *path + "." + std::to_string(job.rank());
    sample_trace_.reset(std::fopen(file.c_str(), "a"));
    DT_CHECK(sample_trace_, "DTRAIN_TRACE_SAMPLES: cannot open ", file);
  }
  step_ = from.step;
  epoch_ = from.epoch;
  train_seconds_ = from.train_seconds;
  nonfinite_skips_ = from.nonfinite_skips;
  consecutive_skips_ = from.consecutive_skips;
  if (job.rank() == 0)
    log::info("dtrain: model ", cfg.model, " (", job.net->num_params(), " parameters), ", job.n_train,
              " training samples, minibatch ", cfg.minibatch, " × ", job.topo.num_workers(), " worker(s), ",
              job.steps_per_epoch(), " steps/epoch, ", job.threads, " thread(s)/rank, backend ", job.backend->name(),
              " ", layers::precision_name(cfg.precision),
              "; ", job.topo.describe(),
              job.world_size > 1 ? std::string(", mode ") + comm::mode_name(cfg.mode) : std::string(),
              ex && !ex->node_reducer().empty() ? ", intra-node reducer " + ex->node_reducer() : std::string(),
              job.cuda_device >= 0 ? ", GPU " + std::to_string(job.cuda_device) + " (rank 0)" : std::string(),
              stand_in_ ? ", compute stand-in " + format::shortest(stand_in_->ms()) +
                              " ms per step (no forward or backward; the loss is recorded as 0)"
                        : std::string());
  if (job.rank() == 0 && !out.dir.empty()) log::info("dtrain: run folder ", out.dir);
}

void WorkerLoop::run(TrainResult& result) {
  interval_ = IntervalStats{};
  recorder_.start(step_);
  if (step_ >= job_.planned_steps() && job_.rank() == 0)
    log::info("dtrain: the checkpoint is at step ", step_, ", the run's last (", job_.planned_steps(),
              "): nothing left to train");
  // A checkpoint at an epoch's end (or at the run's last step) is taken before
  // that epoch's evaluation (run_epoch), so the stopped run may not have scored
  // it — killed during the evaluation, or its test set failed to read: the
  // resume scores it first. (Where the stopped run had scored it, an appended
  // metrics file holds that epoch's record twice, the same values: the same
  // model and data.)
  if (evaluator_ && step_ > 0 && (from_.step_in_epoch == 0 || step_ >= job_.planned_steps())) {
    evaluate_epoch(from_.step_in_epoch == 0 ? epoch_ - 1 : epoch_, 0.0, result, /*at_resume=*/true);
  }
  int64_t first = from_.step_in_epoch;
  for (; epoch_ < job_.cfg.epochs && step_ < job_.planned_steps(); ++epoch_, first = 0) {
    const bool more = run_epoch(first, result);
    if (!more) break;
  }
  agreement_.finish();
  if (ex_) ex_->stop();  // a no-op after a final checkpoint (the servers have left)
  ckpt_.wait();
  for (const CheckpointWritten& w : ckpt_.finished())
    recorder_.checkpoint(w.step, w.path, w.bytes, w.snapshot_s, w.write_s);
  check_same_params();
  result.steps = step_;
  result.seconds = recorder_.elapsed();
  result.nonfinite_skips = nonfinite_skips_;
  const int64_t trained = step_ - from_.step;
  const double t = trained_seconds() - from_.train_seconds;  // a stop inside an epoch counts its part
  result.images_per_s = t > 0 ? static_cast<double>(trained * job_.global_batch()) / t : 0.0;
}

// After the run: every worker must hold bitwise the same parameters (they
// took the same updates, or skipped the same steps). Rank 0 compares a hash
// of each worker's arena and names a worker that differs.
void WorkerLoop::check_same_params() {
  const int W = job_.topo.num_workers();
  if (!ex_ || W == 1) return;
  layers::Net& net = *job_.net;
  uint64_t h = 0;
  with_host_copy(*job_.backend, net.params().data(), net.num_params(), false,
                 [&](float* p) { h = fnv1a(p, net.num_params() * sizeof(float)); });
  std::vector<uint64_t> all(job_.rank() == 0 ? static_cast<size_t>(W) : 0);
  DT_CHECK_MPI(MPI_Gather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, job_.topo.workers()));
  if (job_.rank() != 0) return;
  for (int w = 1; w < W; ++w)
    DT_CHECK(all[static_cast<size_t>(w)] == all[0], "after step ", step_, " worker ", w,
             " holds other parameters than worker 0: the workers diverged (a bug: please report it)");
  log::info("dtrain: parameters bitwise identical on all ", W, " workers");
}

double WorkerLoop::trained_seconds() const {
  return train_seconds_ + (in_epoch_ ? seconds_since(epoch_start_) : 0.0);
}

bool WorkerLoop::run_epoch(int64_t first, TrainResult& result) {
  epoch_start_ = Clock::now();
  in_epoch_ = true;
  const auto epoch_start = epoch_start_;
  const int64_t spe = job_.steps_per_epoch();
  for (int64_t s = first; s < spe; ++s) {
    const float lr = train_step(s);
    const bool last = step_ >= job_.planned_steps();
    const bool epoch_end = s == spe - 1 || last;
    // Every log-interval steps of the epoch (not of this start: a resumed run's
    // lines and records fall on the uninterrupted run's steps), and at its end.
    if ((s + 1) % job_.cfg.log_interval == 0 || epoch_end) end_interval(s, lr, result);
    const double epoch_time = epoch_end ? seconds_since(epoch_start) : 0.0;
    if (epoch_end) close_epoch(epoch_time, result);
    // The epoch's checkpoint (when due) before its evaluation: a test set
    // that fails to read loses the evaluation, not the epoch's training.
    const bool go_on = boundary(epoch_end, result);
    if (epoch_end) evaluate_epoch(epoch_, epoch_time, result);
    if (!go_on || last) return false;
    if (epoch_end) return true;
  }
  return true;  // not reached: the epoch's last step returns above
}

// Every worker passes the same boundaries in the same order, so the
// agreement's collectives and the checkpoints' gathers match up.
bool WorkerLoop::boundary(bool epoch_end, TrainResult& result) {
  for (const CheckpointWritten& w : ckpt_.finished())
    recorder_.checkpoint(w.step, w.path, w.bytes, w.snapshot_s, w.write_s);
  const bool last = step_ >= job_.planned_steps();
  if (!ckpt_.enabled()) return true;
  // A checkpoint pause belongs to the step that just ended.
  timeline::Buffer* tl = timeline_ ? timeline_->for_step(step_ - 1) : nullptr;
  if (last) {  // the run's end: its final state, for a later --epochs extension
    timeline::Span span(tl, timeline::Kind::checkpoint, step_ - 1);
    const auto t0 = Clock::now();
    ckpt_.take(loop_state(), ex_, /*final=*/false);
    interval_.t_checkpoint += seconds_since(t0);
    return true;
  }
  // Bits: 1 = a stop request (this rank or a server), 2 = rank 0's clock says a checkpoint is due.
  // Rank 0 asks once per due time (the checkpoint follows one boundary later).
  const bool ask_time = job_.rank() == 0 && !time_asked_ && ckpt_.due_by_time();
  time_asked_ |= ask_time;
  const uint32_t local = (stop_signal() != 0 || peer_signalled_ ? 1u : 0u) | (ask_time ? 2u : 0u);
  const uint32_t agreed = agreement_.poll(local);
  const auto t0 = Clock::now();
  if (agreed & 1u) {
    if (job_.rank() == 0)
      log::info("dtrain: stop requested (", stop_signal() == SIGTERM ? "SIGTERM" : stop_signal() == SIGUSR1 ? "SIGUSR1" : "a signal on another rank",
                "): checkpointing step ", step_, " and exiting with ", kExitRequeue, " (requeue)");
    timeline::Span span(tl, timeline::Kind::checkpoint, step_ - 1);
    ckpt_.take(loop_state(), ex_, /*final=*/true);
    result.requeue = true;
    return false;
  }
  if ((agreed & 2u) || ckpt_.due_by_steps(step_, epoch_end)) {
    timeline::Span span(tl, timeline::Kind::checkpoint, step_ - 1);
    ckpt_.take(loop_state(), ex_, /*final=*/false);
    time_asked_ = false;  // the clock restarts with this checkpoint
    interval_.t_checkpoint += seconds_since(t0);
  }
  return true;
}

// The position of the next step follows from the steps done (every epoch has
// steps_per_epoch steps), also after a run that ends inside an epoch.
LoopState WorkerLoop::loop_state() const {
  LoopState st;
  st.step = step_;
  st.epoch = static_cast<int>(step_ / job_.steps_per_epoch());
  st.step_in_epoch = step_ % job_.steps_per_epoch();
  st.train_seconds = trained_seconds();
  st.nonfinite_skips = nonfinite_skips_;
  st.consecutive_skips = consecutive_skips_;
  return st;
}

float WorkerLoop::train_step(int64_t s) {
  job_.report_step(step_);
  if (!job_.failures.in_check && job_.failures.hits_worker(step_, job_.rank()) && job_.failures.fire())
    DT_FAIL("injected failure at step ", step_, " (DTRAIN_FAIL_AT_STEP)");
  maybe_raise_test_signal(step_, job_.rank());
  // The timeline (off: tl is null and no clock is read): step, loader wait,
  // forward, backward, exchange wait, update, back to back.
  using TK = timeline::Kind;
  timeline::Buffer* tl = timeline_ ? timeline_->for_step(step_) : nullptr;
  const int64_t tl_start = tl ? timeline::now_ns() : 0;
  const io::Batch& batch = loader_.next();  // blocks only when the loader fell behind
  int64_t tl_mark = tl_start;
  auto mark = [&](TK k) {  // the event k from the last mark to now
    const int64_t t = timeline::now_ns();
    tl->add(k, tl_mark, t, step_);
    tl_mark = t;
  };
  if (tl) mark(TK::loader_wait);
  DT_CHECK(batch.epoch == epoch_ && batch.step == s, "loader delivered (", batch.epoch, ", ", batch.step,
           ") for (", epoch_, ", ", s, ")");
  if (sample_trace_) {
    std::fprintf(sample_trace_.get(), "%lld", static_cast<long long>(step_));
    for (int64_t i : batch.indices) std::fprintf(sample_trace_.get(), " %lld", static_cast<long long>(i));
    std::fputc('\n', sample_trace_.get());
    std::fflush(sample_trace_.get());
  }
  layers::Net& net = *job_.net;
  layers::Backend& backend = *job_.backend;
  const int b = job_.cfg.minibatch;
  const int k = job_.classes();
  auto t1 = Clock::now();
  const float lr = job_.schedule.at(step_);
  double loss_sum = 0;  // the stand-in's loss: 0 (its records say so)
  inject_ = inject_at_ && *inject_at_ == step_;
  if (stand_in_) {  // no forward or backward; the exchange sees backward's ranges, on the stand-in's schedule
    if (ex_) ex_->begin_step(step_, net.params().data(), net.grads().data());
    stand_in_->step(t1, backend, net.grads().data(), on_ready_);
    if (tl) mark(TK::stand_in);
  } else {
    const layers::Tensor x = dev_.x(batch.x, b);  // uploads on a device
    const int32_t* labels = dev_.labels(batch.labels, b);
    layers::Tensor dlogits = dev_.dlogits(b);
    net.set_step_seed((static_cast<uint64_t>(job_.cfg.seed) * 1000003ull + static_cast<uint64_t>(step_)) * 65537ull +
                      static_cast<uint64_t>(job_.topo.worker_index()));
    const layers::Tensor& logits = net.forward(x, /*train=*/true);
    int64_t correct = 0;
    loss_sum = backend.softmax_xent_forward(logits.data(), labels, b, k, dev_.probs(), &correct);
    backend.softmax_xent_backward(dev_.probs(), labels, b, k, loss_scale_, dlogits.data());
    if (tl) mark(TK::forward);
    if (ex_) ex_->begin_step(step_, net.params().data(), net.grads().data());
    net.backward(dlogits, on_ready_);
    if (tl) mark(TK::backward);
  }
  comm::StepTimes ct;
  if (ex_) ct = ex_->finish_step(net.params().data(), net.grads().data());
  if (tl && ex_) mark(TK::exchange_wait);
  bool skipped = false;
  if (!ex_ || !ex_->servers_update()) {
    double norm = 0;
    skipped = check_local_gradient(&norm);
    if (!skipped) job_.sgd->step(net, lr);  // and the bf16 weight mirror, where the net keeps one
  } else {
    skipped = ct.skipped;  // the servers' joint decision (senders know it; hybrid members do not need it)
  }
  peer_signalled_ = ct.peer_signalled;
  if (tl && (!ex_ || !ex_->servers_update())) mark(TK::update);
  if (tl) tl->add(TK::step, tl_start, tl_mark, step_);
  auto t2 = Clock::now();
  count_skip(skipped);

  double loss = loss_sum / b;
  // Mean cross-entropy starts near ln K; beyond 1e4 no run recovers into a useful model.
  // A non-finite loss goes with a non-finite gradient: the policy above decided.
  if (std::isfinite(loss) && loss > 1e4)
    DT_FAIL_SHARED("training loss is ", loss, " at step ", step_ + 1, " (epoch ", epoch_ + 1, ", lr ", lr,
            "): diverged; lower --lr or check the data");
  interval_.t_io += batch.wait_s;
  interval_.t_compute += std::chrono::duration<double>(t2 - t1).count() - ct.exposed_s;
  interval_.t_comm += ct.exposed_s;
  interval_.t_comm_busy += ct.busy_s;
  if (std::isfinite(loss)) {
    interval_.loss += loss;
    ++interval_.steps_with_loss;
  }
  interval_.skipped += skipped ? 1 : 0;
  ++interval_.steps;
  ++step_;
  return lr;
}

bool WorkerLoop::check_local_gradient(double* norm) {
  if (job_.failures.in_check && job_.failures.hits_worker(step_, job_.rank()) && job_.failures.fire())
    DT_FAIL("injected failure at step ", step_, " (DTRAIN_FAIL_AT_STEP, DTRAIN_FAIL_POINT=check)");
  layers::Net& net = *job_.net;
  const size_t n = net.num_params();
  const double clip = job_.cfg.clip_grad_norm;
  bool bad = false;
  double sumsq = 0;
  if (check_ == GradCheck::bounded_local || check_ == GradCheck::bounded_shared) {
    bad = check_ == GradCheck::bounded_local
              ? !layers::backward_grads_finite(net)
              : !summed_grads_finite(net, job_.topo.worker_index(), job_.topo.num_workers(), !inject_at_,
                                             [&](double* v, size_t c) { ex_->sum_over_workers_in_step(v, c); });
    *norm = bad ? std::numeric_limits<double>::infinity() : 0.0;
    return bad;
  }
  with_host_copy(*job_.backend, net.grads().data(), n, /*write_back=*/false, [&](float* g) {
    sumsq = layers::sum_of_squares(g, n);  // all threads, in a fixed order
    bad = !std::isfinite(sumsq);
  });
  *norm = bad ? std::numeric_limits<double>::infinity() : std::sqrt(sumsq);
  if (!bad && clip > 0 && *norm > clip) {
    const float scale = static_cast<float>(clip / *norm);
    with_host_copy(*job_.backend, net.grads().data(), n, /*write_back=*/true, [&](float* g) {
      for (size_t i = 0; i < n; ++i) g[i] *= scale;
    });
  }
  return bad;
}

void WorkerLoop::count_skip(bool skipped) {
  if (!skipped) {
    consecutive_skips_ = 0;
    return;
  }
  ++nonfinite_skips_;
  ++consecutive_skips_;
  const TrainConfig& cfg = job_.cfg;
  // Rank 0 decides (it knows in every mode: in ps/hybrid it is a sender); the
  // others carry on into the next step, where the abort ends them — the
  // message is printed once.
  if (job_.rank() != 0) return;
  if (cfg.on_nonfinite == NonfinitePolicy::abort)
    DT_FAIL("step ", step_ + 1, " (epoch ", epoch_ + 1, "): the summed gradient holds an Inf or NaN and "
            "--on-nonfinite is abort; no rank applied it",
            ckpt_.has_checkpoint() ? " (the last checkpoint is intact)" : "");
  if (consecutive_skips_ >= cfg.max_nonfinite_skips)
    DT_FAIL("step ", step_ + 1, " (epoch ", epoch_ + 1, "): ", consecutive_skips_,
            consecutive_skips_ == 1 ? " step" : " steps", " in a row had an Inf or NaN in the summed gradient (--max-nonfinite-skips ",
            cfg.max_nonfinite_skips, "): the run diverged; lower --lr, set --clip-grad-norm, or check the data");
  if (job_.rank() == 0)
    log::warn("step ", step_ + 1, ": the summed gradient holds an Inf or NaN; every rank skipped the update (",
              nonfinite_skips_, " skipped so far)");
}

void WorkerLoop::end_interval(int64_t s, float lr, TrainResult& result) {
  IntervalReport r;
  r.wall_s = seconds_since(interval_.start);
  r.images_per_s = static_cast<double>(interval_.steps * job_.global_batch()) / r.wall_s;
  // The loss of all workers, not only rank 0's shard: sum and count of finite losses.
  double l[2] = {interval_.loss, static_cast<double>(interval_.steps_with_loss)};
  if (ex_) ex_->sum_over_workers(l, 2);
  r.loss = l[1] > 0 ? l[0] / l[1] : std::numeric_limits<double>::quiet_NaN();
  result.last_loss = r.loss;
  r.step = step_;
  r.epoch = epoch_ + 1;
  r.step_in_epoch = s + 1;
  r.lr = lr;
  recorder_.interval(r, interval_);
  interval_ = IntervalStats{};
}

void WorkerLoop::close_epoch(double epoch_time, TrainResult& result) {
  result.epochs = epoch_ + 1;
  train_seconds_ += epoch_time;
  in_epoch_ = false;
  layers::Net& net = *job_.net;
  // Batch-norm running statistics: the mean over workers, so every rank
  // checkpoints, evaluates and saves the same model.
  const size_t nb = static_cast<size_t>(net.buffers().numel());
  if (ex_ && nb > 0)
    with_host_copy(*job_.backend, net.buffers().data(), nb, true,
                   [&](float* h) { ex_->average_over_workers(h, nb); });
}

void WorkerLoop::evaluate_epoch(int epoch, double epoch_time, TrainResult& result, bool at_resume) {
  layers::Net& net = *job_.net;
  if (evaluator_) {
    const Evaluation e = evaluator_->evaluate(net, *job_.backend);
    result.test_loss = e.loss;
    result.test_accuracy = e.accuracy;
    result.test_top5_accuracy = e.top5_accuracy;
    recorder_.epoch(epoch + 1, step_, e.loss, e.accuracy, e.top5_accuracy, epoch_time, at_resume);
  } else if (!at_resume) {
    recorder_.epoch(epoch + 1, step_, -1, -1, -1, epoch_time);
  }
  interval_.start = Clock::now();  // evaluation is not training time
}

}  // namespace dtrain::engine
