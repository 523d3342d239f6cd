// tests/test_net.cpp — the DAG: whole-net gradients by finite differences on the
// reference backend (residual fan-out included), the oneDNN backend against
// the reference on the same net, arena layout and the gradient-ready hook.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "gradcheck.hpp"
#include "net_fixtures.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/layer_kinds.hpp"
#include "layers/net.hpp"
#include "layers/sgd.hpp"

using namespace dtrain::layers;
using dtrain::test::check_gradient;
using dtrain::test::input;
using dtrain::test::loss_of;
using dtrain::test::small_dag;


TEST_CASE("whole-net parameter and fan-out gradients match finite differences", "[net]") {
  auto be = make_reference_backend();
  // The smooth variant: ReLU and max pooling are checked per layer
  // (test_reference_grad.cpp) away from their kinks, and whole-net in the
  // reference-vs-oneDNN test below.
  Net net = small_dag(3, 0.0f, /*smooth=*/true);
  net.finalize(*be, 11);
  Tensor x = input(3, 5);
  std::vector<int32_t> labels{0, 3, 4};
  Tensor dl(Shape::flat(3, 5));
  loss_of(net, *be, x, labels, &dl);
  net.backward(dl);
  std::vector<float> analytic(net.grads().data(), net.grads().data() + net.num_params());
  // Batch norm in training mode makes L depend on the whole batch: FD sees that too.
  dtrain::test::GradCheckOptions opt;
  opt.eps = 1e-2;
  auto r = check_gradient(net.params().data(), net.num_params(), analytic.data(),
                          [&] { return loss_of(net, *be, x, labels, nullptr); }, opt);
  INFO(r.str());
  CHECK(r.max_error < 2e-2);
  CHECK(r.checked == net.num_params());
}

