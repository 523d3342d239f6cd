// tests/backend_ops.cpp — the table of backend operations (backend_ops.hpp) and
// its runner. Shapes are odd on purpose (N=3, C=5, 7×7, stride 2, padding 1,
// groups 2, non-square kernels, channel counts that cross oneDNN's blocks).
// Every stateful kernel runs two rounds with fresh data on the same kernel
// objects and buffers (the training pattern: forward then backward, same
// pointers), to catch stale cached state (reordered weights, chosen
// algorithms, saved statistics); the second round of some ops drops dx.
#include "backend_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/models.hpp"

namespace dtrain::test::ops {

using namespace dtrain::layers;

double tolerance(Tol t) {
  switch (t) {
    case Tol::exact: return 0.0;
    case Tol::elementwise: return 1e-5;
    case Tol::kernel: return 1e-4;
    case Tol::net: return 1e-3;
  }
  return 0.0;
}

const char* tol_name(Tol t) {
  switch (t) {
    case Tol::exact: return "exact";
    case Tol::elementwise: return "elementwise";
    case Tol::kernel: return "kernel";
    case Tol::net: return "net";
  }
  return "?";
}

float* Dev::zeros(size_t n) {
  keep.push_back(be.allocate(n));
  return keep.back().get();
}
float* Dev::up(const Vec& v) {
  float* p = zeros(v.size());
  put(p, v);
  return p;
}
void Dev::put(float* dev, const Vec& v) {
  if (!bf16_inputs) return be.upload(v.data(), dev, v.size() * sizeof(float));
  const Vec r = bf16_rounded(v);
  be.upload(r.data(), dev, r.size() * sizeof(float));
}
Vec Dev::down(const float* dev, size_t n) {
  Vec v(n);
  be.download(dev, v.data(), n * sizeof(float));
  return v;
}
const int32_t* Dev::labels(const std::vector<int32_t>& l) {
  float* p = zeros(l.size());
  be.upload(l.data(), p, l.size() * sizeof(int32_t));
  return reinterpret_cast<const int32_t*>(p);
}

namespace {

std::string round_name(int round, const char* what) { return "round " + std::to_string(round) + " " + what; }

// ---- convolution and linear: the weighted kernel ------------------------------
ConvDesc conv_desc(int n, int c, int h, int w, int k, int kh, int kw, int stride, int pad_h, int pad_w,
                   int groups, bool bias) {
  ConvDesc d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.k = k, d.kh = kh, d.kw = kw;
  d.stride_h = d.stride_w = stride, d.pad_h = pad_h, d.pad_w = pad_w, d.groups = groups, d.bias = bias;
  return d;
}

// x [N,C,H,W], w [K,C/g,KH,KW], b [K] → y [N,K,OH,OW]; backward: dx, dw, db.
void run_weighted(Dev& dev, Outputs& out, std::unique_ptr<WeightedKernel> k, size_t xn, size_t wn, size_t bn,
                  size_t yn, bool bias, bool want_dx) {
  std::mt19937 rng(42);
  float *x = dev.zeros(xn), *w = dev.zeros(wn), *b = dev.zeros(bn), *dy = dev.zeros(yn), *y = dev.zeros(yn);
  float *dx = dev.zeros(xn), *dw = dev.zeros(wn), *db = dev.zeros(bn);
  for (int round = 0; round < 2; ++round) {
    const bool dx_now = want_dx && round == 0;
    dev.put(x, random_vec(xn, rng)), dev.put(w, random_vec(wn, rng)), dev.put(b, random_vec(bn, rng));
    dev.put(dy, random_vec(yn, rng));
    k->forward(x, w, bias ? b : nullptr, y);
    k->backward(x, w, dy, dx_now ? dx : nullptr, dw, bias ? db : nullptr);
    out.add(round_name(round, "y"), dev.down(y, yn), Tol::kernel);
    if (dx_now) out.add(round_name(round, "dx"), dev.down(dx, xn), Tol::kernel);
    out.add(round_name(round, "dw"), dev.down(dw, wn), Tol::kernel);
    if (bias) out.add(round_name(round, "db"), dev.down(db, bn), Tol::kernel);
  }
}

Op conv_op(const std::string& what, const ConvDesc& d, bool want_dx = true) {
  std::ostringstream name;
  name << "conv " << what << ": N=" << d.n << " C=" << d.c << " " << d.h << "x" << d.w << " K=" << d.k << " "
       << d.kh << "x" << d.kw << " s" << d.stride_h << " p" << d.pad_h << "," << d.pad_w << " g" << d.groups
       << (d.bias ? "" : " no bias") << (want_dx ? "" : " no dx");
  return {"conv", name.str(), [d, want_dx](Dev& dev, Outputs& out) {
            const size_t xn = size_t(d.n) * d.c * d.h * d.w, wn = size_t(d.k) * (d.c / d.groups) * d.kh * d.kw;
            const size_t yn = size_t(d.n) * d.k * d.out_h() * d.out_w();
            run_weighted(dev, out, dev.be.conv(d), xn, wn, size_t(d.k), yn, d.bias, want_dx);
          }};
}

Op linear_op(int n, int in, int o, bool bias) {
  std::ostringstream name;
  name << "linear N=" << n << " IN=" << in << " OUT=" << o << (bias ? "" : " no bias");
  return {"linear", name.str(), [=](Dev& dev, Outputs& out) {
            LinearDesc d{n, in, o, bias, {}};
            run_weighted(dev, out, dev.be.linear(d), size_t(n) * in, size_t(o) * in, size_t(o), size_t(n) * o,
                         bias, true);
          }};
}

// ---- pooling and LRN: the unary kernel ---------------------------------------
// x [N,C,H,W] → y [N,C,OH,OW]; backward: dx.
void run_unary(Dev& dev, Outputs& out, std::unique_ptr<UnaryKernel> k, size_t xn, size_t yn, float lo, float hi) {
  std::mt19937 rng(7);
  float *x = dev.zeros(xn), *y = dev.zeros(yn), *dy = dev.zeros(yn), *dx = dev.zeros(xn);
  for (int round = 0; round < 2; ++round) {
    dev.put(x, random_vec(xn, rng, lo, hi));  // continuous: no ties in a max window
    dev.put(dy, random_vec(yn, rng));
    k->forward(x, y);
    k->backward(x, y, dy, dx);
    out.add(round_name(round, "y"), dev.down(y, yn), Tol::kernel);
    out.add(round_name(round, "dx"), dev.down(dx, xn), Tol::kernel);
  }
}

Op pool_op(const std::string& what, int c, int h, int w, PoolKind kind, int k, int stride, int pad,
           bool include_pad = true) {
  PoolDesc d;
  d.n = 3, d.c = c, d.h = h, d.w = w, d.kh = d.kw = k, d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad, d.kind = kind, d.avg_include_pad = include_pad;
  return {"pool", "pool " + what, [d](Dev& dev, Outputs& out) {
            const size_t xn = size_t(d.n) * d.c * d.h * d.w, yn = size_t(d.n) * d.c * d.out_h() * d.out_w();
            run_unary(dev, out, dev.be.pool(d), xn, yn, -1.0f, 1.0f);
          }};
}

Op lrn_op(int c, int h, int w, int size, float alpha = 0.5f, float beta = 0.75f, float k = 2.0f) {
  LrnDesc d{3, c, h, w, size, alpha, beta, k, {}};
  std::ostringstream name;
  name << "lrn size " << size << " C=" << c << " " << h << "x" << w << " alpha " << alpha << " k " << k;
  return {"lrn", name.str(), [d](Dev& dev, Outputs& out) {
            const size_t n = size_t(d.n) * d.c * d.h * d.w;
            run_unary(dev, out, dev.be.lrn(d), n, n, -2.0f, 2.0f);  // strong enough to matter
          }};
}

// ---- batch norm ----------------------------------------------------------------
// x [N,C,H,W], gamma/beta/running [C]: train (running stats), infer between
// forward_train and backward (must not disturb the saved statistics), backward.
Op batch_norm_op(int n, int c, int h, int w) {
  std::ostringstream name;
  name << "batch norm N=" << n << " C=" << c << " " << h << "x" << w;
  return {"batch_norm", name.str(), [=](Dev& dev, Outputs& out) {
            BatchNormDesc d{n, c, h, w, 1e-5f, 0.1f, {}};
            auto k = dev.be.batch_norm(d);
            std::mt19937 rng(5);
            const size_t sz = size_t(n) * c * h * w;
            float *x = dev.zeros(sz), *dy = dev.zeros(sz), *y = dev.zeros(sz), *yi = dev.zeros(sz);
            float *dx = dev.zeros(sz), *gamma = dev.zeros(size_t(c)), *beta = dev.zeros(size_t(c));
            float *rm = dev.up(Vec(size_t(c), 0.0f)), *rv = dev.up(Vec(size_t(c), 1.0f));
            float *dg = dev.zeros(size_t(c)), *db = dev.zeros(size_t(c));
            for (int round = 0; round < 2; ++round) {
              dev.put(x, random_vec(sz, rng, -1.0f, 3.0f)), dev.put(dy, random_vec(sz, rng));
              dev.put(gamma, random_vec(size_t(c), rng, 0.5f, 1.5f)), dev.put(beta, random_vec(size_t(c), rng));
              k->forward_train(x, gamma, beta, y, rm, rv);
              k->forward_infer(x, gamma, beta, rm, rv, yi);
              const bool want_dx = round == 0;
              k->backward(x, dy, gamma, want_dx ? dx : nullptr, dg, db);
              out.add(round_name(round, "y"), dev.down(y, sz), Tol::kernel);
              out.add(round_name(round, "running_mean"), dev.down(rm, size_t(c)), Tol::kernel);
              out.add(round_name(round, "running_var (unbiased)"), dev.down(rv, size_t(c)), Tol::kernel);
              out.add(round_name(round, "y inference"), dev.down(yi, sz), Tol::kernel);
              if (want_dx) out.add(round_name(round, "dx"), dev.down(dx, sz), Tol::kernel);
              out.add(round_name(round, "dgamma"), dev.down(dg, size_t(c)), Tol::kernel);
              out.add(round_name(round, "dbeta"), dev.down(db, size_t(c)), Tol::kernel);
            }
            // optional pointers: no running statistics, no dx / dgamma
            k->forward_train(x, gamma, beta, y, nullptr, nullptr);
            k->backward(x, dy, gamma, nullptr, nullptr, db);
            out.add("no running stats: y", dev.down(y, sz), Tol::kernel);
            out.add("no dx, no dgamma: dbeta", dev.down(db, size_t(c)), Tol::kernel);
          }};
}

// ---- elementwise functions, dropout, SGD -----------------------------------------
Op elementwise_op(size_t n) {
  return {"elementwise", "relu, add, accumulate, copy, fill, dropout, sgd: count " + std::to_string(n),
          [n](Dev& dev, Outputs& out) {
            std::mt19937 rng(1);
            const Vec xv = random_vec(n, rng), yv = random_vec(n, rng), dyv = random_vec(n, rng);
            float *x = dev.up(xv), *y0 = dev.up(yv), *dy = dev.up(dyv), *t = dev.zeros(n), *u = dev.zeros(n);
            auto& be = dev.be;
            be.relu_forward(x, t, n);
            out.add("relu forward", dev.down(t, n), Tol::exact);
            be.relu_backward(t, dy, u, n);
            out.add("relu backward", dev.down(u, n), Tol::exact);
            be.relu_backward(t, dy, t, n);  // dx aliasing y: elementwise, allowed
            out.add("relu backward in place", dev.down(t, n), Tol::exact);
            be.add(x, y0, t, n);
            out.add("add", dev.down(t, n), Tol::exact);
            be.accumulate(x, t, n);
            out.add("accumulate", dev.down(t, n), Tol::exact);
            be.copy(x, t, n);
            out.add("copy", dev.down(t, n), Tol::exact);
            be.fill(t, n, 0.25f);
            out.add("fill", dev.down(t, n), Tol::exact);
            for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
              const std::string ps = "dropout p " + std::to_string(p);
              float *m = dev.zeros(n), *dx = dev.zeros(n);
              be.dropout_forward(x, t, m, n, p, 1234);
              be.dropout_backward(m, dy, dx, n);
              out.add(ps + " mask", dev.down(m, n), Tol::exact);
              out.add(ps + " y", dev.down(t, n), Tol::exact);
              out.add(ps + " dx", dev.down(dx, n), Tol::exact);
            }
            float *p = dev.up(xv), *mom = dev.up(yv);
            for (int step = 0; step < 3; ++step) be.sgd_update(p, dy, mom, n, 0.1f, 0.9f, 1e-4f);
            out.add("sgd param", dev.down(p, n), Tol::elementwise);
            out.add("sgd momentum", dev.down(mom, n), Tol::elementwise);
            be.sgd_update(p, dy, nullptr, n, 0.05f, 0.0f, 0.0f);
            out.add("sgd without momentum", dev.down(p, n), Tol::elementwise);
          }};
}

// ---- softmax cross-entropy --------------------------------------------------------
// logits [N, K], labels [N] → probs [N, K], loss sum, correct count; dlogits [N, K].
Op softmax_op(int n, int k) {
  std::ostringstream name;
  name << "softmax cross-entropy N=" << n << " K=" << k;
  return {"softmax_xent", name.str(), [n, k](Dev& dev, Outputs& out) {
            std::mt19937 rng(2);
            Vec z = random_vec(size_t(n) * k, rng, -8.0f, 8.0f);
            std::vector<int32_t> labels(static_cast<size_t>(n));
            for (auto& l : labels) l = int32_t(rng() % uint32_t(k));
            labels[0] = 0;
            z[0] = 100.0f;  // one certainly-correct sample
            float *gz = dev.up(z), *p = dev.zeros(z.size()), *dz = dev.zeros(z.size());
            const int32_t* gl = dev.labels(labels);
            int64_t correct = -1;
            const double loss = dev.be.softmax_xent_forward(gz, gl, n, k, p, &correct);
            dev.be.softmax_xent_backward(p, gl, n, k, 1.0f / 64, dz);
            out.add("loss (sum)", Vec{float(loss)}, Tol::elementwise);
            out.add("correct", Vec{float(correct)}, Tol::exact);
            out.add("probs", dev.down(p, z.size()), Tol::elementwise);
            out.add("dlogits", dev.down(dz, z.size()), Tol::elementwise);
          }};
}

// ---- a training step of a model -----------------------------------------------------
// Same host initialisation on every backend (finalize seed 7), input [N, C, H, W]
// uploaded, logits, loss, parameter gradients and batch-norm running statistics compared.
Op net_step_op(const std::string& model, int n) {
  return {"net", "training step of " + model + " N=" + std::to_string(n), [model, n](Dev& dev, Outputs& out) {
            ModelOptions mo;
            mo.minibatch = n;
            Net net = make_model(model, mo);
            net.finalize(dev.be, 7);
            out.add("initial parameters", dev.down(net.params().data(), net.num_params()), Tol::exact);
            const Shape in = net.input_shape();
            const int k = int(net.output_shape().c());
            const Shape xs(n, in.c(), in.h(), in.w());
            std::mt19937 rng(11);
            float* x = dev.up(random_vec(size_t(xs.numel()), rng));
            std::vector<int32_t> labels(static_cast<size_t>(n));
            for (auto& l : labels) l = int32_t(rng() % uint32_t(k));
            const int32_t* gl = dev.labels(labels);
            net.set_step_seed(3);
            const Tensor& z = net.forward(Tensor::view(x, xs, dev.be.device()), true);
            float *p = dev.zeros(size_t(z.numel())), *dz = dev.zeros(size_t(z.numel()));
            const double loss = dev.be.softmax_xent_forward(z.data(), gl, n, k, p, nullptr);
            dev.be.softmax_xent_backward(p, gl, n, k, 1.0f / n, dz);
            out.add("logits", dev.down(z.data(), size_t(z.numel())), Tol::net);
            out.add("loss", Vec{float(loss)}, Tol::net);
            net.backward(Tensor::view(dz, Shape::flat(n, k), dev.be.device()));
            out.add("gradients", dev.down(net.grads().data(), net.num_params()), Tol::net);
            if (net.buffers().numel() > 1)
              out.add("running statistics", dev.down(net.buffers().data(), size_t(net.buffers().numel())), Tol::net);
          }};
}

// ---- the contract's errors (backend.hpp: Preconditions) ---------------------------
Op errors_op() {
  return {"errors", "dropout p = 1, a label out of range, batch norm with N·H·W = 1 throw Error",
          [](Dev& dev, Outputs& out) {
            float *a = dev.zeros(8), *b = dev.zeros(8), *c = dev.zeros(8);
            auto thrown = [&](const char* what, auto&& f) {
              float t = 0.0f;
              try {
                f();
              } catch (const Error&) {
                t = 1.0f;
              }
              CHECK(t == 1.0f);
              out.add(std::string("throws: ") + what, Vec{t}, Tol::exact);
            };
            thrown("dropout p = 1", [&] { dev.be.dropout_forward(a, b, c, 1, 1.0f, 0); });
            const int32_t* bad = dev.labels({0, 4});  // K = 4: label 4 is out of range
            thrown("label out of range", [&] { dev.be.softmax_xent_forward(a, bad, 2, 4, b, nullptr); });
            BatchNormDesc one{1, 2, 1, 1, 1e-5f, 0.1f, {}};
            auto k = dev.be.batch_norm(one);
            thrown("batch norm N·H·W = 1", [&] { k->forward_train(a, b, c, a, nullptr, nullptr); });
            dev.be.synchronize();
          }};
}

std::vector<Op> make_table() {
  std::vector<Op> t;
  // convolution: C=5 K=4 · groups · blocked channel counts · 1×1 · first layer · floor mode ·
  // AlexNet's 11×11/4 · depthwise with a non-square kernel and padding
  t.push_back(conv_op("3x3", conv_desc(3, 5, 7, 7, 4, 3, 3, 2, 1, 1, 1, true)));
  t.push_back(conv_op("groups 2", conv_desc(3, 4, 7, 7, 6, 3, 3, 1, 1, 1, 2, true)));
  t.push_back(conv_op("groups 2", conv_desc(3, 6, 7, 7, 4, 3, 3, 2, 1, 1, 2, false)));
  t.push_back(conv_op("blocked", conv_desc(2, 16, 9, 9, 32, 5, 5, 1, 2, 2, 2, true)));
  t.push_back(conv_op("blocked, odd size", conv_desc(3, 32, 11, 11, 16, 3, 3, 1, 1, 1, 1, true)));
  t.push_back(conv_op("1x1 (plain gemm)", conv_desc(3, 16, 7, 7, 24, 1, 1, 1, 0, 0, 1, true)));
  t.push_back(conv_op("1x1 stride 2", conv_desc(3, 8, 7, 7, 8, 1, 1, 2, 0, 0, 1, false)));
  t.push_back(conv_op("first layer", conv_desc(3, 3, 15, 15, 8, 5, 5, 2, 2, 2, 1, true), false));
  t.push_back(conv_op("floor mode drops a column", conv_desc(2, 5, 8, 8, 4, 3, 3, 2, 0, 0, 1, true)));
  t.push_back(conv_op("11x11 stride 4", conv_desc(2, 3, 31, 31, 8, 11, 11, 4, 2, 2, 1, true), false));
  t.push_back(conv_op("depthwise 5x3", conv_desc(2, 4, 8, 7, 4, 5, 3, 1, 2, 1, 4, true)));
  // linear
  for (bool bias : {true, false}) t.push_back(linear_op(3, 7, 5, bias));
  t.push_back(linear_op(5, 33, 17, true));
  // ≥ 2^20 weights: the cpu backend's backward runs on oneDNN's inner product
  t.push_back(linear_op(4, 1031, 1024, true));
  // pooling
  t.push_back(pool_op("max 3x3 s2 p1", 5, 7, 7, PoolKind::max, 3, 2, 1));
  t.push_back(pool_op("max 2x2 s2 p0 (floor drops a row)", 5, 7, 7, PoolKind::max, 2, 2, 0));
  t.push_back(pool_op("max 2x2 s2 p0, C=19 (blocks of 8 and 16 with padding channels)", 19, 8, 6, PoolKind::max, 2, 2, 0));
  t.push_back(pool_op("max 3x3 s2 p0 (AlexNet)", 5, 7, 7, PoolKind::max, 3, 2, 0));
  t.push_back(pool_op("max 3x3 s2 p1 on 9x8", 4, 9, 8, PoolKind::max, 3, 2, 1));
  t.push_back(pool_op("avg 3x3 s2 p1 include pad", 5, 7, 7, PoolKind::avg, 3, 2, 1, true));
  t.push_back(pool_op("avg 3x3 s2 p1 exclude pad", 5, 7, 7, PoolKind::avg, 3, 2, 1, false));
  t.push_back(pool_op("avg 2x2 s2 p0", 5, 7, 7, PoolKind::avg, 2, 2, 0));
  t.push_back(pool_op("global avg 7x7", 5, 7, 7, PoolKind::avg, 7, 1, 0));
  // LRN: odd and even (asymmetric) windows, channel blocks, AlexNet's constants
  for (int size : {5, 3}) t.push_back(lrn_op(5, 7, 7, size));
  t.push_back(lrn_op(20, 7, 7, 5));
  for (int size : {5, 3}) t.push_back(lrn_op(32, 7, 7, size));
  t.push_back(lrn_op(9, 7, 7, 4));
  for (int size : {1, 2, 9}) t.push_back(lrn_op(7, 5, 3, size, 0.3f));
  t.push_back(lrn_op(16, 7, 7, 5, 1e-4f, 0.75f, 1.0f));
  // batch norm
  t.push_back(batch_norm_op(3, 5, 7, 7));
  t.push_back(batch_norm_op(4, 16, 5, 5));
  t.push_back(batch_norm_op(8, 3, 1, 1));
  t.push_back(batch_norm_op(4, 3, 5, 6));
  // elementwise (37 stays serial, 100003 crosses the OpenMP threshold), softmax
  for (size_t n : {size_t(37), size_t(100003)}) t.push_back(elementwise_op(n));
  for (auto [n, k] : {std::pair{3, 5}, std::pair{37, 11}, std::pair{64, 10}, std::pair{40, 1000}})
    t.push_back(softmax_op(n, k));
  // whole training steps: conv, pool, ReLU, linear (lenet5); batch norm, residual add,
  // global average pooling (resnet20)
  t.push_back(net_step_op("lenet5", 8));
  t.push_back(net_step_op("resnet20", 4));
  t.push_back(errors_op());
  return t;
}

}  // namespace

