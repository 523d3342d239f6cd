// tests/test_mpi_basic.cpp — properties that data-parallel training relies on,
// checked across real MPI processes: identical initialisation on every rank,
// disjoint sampler shards, the loss-scaling contract (the sum over workers of
// shard gradients scaled by 1/global batch equals the 1-process gradient), and
// error messages that name the rank.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "mpi_util.hpp"
#include "io/sampler.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/models.hpp"

using namespace dtrain::layers;

namespace {
using dtrain::test::world_rank;
using dtrain::test::world_size;
}  // namespace

TEST_CASE("every rank initialises bitwise identical parameters", "[mpi]") {
  auto be = make_reference_backend();
  for (const char* name : {"lenet5", "resnet20"}) {
    ModelOptions o;
    o.minibatch = 2;
    Net net = make_model(name, o);
    net.finalize(*be, 1234);
    std::vector<float> mine(net.params().data(), net.params().data() + net.num_params());
    std::vector<float> root = mine;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    int same = mine == root ? 1 : 0, all_same = 0;
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    INFO(name);
    REQUIRE(all_same == 1);
  }
}

TEST_CASE("sampler shards are disjoint across processes", "[mpi]") {
  const int w = world_size(), r = world_rank();
  dtrain::io::Sampler s(1001, w, r, 25, 9);
  std::vector<long long> mine;
  for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
    for (int64_t i : s.batch(1, step)) mine.push_back(i);
  std::vector<long long> all(mine.size() * static_cast<size_t>(w));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_LONG_LONG, all.data(),
                static_cast<int>(mine.size()), MPI_LONG_LONG, MPI_COMM_WORLD);
  std::set<long long> uniq(all.begin(), all.end());
  REQUIRE(uniq.size() == all.size());
  REQUIRE(static_cast<int64_t>(all.size()) == 1001 - s.remainder());
}

TEST_CASE("sum of shard gradients scaled by 1/global batch equals the 1-process gradient", "[mpi]") {
  const int w = world_size(), r = world_rank();
  const int per = 3, global = per * w;
  auto be = make_cpu_backend();
  ModelOptions o;
  o.minibatch = per;
  Net shard_net = lenet5(o);
  shard_net.finalize(*be, 77);
  // A deterministic global batch every rank can build.
  std::vector<float> xs(static_cast<size_t>(global) * 784);
  std::vector<int32_t> ys(static_cast<size_t>(global));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 255) / 255.0f - 0.5f;
  for (int i = 0; i < global; ++i) ys[static_cast<size_t>(i)] = (i * 3) % 10;

  auto grad_of = [&](Net& net, int first, int count) {
    Tensor x = Tensor::view(xs.data() + static_cast<size_t>(first) * 784, Shape(count, 1, 28, 28));
    const Tensor& y = net.forward(x, true);
    Tensor probs(y.shape()), dl(y.shape());
    int64_t c = 0;
    be->softmax_xent_forward(y.data(), ys.data() + first, count, 10, probs.data(), &c);
    be->softmax_xent_backward(probs.data(), ys.data() + first, count, 10, 1.0f / global, dl.data());
    net.backward(dl);
    return std::vector<float>(net.grads().data(), net.grads().data() + net.num_params());
  };
  std::vector<float> g = grad_of(shard_net, r * per, per);
  std::vector<float> sum(g.size());
  MPI_Allreduce(g.data(), sum.data(), static_cast<int>(g.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

  o.minibatch = global;
  Net full = lenet5(o);
  full.finalize(*be, 77);
  std::vector<float> ref = grad_of(full, 0, global);
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (static_cast<double>(sum[i]) - ref[i]) * (static_cast<double>(sum[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  INFO("relative L2 difference " << std::sqrt(num / den));
  REQUIRE(den > 0);
  REQUIRE(std::sqrt(num / den) < 1e-5);
}

TEST_CASE("errors name the rank", "[mpi]") {
  std::string m;
  try {
    DT_FAIL("boom");
  } catch (const dtrain::Error& e) {
    m = e.what();
  }
  // A DT_FAIL that did not throw leaves m empty and fails here.
  REQUIRE(m.find("rank " + std::to_string(world_rank()) + " on " + dtrain::error_host() + ":") == 0);
  REQUIRE(m.find("boom") != std::string::npos);
}
