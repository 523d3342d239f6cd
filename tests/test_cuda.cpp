// tests/test_cuda.cpp — every CUDA kernel against the plain-loop reference,
// forward and backward, on random data and odd shapes (tolerances:
// tests/cuda_test_util.hpp). Each stateful case runs two rounds with fresh data
// on the same kernel objects and buffers (the training pattern), to catch stale
// state (cached algorithms, saved statistics). Tagged [cuda]: dtrain_cuda_tests
// reports them as skipped without a GPU (tests/cuda_main.cpp).
#include <cstdint>
#include <cstring>

#include "tests/cuda_test_util.hpp"

namespace dtrain::layers::test {
namespace {

TEST_CASE("cuda: transfers, fill, copy, relu, add, accumulate are exact", "[cuda]") {
  Both b;
  std::mt19937 rng(1);
  const size_t n = 1000;
  Vec x = random_vec(n, rng), y = random_vec(n, rng);
  float* dx = b.up(x);
  CHECK(b.down(dx, n) == x);
  float* t = b.zeros(n);
  b.gpu->copy(dx, t, n);
  CHECK(b.down(t, n) == x);
  b.gpu->fill(t, n, 2.5f);
  CHECK(b.down(t, n) == Vec(n, 2.5f));
  float* dy = b.up(y);
  Vec r(n);
  b.gpu->relu_forward(dx, t, n);
  b.ref->relu_forward(x.data(), r.data(), n);
  CHECK(b.down(t, n) == r);
  Vec rb(n);
  b.gpu->relu_backward(t, dy, t, n);  // dx aliasing y: elementwise, allowed
  b.ref->relu_backward(r.data(), y.data(), rb.data(), n);
  CHECK(b.down(t, n) == rb);
  b.gpu->add(dx, dy, t, n);
  b.ref->add(x.data(), y.data(), r.data(), n);
  CHECK(b.down(t, n) == r);
  b.gpu->accumulate(dx, dy, n);
  b.ref->accumulate(x.data(), y.data(), n);
  CHECK(b.down(dy, n) == y);
  // int32 labels travel through the byte-wise upload/download
  std::vector<int32_t> labels{3, 0, 7, 1}, back(4);
  float* dl = b.zeros(4);
  b.gpu->upload(labels.data(), dl, 16);
  b.gpu->download(dl, back.data(), 16);
  CHECK(back == labels);
}

TEST_CASE("cuda: dropout masks equal the reference's bit for bit", "[cuda]") {
  Both b;
  std::mt19937 rng(2);
  const size_t n = 4099;
  for (float p : {0.0f, 0.1f, 0.5f}) {
    Vec x = random_vec(n, rng), dy = random_vec(n, rng), y(n), m(n), dx(n);
    b.ref->dropout_forward(x.data(), y.data(), m.data(), n, p, 12345);
    b.ref->dropout_backward(m.data(), dy.data(), dx.data(), n);
    float *gx = b.up(x), *gy = b.zeros(n), *gm = b.zeros(n), *gdy = b.up(dy), *gdx = b.zeros(n);
    b.gpu->dropout_forward(gx, gy, gm, n, p, 12345);
    b.gpu->dropout_backward(gm, gdy, gdx, n);
    CHECK(b.down(gm, n) == m);
    CHECK(b.down(gy, n) == y);
    CHECK(b.down(gdx, n) == dx);
  }
  CHECK_THROWS(b.gpu->dropout_forward(b.zeros(1), b.zeros(1), b.zeros(1), 1, 1.0f, 0));
}

TEST_CASE("cuda: softmax cross-entropy (sum of losses, correct count, gradient)", "[cuda]") {
  Both b;
  std::mt19937 rng(3);
  const int n = 37, k = 11;
  Vec z = random_vec(size_t(n) * k, rng, -4.0f, 4.0f);
  std::vector<int32_t> labels(n);
  for (auto& l : labels) l = int32_t(rng() % k);
  Vec probs(z.size()), dz(z.size());
  int64_t c_ref = 0, c_gpu = 0;
  const double l_ref = b.ref->softmax_xent_forward(z.data(), labels.data(), n, k, probs.data(), &c_ref);
  b.ref->softmax_xent_backward(probs.data(), labels.data(), n, k, 1.0f / 64, dz.data());
  float* gz = b.up(z);
  float* glab = b.zeros(size_t(n));
  b.gpu->upload(labels.data(), glab, labels.size() * sizeof(int32_t));
  const auto* gl = reinterpret_cast<const int32_t*>(glab);
  float *gp = b.zeros(z.size()), *gdz = b.zeros(z.size());
  const double l_gpu = b.gpu->softmax_xent_forward(gz, gl, n, k, gp, &c_gpu);
  b.gpu->softmax_xent_backward(gp, gl, n, k, 1.0f / 64, gdz);
  CHECK(std::fabs(l_gpu - l_ref) <= 1e-9 * (1.0 + std::fabs(l_ref)));
  CHECK(c_gpu == c_ref);
  CHECK_CLOSE(b.down(gp, z.size()), probs, kTolElementwise);
  CHECK_CLOSE(b.down(gdz, z.size()), dz, kTolElementwise);
  labels[5] = k;  // out of range → Error
  b.gpu->upload(labels.data(), glab, labels.size() * sizeof(int32_t));
  CHECK_THROWS(b.gpu->softmax_xent_forward(gz, gl, n, k, gp, nullptr));
}

TEST_CASE("cuda: sgd_update with and without momentum", "[cuda]") {
  Both b;
  std::mt19937 rng(4);
  const size_t n = 777;
  Vec p = random_vec(n, rng), g = random_vec(n, rng), m = random_vec(n, rng);
  float *gp = b.up(p), *gg = b.up(g), *gm = b.up(m);
  for (int step = 0; step < 3; ++step) {
    b.ref->sgd_update(p.data(), g.data(), m.data(), n, 0.1f, 0.9f, 1e-4f);
    b.gpu->sgd_update(gp, gg, gm, n, 0.1f, 0.9f, 1e-4f);
  }
  CHECK_CLOSE(b.down(gp, n), p, kTolElementwise);
  CHECK_CLOSE(b.down(gm, n), m, kTolElementwise);
  b.ref->sgd_update(p.data(), g.data(), nullptr, n, 0.05f, 0.0f, 0.0f);
  b.gpu->sgd_update(gp, gg, nullptr, n, 0.05f, 0.0f, 0.0f);
  CHECK_CLOSE(b.down(gp, n), p, kTolElementwise);
}

size_t conv_out(const ConvDesc& d) { return size_t(d.n) * d.k * d.out_h() * d.out_w(); }

void check_conv(const ConvDesc& d, bool want_dx) {
  Both b;
  auto kg = b.gpu->conv(d);
  auto kr = b.ref->conv(d);
  std::mt19937 rng(5);
  const size_t xn = size_t(d.n) * d.c * d.h * d.w, wn = size_t(d.k) * (d.c / d.groups) * d.kh * d.kw;
  float *gx = b.zeros(xn), *gw = b.zeros(wn), *gb = b.zeros(size_t(d.k)), *gdy = b.zeros(conv_out(d));
  float *gy = b.zeros(conv_out(d)), *gdx = b.zeros(xn), *gdw = b.zeros(wn), *gdb = b.zeros(size_t(d.k));
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    Vec x = random_vec(xn, rng), w = random_vec(wn, rng), bias = random_vec(size_t(d.k), rng),
        dy = random_vec(conv_out(d), rng);
    Vec y(conv_out(d)), dx(xn), dw(wn), db(size_t(d.k));
    const float* bp = d.bias ? bias.data() : nullptr;
    kr->forward(x.data(), w.data(), bp, y.data());
    kr->backward(x.data(), w.data(), dy.data(), want_dx ? dx.data() : nullptr, dw.data(), db.data());
    b.put(gx, x), b.put(gw, w), b.put(gb, bias), b.put(gdy, dy);
    kg->forward(gx, gw, d.bias ? gb : nullptr, gy);
    kg->backward(gx, gw, gdy, want_dx ? gdx : nullptr, gdw, gdb);
    CHECK_CLOSE(b.down(gy, y.size()), y, kTol);
    if (want_dx) CHECK_CLOSE(b.down(gdx, xn), dx, kTol);
    CHECK_CLOSE(b.down(gdw, wn), dw, kTol);
    if (d.bias) CHECK_CLOSE(b.down(gdb, size_t(d.k)), db, kTol);
  }
  const auto rep = cuda_conv_report(*b.gpu);
  REQUIRE(rep.size() == 1);
  CHECK(rep[0].forward.chosen);
  CHECK(rep[0].backward_filter.chosen);
  CHECK(rep[0].backward_data.chosen == want_dx);
  CHECK(rep[0].workspace_bytes() <= quiet_options().workspace_bytes);
}

TEST_CASE("cuda: convolution forward and backward", "[cuda]") {
  SECTION("3x3 pad 1") { check_conv({3, 5, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, true}, true); }
  SECTION("3x3 stride 2, groups 2, no bias") {
    check_conv({3, 6, 9, 8, 4, 3, 3, 2, 2, 1, 1, 2, false}, true);
  }
  SECTION("11x11 stride 4 pad 2, first layer (no dx)") {
    check_conv({2, 3, 31, 31, 8, 11, 11, 4, 4, 2, 2, 1, true}, false);
  }
  SECTION("1x1") { check_conv({4, 8, 5, 5, 16, 1, 1, 1, 1, 0, 0, 1, true}, true); }
  SECTION("depthwise 5x3") { check_conv({2, 4, 8, 7, 4, 5, 3, 1, 1, 2, 1, 4, true}, true); }
}

TEST_CASE("cuda: a zero workspace budget keeps algorithms that need none", "[cuda]") {
  CudaOptions o = quiet_options();
  o.workspace_bytes = 0;
  Both b(o);
  ConvDesc d{2, 8, 12, 12, 8, 3, 3, 1, 1, 1, 1, 1, true};
  auto k = b.gpu->conv(d);
  const size_t xn = size_t(d.n) * d.c * d.h * d.w, wn = size_t(d.k) * d.c * 9;
  std::mt19937 rng(6);
  float *x = b.up(random_vec(xn, rng)), *w = b.up(random_vec(wn, rng)), *bb = b.zeros(8);
  float *y = b.zeros(conv_out(d)), *dy = b.up(random_vec(conv_out(d), rng));
  float *dx = b.zeros(xn), *dw = b.zeros(wn), *db = b.zeros(8);
  k->forward(x, w, bb, y);
  k->backward(x, w, dy, dx, dw, db);
  const auto rep = cuda_conv_report(*b.gpu);
  REQUIRE(rep.size() == 1);
  CHECK(rep[0].workspace_bytes() == 0);
  CHECK(rep[0].activation_bytes_per_sample == (8 * 144 + 8 * 144) * sizeof(float));
  CHECK(cuda_workspace_bytes(*b.gpu) == 0);
}

TEST_CASE("cuda: linear forward and backward (cuBLAS, row-major W [OUT, IN])", "[cuda]") {
  for (bool bias : {true, false}) {
    INFO("bias " << bias);
    Both b;
    LinearDesc d{5, 33, 17, bias};
    auto kg = b.gpu->linear(d);
    auto kr = b.ref->linear(d);
    std::mt19937 rng(7);
    Vec x = random_vec(5 * 33, rng), w = random_vec(17 * 33, rng), bv = random_vec(17, rng),
        dy = random_vec(5 * 17, rng);
    Vec y(5 * 17), dx(x.size()), dw(w.size()), db(17);
    kr->forward(x.data(), w.data(), bias ? bv.data() : nullptr, y.data());
    kr->backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    float *gx = b.up(x), *gw = b.up(w), *gb = b.up(bv), *gdy = b.up(dy);
    float *gy = b.zeros(y.size()), *gdx = b.zeros(dx.size()), *gdw = b.zeros(dw.size()), *gdb = b.zeros(17);
    kg->forward(gx, gw, bias ? gb : nullptr, gy);
    kg->backward(gx, gw, gdy, gdx, gdw, gdb);
    CHECK_CLOSE(b.down(gy, y.size()), y, kTol);
    CHECK_CLOSE(b.down(gdx, dx.size()), dx, kTol);
    CHECK_CLOSE(b.down(gdw, dw.size()), dw, kTol);
    if (bias) CHECK_CLOSE(b.down(gdb, 17), db, kTol);
  }
}

void check_pool(const PoolDesc& d) {
  Both b;
  auto kg = b.gpu->pool(d);
  auto kr = b.ref->pool(d);
  const size_t xn = size_t(d.n) * d.c * d.h * d.w, yn = size_t(d.n) * d.c * d.out_h() * d.out_w();
  std::mt19937 rng(8);
  float *gx = b.zeros(xn), *gy = b.zeros(yn), *gdy = b.zeros(yn), *gdx = b.zeros(xn);
  for (int round = 0; round < 2; ++round) {
    Vec x = random_vec(xn, rng), dy = random_vec(yn, rng), y(yn), dx(xn);  // tie-free
    kr->forward(x.data(), y.data());
    kr->backward(x.data(), y.data(), dy.data(), dx.data());
    b.put(gx, x), b.put(gdy, dy);
    kg->forward(gx, gy);
    kg->backward(gx, gy, gdy, gdx);
    CHECK_CLOSE(b.down(gy, yn), y, kTol);
    CHECK_CLOSE(b.down(gdx, xn), dx, kTol);
  }
}

TEST_CASE("cuda: pooling (max, average with and without padding, global)", "[cuda]") {
  PoolDesc d{3, 4, 9, 8, 3, 3, 2, 2, 1, 1, PoolKind::max, true};
  SECTION("max 3x3 s2 p1") { check_pool(d); }
  SECTION("avg include pad") { d.kind = PoolKind::avg; check_pool(d); }
  SECTION("avg exclude pad") { d.kind = PoolKind::avg; d.avg_include_pad = false; check_pool(d); }
  SECTION("max 2x2 s2") { check_pool({2, 3, 8, 8, 2, 2, 2, 2, 0, 0, PoolKind::max, true}); }
  SECTION("global average 7x7") { check_pool({2, 5, 7, 7, 7, 7, 1, 1, 0, 0, PoolKind::avg, true}); }
}

TEST_CASE("cuda: LRN across channels, odd and even windows", "[cuda]") {
  for (int size : {5, 4, 1, 2, 9}) {
    INFO("size " << size);
    Both b;
    LrnDesc d{2, 7, 5, 3, size, 0.3f, 0.75f, 2.0f};
    auto kg = b.gpu->lrn(d);
    auto kr = b.ref->lrn(d);
    const size_t n = 2 * 7 * 5 * 3;
    std::mt19937 rng(9);
    Vec x = random_vec(n, rng, -2.0f, 2.0f), dy = random_vec(n, rng), y(n), dx(n);
    kr->forward(x.data(), y.data());
    kr->backward(x.data(), y.data(), dy.data(), dx.data());
    float *gx = b.up(x), *gy = b.zeros(n), *gdy = b.up(dy), *gdx = b.zeros(n);
    kg->forward(gx, gy);
    kg->backward(gx, gy, gdy, gdx);
    CHECK_CLOSE(b.down(gy, n), y, kTol);
    CHECK_CLOSE(b.down(gdx, n), dx, kTol);
  }
}

TEST_CASE("cuda: batch norm train (running stats, unbiased variance), infer, backward", "[cuda]") {
  Both b;
  BatchNormDesc d{4, 3, 5, 6, 1e-5f, 0.1f};
  auto kg = b.gpu->batch_norm(d);
  auto kr = b.ref->batch_norm(d);
  const size_t n = 4 * 3 * 5 * 6;
  std::mt19937 rng(10);
  Vec gamma = random_vec(3, rng, 0.5f, 1.5f), beta = random_vec(3, rng), rm = random_vec(3, rng),
      rv = random_vec(3, rng, 0.5f, 2.0f);
  float *ggamma = b.up(gamma), *gbeta = b.up(beta), *grm = b.up(rm), *grv = b.up(rv);
  float *gx = b.zeros(n), *gy = b.zeros(n), *gdy = b.zeros(n), *gdx = b.zeros(n);
  float *gdg = b.zeros(3), *gdb = b.zeros(3);
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    Vec x = random_vec(n, rng, -1.0f, 3.0f), dy = random_vec(n, rng), y(n), dx(n), dg(3), db(3);
    kr->forward_train(x.data(), gamma.data(), beta.data(), y.data(), rm.data(), rv.data());
    kr->backward(x.data(), dy.data(), gamma.data(), dx.data(), dg.data(), db.data());
    b.put(gx, x), b.put(gdy, dy);
    kg->forward_train(gx, ggamma, gbeta, gy, grm, grv);
    kg->backward(gx, gdy, ggamma, gdx, gdg, gdb);
    CHECK_CLOSE(b.down(gy, n), y, kTol);
    CHECK_CLOSE(b.down(grm, 3), rm, kTol);
    CHECK_CLOSE(b.down(grv, 3), rv, kTol);
    CHECK_CLOSE(b.down(gdx, n), dx, kTol);
    CHECK_CLOSE(b.down(gdg, 3), dg, kTol);
    CHECK_CLOSE(b.down(gdb, 3), db, kTol);
    kr->forward_infer(x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), y.data());
    kg->forward_infer(gx, ggamma, gbeta, grm, grv, gy);
    CHECK_CLOSE(b.down(gy, n), y, kTol);
  }
  // optional pointers: no running stats, only one of them, no dx / dgamma
  kg->forward_train(gx, ggamma, gbeta, gy, nullptr, nullptr);
  kg->forward_train(gx, ggamma, gbeta, gy, grm, nullptr);
  kg->backward(gx, gdy, ggamma, nullptr, nullptr, gdb);
  b.gpu->synchronize();
  BatchNormDesc one{1, 2, 1, 1, 1e-5f, 0.1f};
  auto k1 = b.gpu->batch_norm(one);
  CHECK_THROWS(k1->forward_train(gx, ggamma, gbeta, gy, nullptr, nullptr));  // N·H·W = 1
}

}  // namespace
}  // namespace dtrain::layers::test
