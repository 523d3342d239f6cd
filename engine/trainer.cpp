// engine/trainer.cpp — the training loop.
//
// Device path (--device cuda, and cpu-staged, its test double): the worker's
// backend says discrete_memory(); the arenas (parameters, gradients, buffers,
// momentum), activations, the minibatch, its labels, probabilities and the loss
// gradient live on the device. Per step the loader's batch (pinned host memory
// from the backend's host_alloc) is uploaded; the exchange gets device
// pointers and stages gradients to pinned host buffers slice by slice as
// backward reports them, reducing inside the node with NCCL (or MPI), and puts
// the new parameters back on the device before finish_step returns
// (comm/device_step.cpp). Start-up broadcast, batch-norm averaging, evaluation
// counts and --save-params go through host copies (download, upload).
// Parameter servers always run on the CPU backend.
#include "engine/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "comm/device_binding.hpp"
#include "comm/exchange.hpp"
#include "comm/topology.hpp"
#include "comm/wait.hpp"
#include "engine/compute.hpp"
#include "engine/metrics.hpp"
#include "engine/run_folder.hpp"
#include "io/batch.hpp"
#include "io/float_arrays.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/prefetcher.hpp"
#include "io/sampler.hpp"
#include "layers/backend.hpp"
#include "layers/cpu/staged.hpp"
#include "layers/models.hpp"
#include "layers/sgd.hpp"
#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

