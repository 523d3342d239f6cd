// tests/test_cuda_bf16.cpp — [cuda][bf16] cases of the CUDA backend's bf16
// mode (layers/cuda/cuda_backend.hpp) that the backend table does not cover
// (tests/test_backend_ops.cpp "cuda kernels in bf16" runs every conv and
// linear shape of the table in bf16 against the reference):
//  - the device's float32 → bf16 cast (cuda::to_bf16) on the rounding's edge
//    values (tests/bf16_edges.hpp), bit for bit against layers::to_bf16;
//  - one convolution and one linear kernel in bf16 against the reference's
//    f32 kernel through the life of their bf16 weight copies: forward casts w
//    every call (same pointer, new values, as after an SGD step), backward
//    reuses forward's copy for the same pointer and casts its own for another;
//    and that the bf16 path ran (the context's bf16 scratch, the convolution's
//    algorithm search on bf16 descriptors);
//  - a bf16 Net on CUDA keeping f32 NCHW activations.
//
// Inputs (x, w, b, dy) are U(−1, 1) rounded to bf16 (bf16_rounded,
// tests/compare_util.hpp) for both sides, so the kernels' casts are exact and
// the only differences are f32 sums in another order and, for the
// convolution, the rounding of y, dx and dw to bf16 before widening (relative
// 2^-9 each): rel_err (tests/compare_util.hpp) within 1e-2, the bf16 bound of
// the backend table.
// A training step in bf16 against the fp32 reference: tests/test_cuda_train.cpp.
// None of these has run yet (no GPU where they were written).
#include <cstring>
#include <iterator>
#include <string>

#include "layers/cuda/cuda_kernels.hpp"
#include "layers/models.hpp"
#include "layers/net.hpp"
#include "tests/bf16_edges.hpp"
#include "tests/cuda_test_util.hpp"