const std::vector<Op>& all_ops() {
  static const std::vector<Op> table = make_table();
  return table;
}

int check_all_ops(const BackendUnderTest& b) {
  auto ref = make_reference_backend();
  auto be = b.make();
  int ran = 0;
  for (const Op& op : all_ops()) {
    if (std::find(b.skip_kinds.begin(), b.skip_kinds.end(), op.kind) != b.skip_kinds.end()) continue;
    INFO("backend " << b.name << ", op " << op.name);
    Outputs want, got;
    try {
      Dev dr(*ref);
      dr.bf16_inputs = b.bf16_inputs;
      op.run(dr, want);
      Dev dg(*be);
      dg.bf16_inputs = b.bf16_inputs;
      op.run(dg, got);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
      continue;
    }
    ++ran;
    REQUIRE(got.list.size() == want.list.size());
    for (size_t i = 0; i < want.list.size(); ++i) {
      const Output& w = want.list[i];
      const Output& g = got.list[i];
      const double tol = b.bitwise                           ? 0.0
                         : b.kernel_tol > 0 && w.tol == Tol::kernel ? b.kernel_tol
                                                                     : tolerance(w.tol);
      const double err = rel_err(g.values, w.values);
      INFO("output " << w.name << ", tolerance " << (b.bitwise ? "bitwise" : tol_name(w.tol)) << " " << tol
                     << ", rel_err " << err);
      CHECK(err <= tol);
    }
  }
  return ran;
}

}  // namespace dtrain::test::ops
