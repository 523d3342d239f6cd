// tests/test_cuda_train.cpp — [cuda] cases of the trainer's CUDA path and of
// the exchange's device path on a GPU (the CPU side of both is tested with
// cpu-staged: tests/test_staged.cpp, test_mpi_device_exchange.cpp,
// integration/device_staged.sh).
//
//  - engine::train with --device cuda on a small synthetic dataset against the
//    same job on cpu-staged with the reference kernels: parameters within
//    relative L2 1e-4 (LeNet-5, 5 steps) and 1e-3 (ResNet-20 with batch norm,
//    2 steps: cuDNN's float sums differ from the reference's double sums by
//    ~1e-6 per kernel, which the steps carry along), buffers likewise;
//  - the intra-node reducer list picks NCCL for a CUDA arena, and its three
//    collectives give the sums on device buffers;
//  - comm::Exchange with a CUDA device arena (NCCL inside the node, staging
//    through pinned buffers) against the host exchange, in allreduce mode and,
//    with ≥ 2 ranks, in hybrid mode with the last rank a CPU server: relative
//    error ≤ 1e-6 (NCCL sums in its own order);
//  - --device cuda --precision bf16 (LeNet-5, 5 steps) against the same
//    reference job in fp32: the last step's loss and the test loss within
//    1e-3 relative, the parameter updates (p − p0) within relative L2 5e-2
//    (the bf16 kernels themselves: tests/test_cuda_bf16.cpp).
// Run plain (one rank) or under mpiexec -n G+1 with G GPUs.
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "comm/exchange.hpp"
#include "comm/intra_node.hpp"
#include "comm/topology.hpp"
#include "engine/trainer.hpp"
#include "io/float_arrays.hpp"
#include "io/synth.hpp"
#include "layers/models.hpp"
#include "layers/net.hpp"
#include "tests/cuda_test_util.hpp"