namespace dtrain::engine {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A duration for a batch log: "42s", "7m05s", "3h07m".
std::string clock_text(double s) {
  const long t = std::lround(std::max(0.0, s));
  char buf[32];
  if (t < 60) std::snprintf(buf, sizeof buf, "%lds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  return buf;
}

int choose_threads(const TrainConfig& cfg, int ranks_here) {
  if (cfg.threads > 0) return cfg.threads;
  if (auto c = settings::slurm_cpus_per_task(); c && *c > 0) return static_cast<int>(*c);
  int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, hw / std::max(1, ranks_here));
}

// Checks that a dataset fits the model's input and class count.
void check_fits(const io::Hdf5Dataset& d, const layers::Shape& in, int classes, const char* key) {
  if (d.channels() != in.c() || d.height() != in.h() || d.width() != in.w())
    DT_USAGE("option '", key, "': ", d.path(), ": images are ", d.height(), "×", d.width(), "×",
             d.channels(), " (H×W×C) but the model expects ", in.h(), "×", in.w(), "×", in.c());
  if (d.classes() > classes)
    DT_USAGE("option '", key, "': ", d.path(), " has ", d.classes(), " classes but the model outputs ", classes);
}

// Opens a dataset; a bad file is a UsageError that also names the option.
std::unique_ptr<io::Hdf5Dataset> open_dataset(const std::string& path, const char* key) {
  try {
    return std::make_unique<io::Hdf5Dataset>(path);
  } catch (const UsageError& e) {
    DT_USAGE("option '", key, "': ", e.what());
  }
}

// The compute backend of a worker. cuda: the GPU of this rank's local rank
// among the workers of its host (local rank mod visible devices), checked to be
// no other worker's before any NCCL communicator exists.
std::unique_ptr<layers::Backend> make_worker_backend(const TrainConfig& cfg, const comm::Topology& topo,
                                                     int* cuda_device) {
  *cuda_device = -1;
  if (cfg.device != "cuda") return make_compute_backend(cfg, -1, false);
#ifdef DTRAIN_HAVE_CUDA
  MPI_Comm host = MPI_COMM_NULL;
  DT_CHECK_MPI(MPI_Comm_split_type(topo.workers(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int local = 0;
  DT_CHECK_MPI(MPI_Comm_rank(host, &local));
  try {
    const int device = layers::cuda_device_for_local_rank(local);
    comm::check_device_binding(host, device, layers::cuda_device_key(device));
    *cuda_device = device;
  } catch (...) {
    MPI_Comm_free(&host);
    throw;
  }
  DT_CHECK_MPI(MPI_Comm_free(&host));
  return make_compute_backend(cfg, *cuda_device, topo.rank() == 0);
#else
  (void)topo;
  DT_USAGE("option 'device': cuda: this dtrain was built without the CUDA backend; use --device cpu");
#endif
}

// Calls f with a host view of n floats at `data` (memory of `be`): the memory
// itself on host backends; on a device, a downloaded copy, uploaded back
// afterwards when write_back.
template <typename F>
void with_host_copy(layers::Backend& be, float* data, size_t n, bool write_back, F&& f) {
  if (!be.discrete_memory()) {
    f(data);
    return;
  }
  std::vector<float> h(std::max<size_t>(n, 1));
  be.download(data, h.data(), n * sizeof(float));
  f(h.data());
  if (write_back) be.upload(h.data(), data, n * sizeof(float));
}

struct Evaluation {
  double loss = 0, accuracy = 0;
};

// Scores this worker's shard of the test set; the sums are reduced over the
// workers, so the result is identical for any number of ranks.
Evaluation evaluate(layers::Net& net, layers::Backend& backend, const io::Hdf5Dataset& test,
                    const TrainConfig& cfg, int rank, int world, comm::Exchange* ex) {
  int64_t n = test.n();
  if (cfg.max_test_samples > 0) n = std::min(n, cfg.max_test_samples);
  auto [begin, end] = io::eval_shard(n, world, rank);
  const int eb = cfg.eval_minibatch > 0 ? cfg.eval_minibatch : cfg.minibatch;
  const layers::Shape in = net.input_shape();
  const int k = static_cast<int>(net.output_shape().c());
  std::vector<uint8_t> raw(static_cast<size_t>(eb * test.sample_bytes()));
  layers::Tensor x(layers::Shape(eb, in.c(), in.h(), in.w()));
  StepBuffers dev(backend, eb, in, k);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = begin; i < end; i += eb) {
    int64_t b = std::min<int64_t>(eb, end - i);
    test.read_range(i, b, raw.data());
    io::normalize_to_nchw(raw.data(), b, in.h(), in.w(), in.c(), cfg.mean, cfg.std, x.data());
    const layers::Tensor& logits = net.forward(dev.x(x.data(), b), /*train=*/false);
    int64_t c = 0;
    loss_sum += backend.softmax_xent_forward(logits.data(), dev.labels(test.labels().data() + i, b),
                                             static_cast<int>(b), k, dev.probs(), &c);
    correct += c;
  }
  double sums[2] = {loss_sum, static_cast<double>(correct)};
  if (ex) ex->sum_over_workers(sums, 2);
  Evaluation e;
  e.loss = n > 0 ? sums[0] / static_cast<double>(n) : 0.0;
  e.accuracy = n > 0 ? sums[1] / static_cast<double>(n) : 0.0;
  return e;
}

}  // namespace

TrainResult train(const TrainConfig& cfg, MPI_Comm world_comm) {
  int world_size = 1;
  DT_CHECK_MPI(MPI_Comm_size(world_comm, &world_size));
  comm::check_launcher(world_size);
  // Virtual nodes matter only where the exchange uses nodes (hybrid).
  comm::Topology topo(world_comm, {cfg.ps, cfg.mode == "hybrid" ? cfg.ranks_per_node : 0});
  const int rank = topo.rank();
  const int workers = topo.num_workers();
  const int worker = topo.worker_index();
  const int threads = choose_threads(cfg, topo.ranks_on_host());
  layers::set_cpu_threads(threads);
  comm::set_wait_policy(comm::choose_wait_policy(cfg.wait_policy, topo.ranks_on_host(), threads,
                                                 static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))));

  // Servers run the optimizer on host memory: the CPU backend, whatever the device.
  int cuda_device = -1;
  std::unique_ptr<layers::Backend> backend =
      topo.is_server() ? layers::make_backend(cfg.reference_kernels ? "reference" : "cpu")
                       : make_worker_backend(cfg, topo, &cuda_device);
  const bool on_device = backend->discrete_memory();