namespace dtrain::layers::test {
namespace {

constexpr double kTolBf16 = 1e-2;
using ::dtrain::test::bf16_rounded;

// False (and a skipped part said so) when this GPU has no bf16 tensor cores.
bool bf16_here(const Backend& gpu) {
  const std::string why = gpu.precision_unsupported(DType::bf16);
  if (why.empty()) return true;
  CHECK(why.find("compute capability") != std::string::npos);
  DT_CUDA_SKIPPED_PART("bf16: " << why);
  return false;
}

// The cast is integer arithmetic on the bits (layers::bf16_bits): any GPU runs
// it, bf16 tensor cores or not.
TEST_CASE("cuda: the device's bf16 cast rounds every edge value as layers::to_bf16 does", "[cuda][bf16]") {
  const auto& edges = ::dtrain::test::kBf16Edges;
  const size_t n = std::size(edges);
  Vec x(n);
  for (size_t i = 0; i < n; ++i) x[i] = ::dtrain::test::f32_of(edges[i].f32);
  Both b;
  float* gx = b.up(x);
  // n bf16 results in a float buffer of ⌈n/2⌉ (the backend allocates floats).
  auto* gy = reinterpret_cast<uint16_t*>(b.zeros((n + 1) / 2));
  CHECK(cuda::to_bf16(gx, gy, n) == gy);
  std::vector<uint16_t> y(n);
  b.gpu->download(gy, y.data(), n * sizeof(uint16_t));
  // Widening back on the device: exact, the host's from_bf16 bit for bit.
  float* gw = b.zeros(n);
  cuda::from_bf16(gy, gw, n);
  const Vec wide = b.down(gw, n);
  for (size_t i = 0; i < n; ++i) {
    INFO(edges[i].what << ": 0x" << std::hex << edges[i].f32 << " → device 0x" << y[i] << ", host 0x"
                       << to_bf16(x[i]));
    CHECK(y[i] == to_bf16(x[i]));
    CHECK(y[i] == edges[i].bf16);
    const float host_wide = from_bf16(y[i]);
    CHECK(std::memcmp(&wide[i], &host_wide, sizeof(float)) == 0);
  }
}

// One weighted kernel (conv or linear) in bf16 on the GPU next to the
// reference's f32 kernel: forward, backward, then backward on other weights
// and a new dy, and forward after the weights changed in place.
struct WeightedCase {
  size_t xn, wn, bn, yn;
};

void check_weighted(Both& b, WeightedKernel& gpu, WeightedKernel& ref, const WeightedCase& c) {
  std::mt19937 rng(11);
  const Vec x = bf16_rounded(random_vec(c.xn, rng)), w = bf16_rounded(random_vec(c.wn, rng));
  const Vec bias = bf16_rounded(random_vec(c.bn, rng)), dy = bf16_rounded(random_vec(c.yn, rng));
  const Vec w2 = bf16_rounded(random_vec(c.wn, rng)), dy2 = bf16_rounded(random_vec(c.yn, rng));
  Vec y(c.yn), dx(c.xn), dw(c.wn), db(c.bn);
  float *gx = b.up(x), *gw = b.up(w), *gb = b.up(bias), *gdy = b.up(dy), *gw2 = b.up(w2), *gdy2 = b.up(dy2);
  float *gy = b.zeros(c.yn), *gdx = b.zeros(c.xn), *gdw = b.zeros(c.wn), *gdb = b.zeros(c.bn);
  auto compare = [&](const char* what) {
    INFO(what);
    CHECK_CLOSE(b.down(gy, c.yn), y, kTolBf16);
    CHECK_CLOSE(b.down(gdx, c.xn), dx, kTolBf16);
    CHECK_CLOSE(b.down(gdw, c.wn), dw, kTolBf16);
    CHECK_CLOSE(b.down(gdb, c.bn), db, kTolBf16);
  };

  ref.forward(x.data(), w.data(), bias.data(), y.data());
  ref.backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
  gpu.forward(gx, gw, gb, gy);
  gpu.backward(gx, gw, gdy, gdx, gdw, gdb);
  compare("forward, then backward on the same weights (the forward's bf16 copy)");

  // Backward on another pointer than the last forward's (its own copy of w2),
  // with a new dy: dw = f(x, dy) and db = f(dy) do not depend on w, so only a
  // new dy makes a backward that left them unwritten fail.
  ref.forward(x.data(), w2.data(), bias.data(), y.data());
  ref.backward(x.data(), w2.data(), dy2.data(), dx.data(), dw.data(), db.data());
  gpu.backward(gx, gw2, gdy2, gdx, gdw, gdb);
  // Forward after the weights changed in place (same pointer, as an SGD step does).
  b.put(gw, w2);
  gpu.forward(gx, gw, gb, gy);
  compare("backward on other weights and a new dy; forward after the weights changed in place");
}

TEST_CASE("cuda: bf16 convolution: its weight copies, and the algorithm search on bf16 descriptors",
          "[cuda][bf16]") {
  Both b;
  if (!bf16_here(*b.gpu)) return;
  // ConvDesc: n, c, h, w, k, kh, kw, stride h/w, pad h/w, groups, bias, exec; 3x3 pad 1
  const ConvDesc d0{3, 5, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, true, {}};
  ConvDesc d = d0;
  d.exec.precision = DType::bf16;
  auto gpu = b.gpu->conv(d);
  auto ref = b.ref->conv(d0);
  CHECK(gpu->src_format() == Format{});  // activations stay f32 nchw on CUDA
  CHECK(gpu->dst_format() == Format{});
  check_weighted(b, *gpu, *ref,
                 {size_t(d.n) * d.c * d.h * d.w, size_t(d.k) * d.c * d.kh * d.kw, size_t(d.k),
                  size_t(d.n) * d.k * d.out_h() * d.out_w()});
  // The algorithm search ran on the bf16 descriptors, within the budget.
  const auto rep = cuda_conv_report(*b.gpu);
  REQUIRE(rep.size() == 1);
  CHECK(rep[0].desc.exec.precision == DType::bf16);
  CHECK(rep[0].forward.chosen);
  CHECK(rep[0].backward_filter.chosen);
  CHECK(rep[0].backward_data.chosen);
  CHECK(rep[0].workspace_bytes() <= quiet_options().workspace_bytes);
  CHECK(cuda_bf16_scratch_bytes(*b.gpu) > 0);
}

TEST_CASE("cuda: bf16 linear (cublasGemmEx, f32 accumulation): its weight copies", "[cuda][bf16]") {
  Both b;
  if (!bf16_here(*b.gpu)) return;
  const LinearDesc d0{5, 37, 11, true, {}};  // n, in, out, bias, exec
  LinearDesc d = d0;
  d.exec.precision = DType::bf16;
  auto gpu = b.gpu->linear(d);
  auto ref = b.ref->linear(d0);
  CHECK(gpu->src_format() == Format{});
  CHECK(gpu->dst_format() == Format{});
  check_weighted(b, *gpu, *ref,
                 {size_t(d.n) * d.in, size_t(d.out) * d.in, size_t(d.out), size_t(d.n) * d.out});
  CHECK(cuda_bf16_scratch_bytes(*b.gpu) > 0);  // x and dy went through the bf16 scratch
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
