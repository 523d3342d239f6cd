// tests/test_cuda_bf16.cpp — [cuda][bf16] cases of the CUDA backend's bf16
// mode (layers/cuda/cuda_backend.hpp): the convolution and linear kernels
// created with KernelExec::precision = bf16 against the reference backend's
// f32 kernels, and a bf16 Net on CUDA keeping f32 NCHW activations.
//
// Inputs (x, w, b, dy) are U(−1, 1) rounded to bf16 (layers::round_bf16) for
// both sides, so the kernels' casts are exact and the only differences are
// f32 sums in another order and, for the convolution, the rounding of y, dx
// and dw to bf16 before widening (relative 2^-9 each): rel_err
// (tests/compare_util.hpp) within 1e-2, the bf16 bound of the backend table.
// The weight copies: forward casts w every call (same pointer, new values, as
// after an SGD step); backward casts its own copy for another pointer.
// A training step in bf16 against the fp32 reference: tests/test_cuda_train.cpp.
// None of these has run yet (no GPU where they were written).
#include <string>

#include "layers/models.hpp"
#include "layers/net.hpp"
#include "tests/cuda_test_util.hpp"

namespace dtrain::layers::test {
namespace {

constexpr double kTolBf16 = 1e-2;

Vec bf16_random(size_t n, std::mt19937& rng) {
  Vec v = random_vec(n, rng);
  for (float& x : v) x = round_bf16(x);
  return v;
}

// False (and a skipped part said so) when this GPU has no bf16 tensor cores.
bool bf16_here(const Backend& gpu) {
  const std::string why = gpu.precision_unsupported(DType::bf16);
  if (why.empty()) return true;
  CHECK(why.find("compute capability") != std::string::npos);
  DT_CUDA_SKIPPED_PART("bf16: " << why);
  return false;
}

// One weighted kernel (conv or linear) in bf16 on the GPU next to the
// reference's f32 kernel: forward, backward, then backward on other weights
// and forward after the weights changed in place.
struct WeightedCase {
  size_t xn, wn, bn, yn;
  bool want_dx;
};

void check_weighted(Both& b, WeightedKernel& gpu, WeightedKernel& ref, const WeightedCase& c) {
  std::mt19937 rng(11);
  const Vec x = bf16_random(c.xn, rng), w = bf16_random(c.wn, rng), bias = bf16_random(c.bn, rng);
  const Vec dy = bf16_random(c.yn, rng), w2 = bf16_random(c.wn, rng);
  Vec y(c.yn), dx(c.xn), dw(c.wn), db(c.bn);
  float *gx = b.up(x), *gw = b.up(w), *gb = b.up(bias), *gdy = b.up(dy), *gw2 = b.up(w2);
  float *gy = b.zeros(c.yn), *gdx = b.zeros(c.xn), *gdw = b.zeros(c.wn), *gdb = b.zeros(c.bn);
  auto compare = [&](const char* what) {
    INFO(what);
    CHECK_CLOSE(b.down(gy, c.yn), y, kTolBf16);
    CHECK_CLOSE(b.down(gdw, c.wn), dw, kTolBf16);
    CHECK_CLOSE(b.down(gdb, c.bn), db, kTolBf16);
    if (c.want_dx) CHECK_CLOSE(b.down(gdx, c.xn), dx, kTolBf16);
  };

  ref.forward(x.data(), w.data(), bias.data(), y.data());
  ref.backward(x.data(), w.data(), dy.data(), c.want_dx ? dx.data() : nullptr, dw.data(), db.data());
  gpu.forward(gx, gw, gb, gy);
  gpu.backward(gx, gw, gdy, c.want_dx ? gdx : nullptr, gdw, gdb);
  compare("forward, then backward on the same weights (the forward's bf16 copy)");

  // Backward on another pointer than the last forward's: its own copy of w2.
  ref.forward(x.data(), w2.data(), bias.data(), y.data());
  ref.backward(x.data(), w2.data(), dy.data(), c.want_dx ? dx.data() : nullptr, dw.data(), db.data());
  gpu.backward(gx, gw2, gdy, c.want_dx ? gdx : nullptr, gdw, gdb);
  // Forward after the weights changed in place (same pointer, as an SGD step does).
  b.put(gw, w2);
  gpu.forward(gx, gw, gb, gy);
  compare("backward on other weights; forward after the weights changed in place");
}

TEST_CASE("cuda: bf16 convolution against the reference on bf16-rounded inputs", "[cuda][bf16]") {
  struct Conv {
    const char* name;
    ConvDesc d;
    bool want_dx;
  };
  // ConvDesc: n, c, h, w, k, kh, kw, stride h/w, pad h/w, groups, bias, exec
  for (const Conv& k : {Conv{"3x3 pad 1", {3, 5, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, true, {}}, true},
                        Conv{"5x5 stride 2 groups 2", {2, 6, 12, 12, 8, 5, 5, 2, 2, 2, 2, 2, true, {}}, true},
                        Conv{"1x1 no bias", {4, 16, 5, 5, 8, 1, 1, 1, 1, 0, 0, 1, false, {}}, true},
                        Conv{"11x11 stride 4, first layer (no dx)",
                             {2, 3, 31, 31, 8, 11, 11, 4, 4, 2, 2, 1, true, {}}, false}}) {
    INFO(k.name);
    Both b;
    if (!bf16_here(*b.gpu)) return;
    ConvDesc d = k.d;
    d.exec.precision = DType::bf16;
    auto gpu = b.gpu->conv(d);
    auto ref = b.ref->conv(k.d);
    CHECK(gpu->src_format() == Format{});  // activations stay f32 nchw on CUDA
    CHECK(gpu->dst_format() == Format{});
    const size_t wn = size_t(d.k) * (d.c / d.groups) * d.kh * d.kw;
    check_weighted(b, *gpu, *ref,
                   {size_t(d.n) * d.c * d.h * d.w, wn, size_t(d.bias ? d.k : 0),
                    size_t(d.n) * d.k * d.out_h() * d.out_w(), k.want_dx});
    // The algorithm search ran on the bf16 descriptors, within the budget.
    const auto rep = cuda_conv_report(*b.gpu);
    REQUIRE(rep.size() == 1);
    CHECK(rep[0].desc.exec.precision == DType::bf16);
    CHECK(rep[0].forward.chosen);
    CHECK(rep[0].backward_filter.chosen);
    CHECK(rep[0].backward_data.chosen == k.want_dx);
    CHECK(rep[0].workspace_bytes() <= quiet_options().workspace_bytes);
    CHECK(cuda_bf16_scratch_bytes(*b.gpu) > 0);
  }
}

TEST_CASE("cuda: bf16 linear (cublasGemmEx, f32 accumulation) against the reference on bf16-rounded inputs",
          "[cuda][bf16]") {
  for (const LinearDesc& d0 : {LinearDesc{5, 37, 11, true, {}}, LinearDesc{16, 400, 120, true, {}},
                               LinearDesc{3, 8, 1, false, {}}}) {
    INFO("linear n=" << d0.n << " in=" << d0.in << " out=" << d0.out);
    Both b;
    if (!bf16_here(*b.gpu)) return;
    LinearDesc d = d0;
    d.exec.precision = DType::bf16;
    auto gpu = b.gpu->linear(d);
    auto ref = b.ref->linear(d0);
    CHECK(gpu->src_format() == Format{});
    CHECK(gpu->dst_format() == Format{});
    check_weighted(b, *gpu, *ref,
                   {size_t(d.n) * d.in, size_t(d.out) * d.in, size_t(d.bias ? d.out : 0), size_t(d.n) * d.out, true});
  }
}

TEST_CASE("cuda: a bf16 net keeps f32 nchw activations and asks bf16 only of conv and linear", "[cuda][bf16]") {
  Both b;
  if (!bf16_here(*b.gpu)) return;
  ModelOptions mo;
  mo.minibatch = 4;
  Net net = make_model("lenet5", mo);
  NetOptions o;
  o.precision = DType::bf16;
  net.finalize(*b.gpu, 3, o);
  const Shape in = net.input_shape();
  std::mt19937 rng(2);
  float* x = b.up(random_vec(size_t(in.numel()), rng));
  const Tensor& y = net.forward(Tensor::view(x, in, Device::cuda), true);
  CHECK(y.format() == Format{});
  for (const auto& p : net.node_plans()) {
    CHECK(p.format == Format{});
    CHECK(p.converted.empty());
    CHECK(p.fused_into < 0);
  }
  const auto rep = cuda_conv_report(*b.gpu);
  CHECK(rep.size() == 2);  // conv1, conv2
  for (const auto& r : rep) CHECK(r.desc.exec.precision == DType::bf16);
}

}  // namespace
}  // namespace dtrain::layers::test