  // Datasets are validated before any work (DESIGN.md §5): bad files are UsageErrors.
  // Servers open them too: the class count fixes the model's arena.
  check_outputs(cfg);
  std::unique_ptr<io::Hdf5Dataset> train_ptr = open_dataset(cfg.train_data, "train-data");
  const io::Hdf5Dataset& train_set = *train_ptr;
  std::unique_ptr<io::Hdf5Dataset> test_set;
  if (!cfg.test_data.empty()) test_set = open_dataset(cfg.test_data, "test-data");
  if (test_set && test_set->classes() != train_set.classes() && rank == 0)
    log::warn("train-data has ", train_set.classes(), " classes but test-data has ", test_set->classes(),
              "; the model gets ", std::max(train_set.classes(), test_set->classes()), " outputs");

  layers::ModelOptions mo;
  mo.minibatch = cfg.minibatch;
  mo.classes = std::max(train_set.classes(), test_set ? test_set->classes() : 0);
  mo.dropout = cfg.dropout;
  if (mo.classes > 100000)
    DT_USAGE("option 'train-data': ", cfg.train_data, ": ", mo.classes, " classes is more than this engine supports (100000)");
  layers::Net net = [&] {
    try {
      return layers::make_model(cfg.model, mo);
    } catch (const UsageError& e) {
      DT_USAGE("option 'model': ", e.what());
    }
  }();
  const layers::Shape in = net.input_shape();
  const int k = static_cast<int>(net.output_shape().c());
  check_fits(train_set, in, k, "train-data");
  if (test_set) check_fits(*test_set, in, k, "test-data");
  if (!cfg.mean.empty() && static_cast<int64_t>(cfg.mean.size()) != in.c())
    DT_USAGE("option 'mean': ", cfg.mean.size(), " values for ", in.c(), " channels");
  if (!cfg.std.empty() && static_cast<int64_t>(cfg.std.size()) != in.c())
    DT_USAGE("option 'std': ", cfg.std.size(), " values for ", in.c(), " channels");

  net.finalize(*backend, static_cast<uint64_t>(cfg.seed));

  int64_t n_train = train_set.n();
  if (cfg.max_train_samples > 0) n_train = std::min(n_train, cfg.max_train_samples);
  const int64_t global_batch = static_cast<int64_t>(cfg.minibatch) * workers;
  if (n_train < global_batch)
    DT_USAGE("option 'minibatch': the training set ", cfg.train_data, " has ", n_train,
             " samples (max-train-samples applied), fewer than one global batch of ", workers, " workers × ", cfg.minibatch);
  const int64_t spe = n_train / global_batch;  // = io::Sampler::steps_per_epoch()

  layers::LrSchedule sched;
  sched.kind = layers::LrSchedule::parse_kind(cfg.lr_schedule);
  sched.base_lr = cfg.lr;
  sched.warmup_steps = static_cast<int64_t>(std::llround(cfg.warmup_epochs * static_cast<double>(spe)));
  sched.step_size = static_cast<int64_t>(std::llround(cfg.lr_step_epochs * static_cast<double>(spe)));
  sched.gamma = cfg.lr_gamma;
  if (sched.kind == layers::LrSchedule::Kind::step && sched.step_size < 1)
    DT_USAGE("option 'lr-step-epochs': ", cfg.lr_step_epochs, " epochs is less than one step (", spe, " steps per epoch)");
  sched.total_steps = spe * cfg.epochs;
  if (cfg.max_steps > 0) sched.total_steps = std::min(sched.total_steps, cfg.max_steps);

  layers::SgdOptions so;
  so.momentum = cfg.momentum;
  so.weight_decay = cfg.weight_decay;
  so.decay_bias_bn = cfg.decay_bias_bn;
  layers::Sgd sgd(*backend, so, net.param_ranges(), net.num_params());

  const auto fail_at = settings::fail_at_step();
  const auto fail_rank = settings::fail_rank();
  if (fail_rank && (*fail_rank < 0 || *fail_rank >= world_size))
    DT_USAGE("DTRAIN_FAIL_RANK=", *fail_rank, " is not a rank of this ", world_size, "-rank job");

