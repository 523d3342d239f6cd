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

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "io/batch.hpp"

namespace dtrain::engine {

namespace {

// The loader of this worker's batches, in step order (I/O hidden under compute):
// the schedule's total steps (max-steps applied), in pinned buffers on a device.
io::Prefetcher make_loader(TrainJob& job) {
  const TrainConfig& cfg = job.cfg;
  io::PrefetchOptions po;
  po.threads = cfg.loader_threads > 0 ? cfg.loader_threads : io::default_loader_threads(job.topo.ranks_on_host());
  po.depth = cfg.loader_depth;
  po.mean = cfg.mean;
  po.std = cfg.std;
  po.augment = {cfg.augment_pad, cfg.augment_flip};
  po.seed = static_cast<uint64_t>(cfg.seed) * 0x9E3779B97F4A7C15ull + 11;
  po.total_batches = job.planned_steps();
  if (job.on_device()) {  // pinned batch buffers: the per-step upload runs at full bandwidth
    layers::Backend& be = *job.backend;
    po.allocator.allocate = [&be](size_t bytes) { return be.host_alloc(bytes); };
    po.allocator.release = [&be](void* p) { be.host_free(p); };
  }
  return io::Prefetcher(*job.train_set, *job.sampler, po);
}

}  // namespace

WorkerLoop::WorkerLoop(TrainJob& job, comm::Exchange* ex, const RunOutputs& out)
    : job_(job),
      ex_(ex),
      loader_(make_loader(job)),  // a prvalue: constructed in place (the Prefetcher does not move)
      recorder_(out.metrics, job.rank() == 0, job.planned_steps(), job.planned_epochs(), job.steps_per_epoch()),
      dev_(*job.backend, job.cfg.minibatch, job.net->input_shape(), job.classes()),
      loss_scale_(1.0f / static_cast<float>(job.global_batch())) {
  const TrainConfig& cfg = job.cfg;
  if (job.test_set) evaluator_.emplace(*job.test_set, cfg, job.topo.worker_index(), job.topo.num_workers(), ex);
  if (ex) on_ready_ = [ex](size_t begin, size_t end) { ex->grads_ready(begin, end); };
  if (job.rank() == 0)
    log::info("dtrain: model ", cfg.model, " (", job.net->num_params(), " parameters), ", job.n_train,
              " training samples, minibatch ", cfg.minibatch, " × ", job.topo.num_workers(), " worker(s), ",
              job.steps_per_epoch(), " steps/epoch, ", job.threads, " thread(s)/rank, backend ", job.backend->name(),
              "; ", job.topo.describe(),
              job.world_size > 1 ? std::string(", mode ") + comm::mode_name(cfg.mode) : std::string(),
              ex && !ex->node_reducer().empty() ? ", intra-node reducer " + ex->node_reducer() : std::string(),
              job.cuda_device >= 0 ? ", GPU " + std::to_string(job.cuda_device) + " (rank 0)" : std::string());
  if (job.rank() == 0 && !out.dir.empty()) log::info("dtrain: run folder ", out.dir);
}

void WorkerLoop::run(TrainResult& result) {
  interval_ = IntervalStats{};
  recorder_.start();
  for (epoch_ = 0; epoch_ < job_.cfg.epochs; ++epoch_) {
    const bool more = run_epoch(result);
    if (!more) break;
  }
  if (ex_) ex_->stop();
  result.steps = step_;
  result.seconds = recorder_.elapsed();
  result.images_per_s = static_cast<double>(step_ * job_.global_batch()) / train_seconds_;
}

bool WorkerLoop::run_epoch(TrainResult& result) {
  const auto epoch_start = Clock::now();
  bool more = true;
  for (int64_t s = 0; s < job_.steps_per_epoch(); ++s) {
    const float lr = train_step(s);
    const bool last = step_ >= job_.planned_steps();
    if (interval_.steps == job_.cfg.log_interval || s == job_.steps_per_epoch() - 1 || last)
      end_interval(s, lr, result);
    if (last) {
      more = false;
      break;
    }
  }
  end_epoch(seconds_since(epoch_start), result);
  return more;
}

float WorkerLoop::train_step(int64_t s) {
  if (job_.failures.hits_worker(step_, job_.rank()))
    DT_FAIL("injected failure at step ", step_, " (DTRAIN_FAIL_AT_STEP)");
  const io::Batch& batch = loader_.next();  // blocks only when the loader fell behind
  DT_CHECK(batch.epoch == epoch_ && batch.step == s, "loader delivered (", batch.epoch, ", ", batch.step,
           ") for (", epoch_, ", ", s, ")");
  layers::Net& net = *job_.net;
  layers::Backend& backend = *job_.backend;
  const int b = job_.cfg.minibatch;
  const int k = job_.classes();
  auto t1 = Clock::now();
  const layers::Tensor x = dev_.x(batch.x, b);  // uploads on a device
  const int32_t* labels = dev_.labels(batch.labels, b);
  layers::Tensor dlogits = dev_.dlogits(b);

  const float lr = job_.schedule.at(step_);
  net.set_step_seed((static_cast<uint64_t>(job_.cfg.seed) * 1000003ull + static_cast<uint64_t>(step_)) * 65537ull +
                    static_cast<uint64_t>(job_.topo.worker_index()));
  const layers::Tensor& logits = net.forward(x, /*train=*/true);
  int64_t correct = 0;
  double loss_sum = backend.softmax_xent_forward(logits.data(), labels, b, k, dev_.probs(), &correct);
  backend.softmax_xent_backward(dev_.probs(), labels, b, k, loss_scale_, dlogits.data());
  if (ex_) ex_->begin_step(step_, net.params().data(), net.grads().data());
  net.backward(dlogits, on_ready_);
  comm::StepTimes ct;
  if (ex_) ct = ex_->finish_step(net.params().data(), net.grads().data());
  if (!ex_ || !ex_->servers_update()) job_.sgd->step(net.params().data(), net.grads().data(), lr);
  auto t2 = Clock::now();

  double loss = loss_sum / b;
  // Mean cross-entropy starts near ln K; beyond 1e4 no run recovers into a useful model.
  if (!std::isfinite(loss) || loss > 1e4)
    DT_FAIL("training loss is ", loss, " at step ", step_, " (epoch ", epoch_, ", lr ", lr,
            "): diverged; lower --lr or check the data");
  interval_.t_io += batch.wait_s;
  interval_.t_compute += std::chrono::duration<double>(t2 - t1).count() - ct.exposed_s;
  interval_.t_comm += ct.exposed_s;
  interval_.t_comm_busy += ct.busy_s;
  interval_.loss += loss;
  ++interval_.steps;
  ++step_;
  return lr;
}

void WorkerLoop::end_interval(int64_t s, float lr, TrainResult& result) {
  IntervalReport r;
  r.wall_s = seconds_since(interval_.start);
  r.images_per_s = static_cast<double>(interval_.steps * job_.global_batch()) / r.wall_s;
  r.loss = interval_.loss / interval_.steps;
  if (ex_) {  // the loss of all workers, not only rank 0's shard
    double l = r.loss;
    ex_->sum_over_workers(&l, 1);
    r.loss = l / job_.topo.num_workers();
  }
  result.last_loss = r.loss;
  r.step = step_;
  r.epoch = epoch_ + 1;
  r.step_in_epoch = s + 1;
  r.lr = lr;
  recorder_.interval(r, interval_);
  interval_ = IntervalStats{};
}

void WorkerLoop::end_epoch(double epoch_time, TrainResult& result) {
  result.epochs = epoch_ + 1;
  train_seconds_ += epoch_time;
  layers::Net& net = *job_.net;
  // Batch-norm running statistics: the mean over workers, so every rank
  // evaluates (and saves) the same model.
  const size_t nb = static_cast<size_t>(net.buffers().numel());
  if (ex_ && nb > 0)
    with_host_copy(*job_.backend, net.buffers().data(), nb, true,
                   [&](float* h) { ex_->average_over_workers(h, nb); });
  if (evaluator_) {
    const Evaluation e = evaluator_->evaluate(net, *job_.backend);
    result.test_loss = e.loss;
    result.test_accuracy = e.accuracy;
    recorder_.epoch(epoch_ + 1, step_, e.loss, e.accuracy, epoch_time);
  }
  interval_.start = Clock::now();  // evaluation is not training time
}

}  // namespace dtrain::engine
