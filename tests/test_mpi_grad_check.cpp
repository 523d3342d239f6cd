// tests/test_mpi_grad_check.cpp — the allreduce-mode non-finite check
// (summed_grads_finite, engine/grad_check.hpp): each worker reads a share of the ranges no
// layer bounds and the linear layers' bounds are added over the workers. On
// every rank it must give what a read of the whole summed arena gives, for
// gradients scaled from ordinary to past overflow (of one rank's gradient or
// only of their sum), and with an Inf written into one rank's gradient after
// its backward (that rank gives no bounds), wherever it lands.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/grad_check.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/layer_kinds.hpp"
#include "layers/net.hpp"
#include "layers/sgd.hpp"
#include "mpi_util.hpp"

using namespace dtrain::layers;
using dtrain::test::all_ranks;
using dtrain::test::world_rank;
using dtrain::test::world_size;

namespace {

// x [4, 2, 4, 4] → conv (3) → ReLU → linear (8) → ReLU → linear (3): the
// convolution's range is read, the linear layers' are bounded.
Net grad_check_net() {
  Net net(Shape(4, 2, 4, 4));
  ConvOptions c;
  c.out_channels = 3;
  c.pad = 1;
  int h = net.add(make_conv("conv", c), Net::kInput);
  h = net.add(make_relu("relu1"), h);
  LinearOptions l;
  l.out_features = 8;
  h = net.add(make_linear("fc1", l), h);
  h = net.add(make_relu("relu2"), h);
  l.out_features = 3;
  net.add(make_linear("fc2", l), h);
  return net;
}

// A value in [-1, 1) of (seed, i), the same on every platform.
float hashed(uint64_t seed, size_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// This rank's backward on x·s and dy·t (x and dy drawn from `seed`).
void run_backward(Net& net, Tensor& x, double s, double t, int seed) {
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(hashed(10 + seed, i) * s);
  net.forward(x, true);
  Tensor dy(Shape::flat(4, 3));
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data()[i] = static_cast<float>(hashed(20 + seed, i) * t);
  net.backward(dy);
}

void sum_grads(Net& net) {
  MPI_Allreduce(MPI_IN_PLACE, net.grads().data(), static_cast<int>(net.num_params()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
}

bool whole_read_finite(const Net& net) { return std::isfinite(sum_of_squares(net.grads().data(), net.num_params())); }

bool check(const Net& net, bool own_bounds) {
  return dtrain::summed_grads_finite(net, world_rank(), world_size(), own_bounds, [](double* v, size_t n) {
    MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  });
}

}  // namespace

TEST_CASE("summed gradient check: shares and summed bounds give the whole read's answer on every rank", "[mpi]") {
  auto be = make_reference_backend();
  Net net = grad_check_net();
  net.finalize(*be, 3);
  Tensor x(Shape(4, 2, 4, 4));
  const int rank = world_rank();
  REQUIRE(net.unbounded_grad_ranges().size() == 1);  // the convolution
  REQUIRE(net.grad_bounds().size() == 2);            // fc1, fc2
  int proven_large = 0, own_overflowed = 0;
  for (double s : {1.0, 1e17, 1e18, 1e19, 1e20, 1e21}) {
    for (double t : {1.0, 1e17, 1e18, 1e19, 1e20}) {
      INFO("x scale " << s << ", dy scale " << t);
      run_backward(net, x, s, t, rank);
      const bool own = whole_read_finite(net);
      std::vector<double> b;  // the linear layers' bounds, added over the ranks
      for (const auto& g : net.grad_bounds()) b.push_back(g.bound);
      MPI_Allreduce(MPI_IN_PLACE, b.data(), static_cast<int>(b.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      sum_grads(net);
      const bool truth = whole_read_finite(net);
      const bool got = check(net, true);
      CHECK(got == truth);
      CHECK(all_ranks(got) == got);  // the same answer everywhere
      CHECK(all_ranks(!got) == !got);
      if (!all_ranks(own)) ++own_overflowed;
      if (s * t >= 1e35 && b[0] < kGradBoundLimit && b[1] < kGradBoundLimit) ++proven_large;
    }
  }
  CHECK(own_overflowed > 0);  // the grid reaches gradients that overflow on a rank
  CHECK(proven_large > 0);    // and bounds that prove near float's limit

  // Finite on every rank, Inf once added: the same x and dy on every rank,
  // dy scaled so that the largest gradient element is 0.7 × FLT_MAX.
  {
    run_backward(net, x, 1.0, 1.0, 0);
    double m = 0;
    for (size_t i = 0; i < net.num_params(); ++i) m = std::max(m, std::fabs(static_cast<double>(net.grads().data()[i])));
    run_backward(net, x, 1.0, 0.7 * std::numeric_limits<float>::max() / m, 0);
    CHECK(whole_read_finite(net));
    sum_grads(net);
    const bool truth = whole_read_finite(net);
    CHECK(truth == (world_size() == 1));
    CHECK(check(net, true) == truth);
  }

  // An Inf written after backward into the last rank's gradient, at the start,
  // middle and end of the convolution's range and in each linear layer's: that
  // rank gives no bounds, and every rank says non-finite.
  const auto conv = net.unbounded_grad_ranges().front();
  const auto bounds = net.grad_bounds();
  for (size_t at : {conv.first, (conv.first + conv.second) / 2, conv.second - 1, bounds[0].begin + 3, bounds[1].end - 1}) {
    INFO("Inf at " << at);
    run_backward(net, x, 1.0, 1.0, rank);
    const bool injector = rank == world_size() - 1;
    if (injector) net.grads().data()[at] = std::numeric_limits<float>::infinity();
    sum_grads(net);
    CHECK_FALSE(whole_read_finite(net));
    CHECK_FALSE(check(net, !injector));
  }
}