  if (world_size == 1 && cfg.mode != "allreduce")
    DT_USAGE("option 'mode': ", cfg.mode, " needs parameter-server ranks; this job has 1 rank");

  // Validation ends here. Every rank passed it before rank 0 writes anything
  // (a rank that failed is in the exit agreement, engine/exit.hpp, and never
  // reaches this barrier: the job ends without a run folder).
  DT_CHECK_MPI(MPI_Barrier(world_comm));
  TrainResult result;
  RunOutputs out;
  if (rank == 0) {
    out = make_outputs(cfg);
    result.metrics_path = out.metrics;
    result.run_dir = out.dir;
  }

  // The exchange exists whenever there is more than one rank.
  std::unique_ptr<comm::Exchange> ex;
  if (world_size > 1) {
    comm::ExchangeOptions eo;
    eo.mode = comm::parse_mode(cfg.mode);
    eo.bucket_bytes = static_cast<size_t>(cfg.bucket_mb * 1048576.0);
    eo.max_chunk_elems = static_cast<size_t>(cfg.max_chunk_elems);
    eo.step_timeout_s = cfg.comm_timeout;
    if (on_device) {
      layers::Backend& be = *backend;
      eo.device.enabled = true;
      eo.device.cuda_device = cuda_device;
      eo.device.host_addressable = cuda_device < 0;  // cpu-staged: MPI may touch its memory
      eo.device.download = [&be](const float* d, float* h, size_t n) { be.download(d, h, n * sizeof(float)); };
      eo.device.upload = [&be](const float* h, float* d, size_t n) { be.upload(h, d, n * sizeof(float)); };
      eo.device.host_alloc = [&be](size_t bytes) { return be.host_alloc(bytes); };
      eo.device.host_free = [&be](void* p) { be.host_free(p); };
    }
    // Servers take part in the exchange's construction; workers' device set-up
    // (NCCL communicators) happens inside, after the device-binding check.
    ex = std::make_unique<comm::Exchange>(topo, eo, net.num_params());
    with_host_copy(*backend, net.params().data(), net.num_params(), /*write_back=*/true,
                   [&](float* p) { ex->broadcast_params(p); });
  }

  if (topo.is_server()) {
    // The server applies the same SGD (momentum state here) to the slices it owns.
    ex->serve(net.params().data(), [&](float* p, const float* g, size_t b, size_t e, int64_t step) {
      if (fail_at && *fail_at == step && fail_rank && *fail_rank == rank)
        DT_FAIL("injected failure at step ", step, " on parameter server ", topo.server_index(), " (DTRAIN_FAIL_AT_STEP)");
      sgd.step(p, g, sched.at(step), b, e);
    });
    result.server = true;
    return result;
  }

  // The loader: prefetches this worker's batches in step order (I/O hidden under compute).
  // Steps and epochs this run will take: the schedule's total (max-steps applied).
  const int64_t planned = sched.total_steps;
  const int planned_epochs = static_cast<int>((planned + spe - 1) / spe);
  io::PrefetchOptions po;
  po.threads = cfg.loader_threads > 0 ? cfg.loader_threads : io::default_loader_threads(topo.ranks_on_host());
  po.depth = cfg.loader_depth;
  po.mean = cfg.mean;
  po.std = cfg.std;
  po.augment = {cfg.augment_pad, cfg.augment_flip};
  po.seed = static_cast<uint64_t>(cfg.seed) * 0x9E3779B97F4A7C15ull + 11;
  po.total_batches = planned;
  if (on_device) {  // pinned batch buffers: the per-step upload runs at full bandwidth
    layers::Backend& be = *backend;
    po.allocator.allocate = [&be](size_t bytes) { return be.host_alloc(bytes); };
    po.allocator.release = [&be](void* p) { be.host_free(p); };
  }
  io::Prefetcher loader(train_set, io::Sampler(n_train, workers, worker, cfg.minibatch, static_cast<uint64_t>(cfg.seed)), po);
  MetricsWriter metrics(out.metrics);
  if (rank == 0)
    log::info("dtrain: model ", cfg.model, " (", net.num_params(), " parameters), ", n_train,
              " training samples, minibatch ", cfg.minibatch, " × ", workers, " worker(s), ", spe,
              " steps/epoch, ", threads, " thread(s)/rank, backend ", backend->name(), "; ",
              topo.describe(), world_size > 1 ? std::string(", mode ") + cfg.mode : std::string(),
              ex && !ex->node_reducer().empty() ? ", intra-node reducer " + ex->node_reducer() : std::string(),
              cuda_device >= 0 ? ", GPU " + std::to_string(cuda_device) + " (rank 0)" : std::string());
  if (rank == 0 && !out.dir.empty()) log::info("dtrain: run folder ", out.dir);