TEST_CASE("oneDNN backend matches the reference on a whole net", "[net][onednn]") {
  auto ref = make_reference_backend();
  auto cpu = make_cpu_backend();
  Net a = small_dag(4, 0.5f), b = small_dag(4, 0.5f);
  a.finalize(*ref, 7);
  b.finalize(*cpu, 7);
  REQUIRE(std::equal(a.params().data(), a.params().data() + a.num_params(), b.params().data()));
  Tensor x = input(4, 9);
  std::vector<int32_t> labels{1, 2, 3, 4};
  Tensor da(Shape::flat(4, 5)), db(Shape::flat(4, 5));
  a.set_step_seed(42);
  b.set_step_seed(42);
  double la = loss_of(a, *ref, x, labels, &da), lb = loss_of(b, *cpu, x, labels, &db);
  CHECK(lb == Approx(la).epsilon(1e-4));
  a.backward(da);
  b.backward(db);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.num_params(); ++i) {
    double d = static_cast<double>(a.grads().data()[i]) - b.grads().data()[i];
    num += d * d;
    den += static_cast<double>(a.grads().data()[i]) * a.grads().data()[i];
  }
  INFO("relative L2 gradient difference " << std::sqrt(num / den));
  CHECK(std::sqrt(num / den) < 1e-4);
  // Running statistics were updated identically.
  for (int64_t i = 0; i < a.buffers().numel(); ++i)
    CHECK(b.buffers().data()[i] == Approx(a.buffers().data()[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("arena layout and the gradient-ready hook", "[net]") {
  auto be = make_reference_backend();
  Net net = small_dag(2);
  net.finalize(*be, 1);
  // conv1 (4·3·9 + 4) + bn1 (4 + 4) + conv2 (4·2·9 + 4) + fc (5·4 + 5)
  REQUIRE(net.num_params() == 112 + 8 + 76 + 25);
  REQUIRE(net.param_ranges().front().name == "conv1.weight");
  REQUIRE(net.param_ranges().back().name == "fc.bias");
  REQUIRE(net.buffers().numel() == 8);
  size_t covered = 0;
  for (auto& r : net.param_ranges()) {
    REQUIRE(r.offset == covered);
    covered += r.count;
  }
  REQUIRE(covered == net.num_params());
  Tensor x = input(2, 3);
  const Tensor& y = net.forward(x, true);
  Tensor dy(y.shape());
  dy.fill(1.0f);
  std::vector<std::pair<size_t, size_t>> ready;
  net.backward(dy, [&](size_t b, size_t e) { ready.emplace_back(b, e); });
  // Reverse layer order: contiguous ranges from the end of the arena to its start.
  REQUIRE(ready.size() == 4);
  REQUIRE(ready.front().second == net.num_params());
  REQUIRE(ready.back().first == 0);
  for (size_t i = 1; i < ready.size(); ++i) REQUIRE(ready[i].second == ready[i - 1].first);
  // grad_ready_events(): the same calls in the same order, without a backward
  // pass; their FLOPs and the tail's add up to the forward FLOPs.
  double tail = -1, flops = 0;
  const std::vector<GradReadyEvent> events = net.grad_ready_events(&tail);
  REQUIRE(events.size() == ready.size());
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(events[i].begin == ready[i].first);
    CHECK(events[i].end == ready[i].second);
    CHECK(events[i].flops >= 0);
    flops += events[i].flops;
  }
  CHECK(tail >= 0);
  CHECK(flops + tail == Approx(net.forward_flops()));
  CHECK(events.front().flops > 0);  // fc: at least its own matrix product
}

TEST_CASE("initialisation is a pure function of the seed", "[net]") {
  auto be = make_reference_backend();
  Net a = small_dag(2), b = small_dag(2), c = small_dag(2);
  a.finalize(*be, 5);
  b.finalize(*be, 5);
  c.finalize(*be, 6);
  REQUIRE(std::equal(a.params().data(), a.params().data() + a.num_params(), b.params().data()));
  REQUIRE_FALSE(std::equal(a.params().data(), a.params().data() + a.num_params(), c.params().data()));
  // BN starts at gamma = 1, beta = 0, running mean 0, running var 1.
  REQUIRE(a.buffers().data()[0] == 0.0f);
  REQUIRE(a.buffers().data()[4] == 1.0f);
}

TEST_CASE("a net runs at other batch sizes and in eval mode", "[net]") {
  auto be = make_cpu_backend();
  Net net = small_dag(4, 0.5f);
  net.finalize(*be, 2);
  Tensor x4 = input(4, 1);
  Tensor x1 = Tensor::view(x4.data(), Shape(1, 3, 6, 6));
  net.forward(x4, true);  // updates running statistics
  std::vector<float> eval4(net.forward(x4, false).data(), net.forward(x4, false).data() + 20);
  const Tensor& y1 = net.forward(x1, false);
  REQUIRE(y1.shape() == Shape::flat(1, 5));
  // In eval mode samples are independent: the first row is the same at batch 1 and 4.
  for (int j = 0; j < 5; ++j) CHECK(y1.data()[j] == Approx(eval4[static_cast<size_t>(j)]).epsilon(1e-5));
  // Eval mode is deterministic (dropout off).
  const Tensor& again = net.forward(x4, false);
  for (int j = 0; j < 20; ++j) CHECK(again.data()[j] == eval4[static_cast<size_t>(j)]);
  // Dropout really is off in eval mode: the same net without dropout (same seed,
  // same parameters, same running statistics after the same training forward)
  // gives the same outputs. A mask that is merely deterministic would not.
  Net plain = small_dag(4, 0.0f);
  plain.finalize(*be, 2);
  REQUIRE(std::equal(plain.params().data(), plain.params().data() + plain.num_params(), net.params().data()));
  plain.forward(x4, true);
  const Tensor& ep = plain.forward(x4, false);
  for (int j = 0; j < 20; ++j) CHECK(ep.data()[j] == Approx(eval4[static_cast<size_t>(j)]).epsilon(1e-6));
  REQUIRE_THROWS_AS(net.forward(Tensor(Shape(1, 2, 6, 6)), false), dtrain::Error);
}

TEST_CASE("backward proves linear gradients finite from x and dy: the check reads only the rest and stays exact",
          "[net]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int which = 0; which < 2; ++which) {
    auto be = which == 0 ? make_reference_backend() : make_cpu_backend();
    INFO(be->name());
    // small_dag: convolutions and batch norm (read by the check), the linear last.
    Net dag = small_dag(3);
    dag.finalize(*be, 5);
    const size_t fc = dag.param_ranges()[dag.param_ranges().size() - 2].offset;
    REQUIRE(dag.param_ranges()[dag.param_ranges().size() - 2].name == "fc.weight");
    using Ranges = std::vector<std::pair<size_t, size_t>>;
    CHECK(dag.unproven_grad_ranges() == Ranges{{0, dag.num_params()}});  // before any backward
    Tensor dl(Shape::flat(3, 5));
    const Tensor x3 = input(3, 8);  // backward reads the input forward saw
    loss_of(dag, *be, x3, {0, 1, 2}, &dl);
    dag.backward(dl);
    CHECK(dag.unproven_grad_ranges() == Ranges{{0, fc}});
    CHECK(backward_grads_finite(dag));

    // An MLP, x [4, 8] → fc1 (16) → ReLU → fc2 (3): every parameter in a
    // linear layer. x scaled by s, dy by t: from 1 to where dW overflows.
    Net mlp(Shape(4, 8, 1, 1));
    LinearOptions l;
    l.out_features = 16;
    int h = mlp.add(make_linear("fc1", l), Net::kInput);
    h = mlp.add(make_relu("relu"), h);
    l.out_features = 3;
    mlp.add(make_linear("fc2", l), h);
    mlp.finalize(*be, 9);
    int proven_huge = 0, overflowed = 0;
    for (double s : {1.0, 1e12, 1e17, 1e18, 1e19, 1e20, 1e21}) {
      for (double t : {1.0, 1e17, 1e18, 1e19, 1e20}) {
        INFO("x scale " << s << ", dy scale " << t);
        Tensor x(Shape(4, 8, 1, 1));
        auto v = dtrain::test::random_uniform(32, 3);
        for (size_t i = 0; i < v.size(); ++i) x.data()[i] = static_cast<float>(v[i] * s);
        mlp.forward(x, true);
        Tensor dy(Shape::flat(4, 3));
        auto w = dtrain::test::random_uniform(12, 4);
        for (size_t i = 0; i < w.size(); ++i) dy.data()[i] = static_cast<float>(w[i] * t);
        mlp.backward(dy);
        const double all = sum_of_squares(mlp.grads().data(), mlp.num_params());
        // Exact: the proof never hides a non-finite gradient.
        CHECK(backward_grads_finite(mlp) == std::isfinite(all));
        for (const auto& r : mlp.param_ranges()) {
          bool proven = true;
          for (const auto& [lo, hi] : mlp.unproven_grad_ranges()) proven = proven && (r.offset >= hi || r.offset + r.count <= lo);
          if (proven) CHECK(std::isfinite(sum_of_squares(mlp.grads().data() + r.offset, r.count)));
        }
        if (mlp.unproven_grad_ranges().empty() && s * t >= 1e35) ++proven_huge;
        if (!std::isfinite(all)) ++overflowed;
      }
    }
    CHECK(proven_huge > 0);  // the bound proves near float's limit, not only for small values
    CHECK(overflowed > 0);   // and the grid reaches gradients that overflow from finite x and dy
    // A NaN in x: nothing proven, and the check sees it.
    Tensor x(Shape(4, 8, 1, 1));
    x.fill(0.5f);
    x.data()[5] = nan;
    mlp.forward(x, true);
    Tensor dy(Shape::flat(4, 3));
    dy.fill(0.25f);
    mlp.backward(dy);
    // (fc2's input may be finite: a fused ReLU may map NaN to 0.)
    REQUIRE_FALSE(mlp.unproven_grad_ranges().empty());
    CHECK(mlp.unproven_grad_ranges().front().first == 0);  // fc1, at least
    CHECK(mlp.unproven_grad_ranges().front().second >= mlp.param_ranges()[1].offset + mlp.param_ranges()[1].count);
    CHECK_FALSE(backward_grads_finite(mlp));
  }
  // bf16 activations: proven from the bf16 x and dy the kernel reads.
  auto cpu = make_cpu_backend();
  if (cpu->precision_unsupported(DType::bf16).empty()) {
    Net net = small_dag(2);
    NetOptions o;
    o.precision = DType::bf16;
    net.finalize(*cpu, 5, o);
    Tensor dl(Shape::flat(2, 5));
    const Tensor x2 = input(2, 8);
    loss_of(net, *cpu, x2, {0, 1}, &dl);
    net.backward(dl);
    CHECK(net.plan_report().find("bf16") != std::string::npos);
    CHECK(net.unproven_grad_ranges() ==
          std::vector<std::pair<size_t, size_t>>{{0, net.param_ranges()[net.param_ranges().size() - 2].offset}});
    CHECK(backward_grads_finite(net));
    // The net's last bf16 linear rounds the f32 dy it is given: a finite
    // 3.3999e38 becomes Inf, and 0 · Inf NaN (x = 0, no bias). Not proven.
    Net fc(Shape(2, 4, 1, 1));
    LinearOptions l;
    l.out_features = 3;
    l.bias = false;
    fc.add(make_linear("fc", l), Net::kInput);
    fc.finalize(*cpu, 5, o);
    Tensor x(Shape(2, 4, 1, 1));
    x.fill(0.0f);
    fc.forward(x, true);
    Tensor dy(Shape::flat(2, 3));
    dy.fill(0.0f);
    dy.data()[0] = 3.3999e38f;
    fc.backward(dy);
    CHECK(backward_grads_finite(fc) == std::isfinite(sum_of_squares(fc.grads().data(), fc.num_params())));
  }
  // Bounds switched off (a caller whose check reads everything): nothing proven.
  auto ref = make_reference_backend();
  Net net = small_dag(2);
  net.finalize(*ref, 5);
  net.set_grad_bounds(false);
  Tensor dl(Shape::flat(2, 5));
  const Tensor x2 = input(2, 8);
  loss_of(net, *ref, x2, {0, 1}, &dl);
  net.backward(dl);
  CHECK(net.unproven_grad_ranges() == std::vector<std::pair<size_t, size_t>>{{0, net.num_params()}});
}