namespace dtrain::layers::test {
namespace {

double rel_l2(const Vec& a, const Vec& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("dtrain-cuda-train-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

constexpr int kClasses = 10;  // of the synthetic dataset

// The parameters both runs of compare_train start from: c's model as the
// trainer makes it for the dataset's classes (engine/train_job.cpp, make_net),
// initialised from c.seed (deterministic, the same on every backend).
Vec initial_params(const engine::TrainConfig& c) {
  const auto be = make_reference_backend();
  ModelOptions mo;
  mo.minibatch = c.minibatch;
  mo.classes = kClasses;
  mo.dropout = c.dropout;
  Net net = make_model(c.model, mo);
  net.finalize(*be, static_cast<uint64_t>(c.seed));
  return Vec(net.params().data(), net.params().data() + net.num_params());
}

// batch_norm: whether the model has batch-norm running statistics (buffers) to compare.
// precision: the CUDA run's (the reference runs in fp32); with bf16 the
// training and test losses are compared (within 1e-3 relative) instead of the
// accuracy, whose near-ties on an untrained net bf16 rounding may flip.
// tol: the bound of the parameters' relative L2 (fp32), of the updates' (bf16).
void compare_train(const std::string& model, int steps, int minibatch, double tol, bool batch_norm,
                   DType precision = DType::f32) {
  const std::string data = scratch("synth.h5");
  if (!std::filesystem::exists(data)) io::synthesize_dataset(data, 256, 28, 28, 1, kClasses, 3);
  engine::TrainConfig c;
  c.model = model;
  c.train_data = data;
  c.test_data = data;
  c.max_test_samples = 32;
  c.minibatch = minibatch;
  c.max_steps = steps;
  c.epochs = 1;
  c.log_interval = steps;
  c.lr = 0.01f;
  c.threads = 2;
  c.seed = 4;
  c.dropout = 0.0f;
  c.device = engine::Device::cpu_staged;
  c.reference_kernels = true;
  // One pair of files per case: the fp32 and bf16 cases of a model run in one
  // process (the first run on a GPU found the bf16 case refusing to overwrite
  // the fp32 case's reference file).
  const std::string tag = model + "-" + precision_name(precision);
  const std::string ref_params = scratch(tag + "-ref.h5");
  c.save_params = ref_params;
  const engine::TrainResult ref = engine::train(c, MPI_COMM_SELF);
  c.device = engine::Device::cuda;
  c.reference_kernels = false;
  c.workspace_mb = 64;
  c.precision = precision;
  c.save_params = scratch(tag + "-cuda.h5");
  const engine::TrainResult gpu = engine::train(c, MPI_COMM_SELF);
  CHECK(gpu.steps == steps);
  CHECK(std::isfinite(gpu.last_loss));
  if (precision == DType::f32) {
    CHECK(std::fabs(gpu.test_accuracy - ref.test_accuracy) <= 2.0 / 32 + 1e-9);  // one or two near-ties
  } else {
    INFO(model << " " << precision_name(precision) << ": loss " << gpu.last_loss << " vs " << ref.last_loss
               << ", test loss " << gpu.test_loss << " vs " << ref.test_loss);
    CHECK(std::fabs(gpu.last_loss - ref.last_loss) <= 1e-3 * std::fabs(ref.last_loss));
    CHECK(std::fabs(gpu.test_loss - ref.test_loss) <= 1e-3 * std::fabs(ref.test_loss));
  }
  const Vec pg = io::load_float_array(c.save_params, "params");
  const Vec pr = io::load_float_array(ref_params, "params");
  if (precision == DType::f32) {
    INFO(model << ": parameters, relative L2 " << rel_l2(pg, pr));
    CHECK(rel_l2(pg, pr) <= tol);
  } else {
    // The steps move p by lr·Σ(momentum-filtered gradients), a small part of
    // p: measured against p, errors of the gradients shrink by that part, so
    // the updates p − p0 are compared instead.
    const Vec p0 = initial_params(c);
    REQUIRE(p0.size() == pr.size());
    REQUIRE(pg.size() == pr.size());
    const double moved = rel_l2(pr, p0);
    INFO(model << ": the reference's parameters moved relative L2 " << moved << " from p0");
    REQUIRE(moved > 0);
    REQUIRE(moved < 0.5);  // p0 is the runs' start (another initialisation lies ~1.4 away)
    Vec ug(p0.size()), ur(p0.size());
    for (size_t i = 0; i < p0.size(); ++i) {
      ug[i] = pg[i] - p0[i];
      ur[i] = pr[i] - p0[i];
    }
    INFO(model << " " << precision_name(precision) << ": parameter updates, relative L2 " << rel_l2(ug, ur));
    CHECK(rel_l2(ug, ur) <= tol);
  }
  const Vec bg = io::load_float_array(c.save_params, "buffers"), br = io::load_float_array(ref_params, "buffers");
  REQUIRE(!br.empty() == batch_norm);
  REQUIRE(bg.size() == br.size());
  if (batch_norm) {
    INFO(model << ": batch-norm buffers, relative L2 " << rel_l2(bg, br));
    CHECK(rel_l2(bg, br) <= tol);
  }
}

TEST_CASE("cuda: dtrain train --device cuda (lenet5) matches the reference kernels", "[cuda][train]") {
  compare_train("lenet5", 5, 32, 1e-4, /*batch_norm=*/false);
}

TEST_CASE("cuda: dtrain train --device cuda (resnet20, batch norm) matches the reference kernels", "[cuda][train]") {
  compare_train("resnet20", 2, 8, 1e-3, /*batch_norm=*/true);
}

TEST_CASE("cuda: dtrain train --device cuda --precision bf16 (lenet5, 5 steps) updates as the fp32 reference",
          "[cuda][train][bf16]") {
  {
    const auto gpu = make_cuda_backend(quiet_options());
    const std::string why = gpu->precision_unsupported(DType::bf16);
    if (!why.empty()) {
      DT_CUDA_SKIPPED_PART("bf16: " << why);
      return;
    }
  }
  // 5e-2 on the updates' relative L2: bf16 rounds x, w and dy (and cuDNN's
  // y, dx, dw) to 8-bit mantissas, relative 2^-9 ≈ 2e-3 each, and sums of
  // such errors with random signs leave the gradients' relative L2 error
  // around 1e-2 (an estimate: not yet run on a GPU), which five steps carry
  // along without growing much at lr 0.01. A wrong gradient (a missing term, a
  // stale or transposed weight copy, dw or db not written) changes the update
  // by order 1, far past 5e-2.
  compare_train("lenet5", 5, 32, 5e-2, /*batch_norm=*/false, DType::bf16);
}

#ifdef DTRAIN_HAVE_NCCL
TEST_CASE("cuda: the intra-node reducer list picks nccl for a CUDA arena; its collectives sum on the device",
          "[cuda][nccl]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > cuda_device_count()) {
    DT_CUDA_SKIPPED_PART("more ranks (" << size << ") than GPUs (" << cuda_device_count()
                                        << "): NCCL needs one GPU per rank; not run");
    return;
  }
  if (size == 1)
    DT_CUDA_SKIPPED_PART("1 rank: the reducer's sums and broadcast over one rank are copies, not checked; "
                         "run under mpiexec -n G with G >= 2 GPUs");
  CudaOptions o = quiet_options();
  o.device = cuda_device_for_local_rank(rank);
  Both b(o);
  comm::IntraNodeOptions io;
  io.node_comm = MPI_COMM_WORLD;
  io.cuda_device = o.device;
  io.timeout_s = 60;
  auto red = comm::make_intra_node_reducer(io);
  REQUIRE(std::string(red->name()) == "nccl");
  CHECK(red->on_device());
  const size_t n = 3000;
  const float tri = float(size * (size + 1) / 2);
  float* buf = b.zeros(n);
  b.gpu->fill(buf, n, float(rank + 1));
  red->reduce_to_leader(buf, n);
  if (rank == 0) CHECK(b.down(buf, n) == Vec(n, tri));
  if (rank == 0) b.gpu->fill(buf, n, 5.0f);
  red->broadcast_from_leader(buf, n);
  CHECK(b.down(buf, n) == Vec(n, 5.0f));
  b.gpu->fill(buf, n, float(rank + 1));
  red->allreduce(buf, n);
  CHECK(b.down(buf, n) == Vec(n, tri));
}
#endif

float grad_of(int rank, int64_t step, size_t i) {
  return 0.01f * std::sin(0.002f * float(i % 70000) + 0.5f * float(rank) + 0.2f * float(step));
}

// The exchange on host vectors or on a CUDA arena; returns a worker's final parameters.
Vec exchange_run(comm::Mode mode, int ps, bool on_gpu) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  comm::Topology topo(MPI_COMM_WORLD, {ps, 0});
  const size_t n = 150000;
  std::unique_ptr<Backend> gpu;
  std::shared_ptr<float> dp, dg;
  comm::ExchangeOptions o;
  o.mode = mode;
  o.bucket_bytes = 64 << 10;
  o.step_timeout_s = 120;
  if (on_gpu && topo.is_worker()) {
    CudaOptions co = quiet_options();
    co.device = cuda_device_for_local_rank(topo.local_rank());
    gpu = make_cuda_backend(co);
    Backend& be = *gpu;
    o.device.enabled = true;
    o.device.cuda_device = co.device;
    o.device.download = [&be](const float* d, float* h, size_t c) { be.download(d, h, c * sizeof(float)); };
    o.device.upload = [&be](const float* h, float* d, size_t c) { be.upload(h, d, c * sizeof(float)); };
    o.device.host_alloc = [&be](size_t bytes) { return be.host_alloc(bytes); };
    o.device.host_free = [&be](void* p) { be.host_free(p); };
  }
  comm::Exchange ex(topo, o, n);
  Vec p(n), g(n), mom(n, 0.0f);
  for (size_t i = 0; i < n; ++i) p[i] = std::cos(0.01f * float(i % 1009));
  ex.broadcast_params(p.data());
  auto sgd = [&](float* pp, const float* gg, size_t b0, size_t e0, int64_t) {
    for (size_t i = b0; i < e0; ++i) {
      mom[i] = 0.9f * mom[i] + gg[i];
      pp[i] -= 0.05f * mom[i];
    }
  };
  if (topo.is_server()) {
    ex.serve(p.data(), sgd);
    return {};
  }
  float* ap = p.data();
  float* ag = g.data();
  if (gpu) {
    dp = gpu->allocate(n);
    dg = gpu->allocate(n);
    gpu->upload(p.data(), dp.get(), n * sizeof(float));
    ap = dp.get();
    ag = dg.get();
  }
  for (int64_t step = 0; step < 3; ++step) {
    for (size_t i = 0; i < n; ++i) g[i] = grad_of(rank, step, i);
    if (gpu) gpu->upload(g.data(), dg.get(), n * sizeof(float));
    ex.begin_step(step, ap, ag);
    for (size_t end = n; end > 0; end = end > 20000 ? end - 20000 : 0) ex.grads_ready(end > 20000 ? end - 20000 : 0, end);
    ex.finish_step(ap, ag);
    if (mode == comm::Mode::allreduce) {
      if (gpu) gpu->download(dg.get(), g.data(), n * sizeof(float));
      sgd(p.data(), g.data(), 0, n, step);
      if (gpu) gpu->upload(p.data(), dp.get(), n * sizeof(float));
    }
  }
  ex.stop();
  if (gpu) gpu->download(dp.get(), p.data(), n * sizeof(float));
  return p;
}

TEST_CASE("cuda: the exchange with a CUDA arena (NCCL in the node, pinned staging) equals the host exchange",
          "[cuda][nccl][exchange]") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size > cuda_device_count() + 1) {
    DT_CUDA_SKIPPED_PART("more ranks (" << size << ") than GPUs (" << cuda_device_count()
                                        << ") + 1 server: not run");
    return;
  }
  std::vector<std::pair<comm::Mode, int>> layouts;
  if (size <= cuda_device_count()) layouts.push_back({comm::Mode::allreduce, 0});
  else DT_CUDA_SKIPPED_PART("allreduce layout: more ranks (" << size << ") than GPUs; not run");
  if (size >= 2) layouts.push_back({comm::Mode::hybrid, 1});
  else DT_CUDA_SKIPPED_PART("1 rank: the allreduce has a single worker (NCCL sums nothing) and the hybrid layout "
                            "with a CPU server needs 2 ranks; run under mpiexec -n G+1 with G GPUs");
  REQUIRE(!layouts.empty());
  for (auto [mode, ps] : layouts) {
    INFO("mode " << comm::mode_name(mode));
    const Vec host = exchange_run(mode, ps, false);
    const Vec dev = exchange_run(mode, ps, true);
    // exchange_run returns the parameters on workers, nothing on servers (the last ps ranks).
    const bool server = rank >= size - ps;
    REQUIRE(host.empty() == server);
    REQUIRE(dev.empty() == server);
    if (!server) CHECK(rel_l2(dev, host) <= 1e-6);
  }
}

}  // namespace
}  // namespace dtrain::layers::test