  const int b = cfg.minibatch;
  StepBuffers dev(*backend, b, in, k);
  // Gradients are of the global-batch mean loss: the workers' sum is the 1-process gradient.
  const float loss_scale = 1.0f / static_cast<float>(global_batch);
  const layers::GradReadyFn on_ready =
      ex ? layers::GradReadyFn([&](size_t begin, size_t end) { ex->grads_ready(begin, end); }) : layers::GradReadyFn();

  int64_t step = 0;
  double interval_loss = 0, t_compute = 0, t_io = 0, t_comm = 0, t_comm_busy = 0;
  int interval_steps = 0;
  auto interval_start = Clock::now();
  const auto run_start = Clock::now();
  bool stop = false;
  double train_seconds = 0;  // excluding evaluation
  for (int epoch = 0; epoch < cfg.epochs && !stop; ++epoch) {
    const auto epoch_start = Clock::now();
    for (int64_t s = 0; s < spe; ++s) {
      if (fail_at && *fail_at == step && (!fail_rank || *fail_rank == rank))
        DT_FAIL("injected failure at step ", step, " (DTRAIN_FAIL_AT_STEP)");
      const io::Batch& batch = loader.next();  // blocks only when the loader fell behind
      DT_CHECK(batch.epoch == epoch && batch.step == s, "loader delivered (", batch.epoch, ", ", batch.step,
               ") for (", epoch, ", ", s, ")");
      auto t1 = Clock::now();
      const layers::Tensor x = dev.x(batch.x, b);  // uploads on a device
      const int32_t* labels = dev.labels(batch.labels, b);
      layers::Tensor dlogits = dev.dlogits(b);

      const float lr = sched.at(step);
      net.set_step_seed((static_cast<uint64_t>(cfg.seed) * 1000003ull + static_cast<uint64_t>(step)) * 65537ull + static_cast<uint64_t>(worker));
      const layers::Tensor& logits = net.forward(x, /*train=*/true);
      int64_t correct = 0;
      double loss_sum = backend->softmax_xent_forward(logits.data(), labels, b, k, dev.probs(), &correct);
      backend->softmax_xent_backward(dev.probs(), labels, b, k, loss_scale, dlogits.data());
      if (ex) ex->begin_step(step, net.params().data(), net.grads().data());
      net.backward(dlogits, on_ready);
      comm::StepTimes ct;
      if (ex) ct = ex->finish_step(net.params().data(), net.grads().data());
      if (!ex || !ex->servers_update()) sgd.step(net.params().data(), net.grads().data(), lr);
      auto t2 = Clock::now();

      double loss = loss_sum / b;
      // Mean cross-entropy starts near ln K; beyond 1e4 no run recovers into a useful model.
      if (!std::isfinite(loss) || loss > 1e4)
        DT_FAIL("training loss is ", loss, " at step ", step, " (epoch ", epoch, ", lr ", lr,
                "): diverged; lower --lr or check the data");
      t_io += batch.wait_s;
      t_compute += std::chrono::duration<double>(t2 - t1).count() - ct.exposed_s;
      t_comm += ct.exposed_s;
      t_comm_busy += ct.busy_s;
      interval_loss += loss;
      ++interval_steps;
      ++step;
      const bool last_step = s == spe - 1 || (cfg.max_steps > 0 && step >= cfg.max_steps);
      if (interval_steps == cfg.log_interval || last_step) {
        double dt = seconds_since(interval_start);
        double ips = static_cast<double>(interval_steps * global_batch) / dt;
        double mean_loss = interval_loss / interval_steps;
        if (ex) {  // the loss of all workers, not only rank 0's shard
          double l = mean_loss;
          ex->sum_over_workers(&l, 1);
          mean_loss = l / workers;
        }
        result.last_loss = mean_loss;
        if (rank == 0) {
          double hidden = t_comm_busy > 0 ? 1.0 - t_comm / t_comm_busy : 0.0;
          metrics.write({{"kind", "step"}, {"step", step}, {"epoch", epoch + 1}, {"loss", mean_loss}, {"lr", lr},
                         {"images_per_s", ips}, {"t_compute_s", t_compute / interval_steps},
                         {"t_comm_s", t_comm / interval_steps}, {"t_io_wait_s", t_io / interval_steps},
                         {"t_comm_total_s", t_comm_busy / interval_steps}, {"comm_hidden_fraction", hidden},
                         {"io_wait_fraction", t_io / dt}});
          const double elapsed = seconds_since(run_start);
          const double eta = step > 0 ? elapsed / static_cast<double>(step) * static_cast<double>(planned - step) : 0.0;
          std::printf("epoch %d/%d step %lld/%lld loss %.4f lr %.4g %.0f img/s (T_C %.2f ms, comm %.2f ms exposed of %.2f, io wait %.2f ms = %.1f%%) elapsed %s ETA %s\n",
                      epoch + 1, planned_epochs, static_cast<long long>(s + 1), static_cast<long long>(spe), mean_loss, lr, ips,
                      1e3 * t_compute / interval_steps, 1e3 * t_comm / interval_steps,
                      1e3 * t_comm_busy / interval_steps, 1e3 * t_io / interval_steps, 100.0 * t_io / dt,
                      clock_text(elapsed).c_str(), clock_text(eta).c_str());
          std::fflush(stdout);
        }
        interval_loss = t_compute = t_io = t_comm = t_comm_busy = 0;
        interval_steps = 0;
        interval_start = Clock::now();
      }
      if (cfg.max_steps > 0 && step >= cfg.max_steps) {
        stop = true;
        break;
      }
    }
    result.epochs = epoch + 1;
    double epoch_time = seconds_since(epoch_start);
    train_seconds += epoch_time;
    // Batch-norm running statistics: the mean over workers, so every rank
    // evaluates (and saves) the same model.
    if (ex && net.buffers().numel() > 0)
      with_host_copy(*backend, net.buffers().data(), static_cast<size_t>(net.buffers().numel()), true,
                     [&](float* h) { ex->average_over_workers(h, static_cast<size_t>(net.buffers().numel())); });
    if (test_set) {
      Evaluation e = evaluate(net, *backend, *test_set, cfg, worker, workers, ex.get());
      result.test_loss = e.loss;
      result.test_accuracy = e.accuracy;
      if (rank == 0) {
        metrics.write({{"kind", "epoch"}, {"epoch", epoch + 1}, {"step", step}, {"test_loss", e.loss},
                       {"test_accuracy", e.accuracy}, {"epoch_time_s", epoch_time}});
        std::printf("epoch %d done in %.1f s: test accuracy %.2f%% test loss %.4f\n", epoch + 1, epoch_time,
                    100.0 * e.accuracy, e.loss);
        std::fflush(stdout);
      }
    }
    interval_start = Clock::now();  // evaluation is not training time
  }
  if (ex) ex->stop();
  result.steps = step;
  result.seconds = seconds_since(run_start);
  result.images_per_s = static_cast<double>(step * global_batch) / train_seconds;

  if (!out.save_params.empty() && rank == 0) {
    const size_t nb = static_cast<size_t>(net.buffers().numel());
    with_host_copy(*backend, net.params().data(), net.num_params(), false, [&](float* p) {
      with_host_copy(*backend, net.buffers().data(), nb, false, [&](float* bufs) {
        io::save_float_arrays(out.save_params, {{"params", {p, net.num_params()}}, {"buffers", {bufs, nb}}});
      });
    });
  }
  return result;
}

}  // namespace dtrain::engine
