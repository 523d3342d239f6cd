// layers/cpu/onednn.cpp — the "cpu" backend: oneDNN for convolution, pooling,
// LRN, batch normalisation, fully connected layers (matmul), ReLU, the Net's
// elementwise functions and its format conversions (reorders); plain
// OpenMP-vectorised loops for the rest (dropout, softmax, SGD; the SGD pass
// in AVX-512 intrinsics where the CPU has AVX-512F).
//
// One dnnl::engine(cpu, 0) and one dnnl::stream per backend (onednn::Ctx),
// shared by its kernels. Every kernel builds its primitives once (constructor
// or first call) and reorders into buffers allocated once; see
// onednn_conv.cpp for the layout choices. The elementwise primitives and the
// reorders are cached per (operation, element count or shape, formats): a net
// has only a handful of distinct ones.
//
// Capabilities (backend.hpp): kernels choose blocked formats, fuse a ReLU,
// and compute in bf16 when oneDNN's effective ISA has AVX512-BF16 (or AMX).

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include <immintrin.h>
#include <omp.h>

#include "core/error.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers {
namespace {

using onednn::Ctx;
using onednn::CtxPtr;

// Below this many elements an OpenMP team costs more than it saves.
constexpr size_t kParallelMin = 1 << 15;

// One range of the SGD update that also writes the weight mirror (bitwise the
// update without it as long as the scalar loops are compiled without FMA
// contraction, as with the project's baseline x86-64 flags; an FMA build,
// e.g. -march=native, fails tests/test_formats.cpp's equality):
//   g = grad + wd·param;  m = momentum·mom + g;  param −= lr·m;  p16 = bf16_bits(param)
// The scalar loop is the definition; sgd_mirror_avx512 computes the same bits
// (the same roundings: no fused multiply-add, bf16_bits' integer rounding, NaN
// included) and streams the mirror past the caches (nothing reads it before
// the next forward, so its lines need not be fetched first).
inline void sgd_mirror_scalar(float* param, const float* grad, float* mom, uint16_t* p16, ptrdiff_t b, ptrdiff_t e,
                              float lr, float momentum, float wd) {
#ifdef __clang__
#pragma clang fp contract(off)  // inlined into sgd_mirror_avx512, whose target has FMA
#endif
#pragma omp simd
  for (ptrdiff_t i = b; i < e; ++i) {
    const float g = grad[i] + wd * param[i];
    const float m = momentum * mom[i] + g;
    mom[i] = m;
    const float p = param[i] - lr * m;
    param[i] = p;
    p16[i] = bf16_bits(p);
  }
}

// The plain update (no mirror) of [b, e), out of place or in place (p_in ==
// p_out, m_in == m_out: every element is read before it is written): the
// definition sgd_avx512 computes the same bits of, and its tail.
inline void sgd_plain_scalar(const float* p_in, const float* m_in, float* p_out, float* m_out, const float* grad,
                             ptrdiff_t b, ptrdiff_t e, float lr, float momentum, float wd) {
#ifdef __clang__
#pragma clang fp contract(off)  // inlined into sgd_avx512, whose target has FMA
#endif
#pragma omp simd
  for (ptrdiff_t i = b; i < e; ++i) {
    const float p = p_in[i];
    const float g = grad[i] + wd * p;
    const float m = momentum * m_in[i] + g;
    m_out[i] = m;
    p_out[i] = p - lr * m;
  }
}

#pragma GCC diagnostic push  // GCC 12 takes the intrinsics' _mm512_undefined_* for uninitialised reads
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void sgd_mirror_avx512(
    float* param, const float* grad, float* mom, uint16_t* p16, ptrdiff_t b, ptrdiff_t e, float lr, float momentum,
    float wd) {
#ifdef __clang__
#pragma clang fp contract(off)  // clang ignores optimize()
#endif
  ptrdiff_t i = b;
  const ptrdiff_t head = std::min(e, b + static_cast<ptrdiff_t>(((32 - reinterpret_cast<uintptr_t>(p16 + b) % 32) % 32) / 2));
  sgd_mirror_scalar(param, grad, mom, p16, i, head, lr, momentum, wd);
  i = head;
  const __m512 vlr = _mm512_set1_ps(lr), vmom = _mm512_set1_ps(momentum), vwd = _mm512_set1_ps(wd);
  const __m512i lsb = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), abs = _mm512_set1_epi32(0x7fffffff),
                inf = _mm512_set1_epi32(0x7f800000), quiet = _mm512_set1_epi32(0x0040);
  for (; i + 16 <= e; i += 16) {
    const __m512 p0 = _mm512_loadu_ps(param + i);
    const __m512 g = _mm512_add_ps(_mm512_loadu_ps(grad + i), _mm512_mul_ps(vwd, p0));
    const __m512 m = _mm512_add_ps(_mm512_mul_ps(vmom, _mm512_loadu_ps(mom + i)), g);
    _mm512_storeu_ps(mom + i, m);
    const __m512 p = _mm512_sub_ps(p0, _mm512_mul_ps(vlr, m));
    _mm512_storeu_ps(param + i, p);
    const __m512i u = _mm512_castps_si512(p);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(hi, lsb))), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
    const __m512i bits = _mm512_mask_or_epi32(rounded, nan, hi, quiet);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p16 + i), _mm512_cvtepi32_epi16(bits));
  }
  sgd_mirror_scalar(param, grad, mom, p16, i, e, lr, momentum, wd);
  _mm_sfence();  // the streamed stores before any later load of the mirror
}

// The plain update (no mirror) on AVX-512F: the same bits as sgd_plain_scalar
// (no fused multiply-add), which the build's generic x86-64 target compiles
// to SSE2 — a pass that is bound by memory still issues fewer, wider loads
// here (AlexNet-OWT's 61 M parameters on 2 cores of an Emerald Rapids Xeon:
// 32–34 → 28–32 ms a step, `dtrain bench compute --model alexnet-owt`).
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void sgd_avx512(
    const float* p_in, const float* m_in, float* p_out, float* m_out, const float* grad, ptrdiff_t b, ptrdiff_t e,
    float lr, float momentum, float wd) {
#ifdef __clang__
#pragma clang fp contract(off)  // clang ignores optimize()
#endif
  const __m512 vlr = _mm512_set1_ps(lr), vmom = _mm512_set1_ps(momentum), vwd = _mm512_set1_ps(wd);
  ptrdiff_t i = b;
  for (; i + 16 <= e; i += 16) {
    const __m512 p0 = _mm512_loadu_ps(p_in + i);
    const __m512 g = _mm512_add_ps(_mm512_loadu_ps(grad + i), _mm512_mul_ps(vwd, p0));
    const __m512 m = _mm512_add_ps(_mm512_mul_ps(vmom, _mm512_loadu_ps(m_in + i)), g);
    _mm512_storeu_ps(m_out + i, m);
    _mm512_storeu_ps(p_out + i, _mm512_sub_ps(p0, _mm512_mul_ps(vlr, m)));
  }
  sgd_plain_scalar(p_in, m_in, p_out, m_out, grad, i, e, lr, momentum, wd);
}
#pragma GCC diagnostic pop

// AVX-512F here (every CPU that computes in bf16 has it; the scalar loop otherwise).
bool has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend() : ctx_(std::make_shared<Ctx>()) {}

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::cpu; }

  std::shared_ptr<float> allocate(size_t count) override {
    size_t bytes = (std::max<size_t>(count, 1) * sizeof(float) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    DT_CHECK(p != nullptr, "cpu backend: cannot allocate ", bytes, " bytes");
    std::memset(p, 0, bytes);
    return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { std::free(q); });
  }

  void copy(const float* src, float* dst, size_t count) override {
    if (count == 0 || src == dst) return;
    const ptrdiff_t n = static_cast<ptrdiff_t>(count);
#pragma omp parallel for simd if (count >= kParallelMin)
    for (ptrdiff_t i = 0; i < n; ++i) dst[i] = src[i];
  }

  void fill(float* dst, size_t count, float value) override {
    const ptrdiff_t n = static_cast<ptrdiff_t>(count);
#pragma omp parallel for simd if (count >= kParallelMin)
    for (ptrdiff_t i = 0; i < n; ++i) dst[i] = value;
  }

  std::unique_ptr<ConvKernel> conv(const ConvDesc& d) override { return onednn::make_conv(ctx_, d); }
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d) override { return onednn::make_pool(ctx_, d); }
  std::unique_ptr<LrnKernel> lrn(const LrnDesc& d) override { return onednn::make_lrn(ctx_, d); }
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormDesc& d) override {
    return onednn::make_batch_norm(ctx_, d);
  }
  std::unique_ptr<LinearKernel> linear(const LinearDesc& d) override {
    return onednn::make_linear(ctx_, d);
  }

  bool blocked_formats() const override { return true; }
  bool fuses_relu() const override { return true; }
  bool reads_weight_mirror() const override { return true; }
  std::string precision_unsupported(DType t) const override {
    if (t == DType::f32) return "";
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    if (isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx) return "";
    return "bf16 needs a CPU with AVX512-BF16 or AMX (Cooper Lake, Sapphire Rapids, Zen 4 and later); "
           "oneDNN finds none here (use --precision fp32)";
  }

  // x, y: [count]; y = max(x, 0) (oneDNN eltwise_relu).
  void relu_forward(const float* x, float* y, size_t count) override {
    if (count == 0) return;
    onednn::ThreadScope team(onednn::team_for_elements(double(count)));
    Relu& r = relu(count);
    r.x.set_data_handle(onednn::handle(x));
    r.y.set_data_handle(y);
    r.fwd.execute(ctx_->strm, {{DNNL_ARG_SRC, r.x}, {DNNL_ARG_DST, r.y}});
    ctx_->strm.wait();
  }

  // dx = dy where y > 0, else 0 (eltwise_relu_use_dst_for_bwd).
  void relu_backward(const float* y, const float* dy, float* dx, size_t count) override {
    if (count == 0) return;
    onednn::ThreadScope team(onednn::team_for_elements(double(count)));
    Relu& r = relu(count);
    r.y.set_data_handle(onednn::handle(y));
    r.dy.set_data_handle(onednn::handle(dy));
    r.dx.set_data_handle(dx);
    r.bwd.execute(ctx_->strm, {{DNNL_ARG_DST, r.y}, {DNNL_ARG_DIFF_DST, r.dy}, {DNNL_ARG_DIFF_SRC, r.dx}});
    ctx_->strm.wait();
  }

  void add(const float* a, const float* b, float* y, size_t count) override {
    const ptrdiff_t n = static_cast<ptrdiff_t>(count);
#pragma omp parallel for simd if (count >= kParallelMin)
    for (ptrdiff_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  }

  void accumulate(const float* x, float* y, size_t count) override {
    const ptrdiff_t n = static_cast<ptrdiff_t>(count);
#pragma omp parallel for simd if (count >= kParallelMin)
    for (ptrdiff_t i = 0; i < n; ++i) y[i] += x[i];
  }

  void dropout_forward(const float* x, float* y, float* mask, size_t count, float p,
                       uint64_t seed) override {
    DT_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1), got ", p);
    const float scale = 1.0f / (1.0f - p);
    const ptrdiff_t n = static_cast<ptrdiff_t>(count);
#pragma omp parallel for simd if (count >= kParallelMin)
    for (ptrdiff_t i = 0; i < n; ++i) {
      const float m = dropout_uniform(seed, static_cast<uint64_t>(i)) >= p ? scale : 0.0f;
      mask[i] = m;
      y[i] = x[i] * m;
    }
  }

  void dropout_backward(const float* mask, const float* dy, float* dx, size_t count) override {
    const ptrdiff_t n = static_cast<ptrdiff_t>(count);
#pragma omp parallel for simd if (count >= kParallelMin)
    for (ptrdiff_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
  }

  // logits, probs [N, K], labels [N]; returns Σ_n −log p[n, label[n]].
  double softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k,
                              float* probs, int64_t* correct) override {
    DT_CHECK(n >= 0 && k > 0, "softmax_xent: bad shape n=", n, " k=", k);
    for (int i = 0; i < n; ++i)
      DT_CHECK(labels[i] >= 0 && labels[i] < k, "softmax_xent: label ", labels[i], " of sample ",
               i, " is outside [0, ", k, ")");
    double loss = 0.0;
    int64_t right = 0;
    const bool par = static_cast<size_t>(n) * k >= kParallelMin;
#pragma omp parallel for reduction(+ : loss, right) if (par)
    for (int i = 0; i < n; ++i) {
      const float* z = logits + static_cast<size_t>(i) * k;
      float* p = probs + static_cast<size_t>(i) * k;
      int arg = 0;
      for (int j = 1; j < k; ++j)
        if (z[j] > z[arg]) arg = j;
      const float zmax = z[arg];
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < k; ++j) {
        p[j] = std::exp(z[j] - zmax);
        sum += p[j];
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int j = 0; j < k; ++j) p[j] *= inv;
      const int label = labels[i];
      // −log softmax = log Σ exp(z − zmax) − (z_label − zmax), without log(0).
      loss += std::log(static_cast<double>(sum)) - (static_cast<double>(z[label]) - zmax);
      right += arg == label ? 1 : 0;
    }
    if (correct != nullptr) *correct = right;
    return loss;
  }

  // dlogits [N, K] = (probs − onehot(label)) · scale
  void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k, float scale,
                             float* dlogits) override {
    const bool par = static_cast<size_t>(n) * k >= kParallelMin;
#pragma omp parallel for if (par)
    for (int i = 0; i < n; ++i) {
      const float* p = probs + static_cast<size_t>(i) * k;
      float* d = dlogits + static_cast<size_t>(i) * k;
#pragma omp simd
      for (int j = 0; j < k; ++j) d[j] = p[j] * scale;
      d[labels[i]] = (p[labels[i]] - 1.0f) * scale;
    }
  }

  // ---- Tensors of any format (backend.hpp): oneDNN primitives over the stored elements.
  void relu(const Tensor& x, Tensor& y) override {
    const size_t n = same("relu", x, y);
    if (n == 0) return;
    onednn::ThreadScope team(onednn::team_for_elements(double(n)));
    Relu& r = relu(n, x.format().dtype);
    r.x.set_data_handle(const_cast<void*>(x.raw()));
    r.y.set_data_handle(y.raw());
    r.fwd.execute(ctx_->strm, {{DNNL_ARG_SRC, r.x}, {DNNL_ARG_DST, r.y}});
    ctx_->strm.wait();
  }
  void relu_grad(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    const size_t n = same("relu_grad", y, dy, &dx);
    if (n == 0) return;
    onednn::ThreadScope team(onednn::team_for_elements(double(n)));
    Relu& r = relu(n, y.format().dtype);
    r.y.set_data_handle(const_cast<void*>(y.raw()));
    r.dy.set_data_handle(const_cast<void*>(dy.raw()));
    r.dx.set_data_handle(dx.raw());
    r.bwd.execute(ctx_->strm, {{DNNL_ARG_DST, r.y}, {DNNL_ARG_DIFF_DST, r.dy}, {DNNL_ARG_DIFF_SRC, r.dx}});
    ctx_->strm.wait();
  }
  void sum(const Tensor& a, const Tensor& b, Tensor& y, bool relu) override {
    const size_t n = same("sum", a, b, &y);
    if (n == 0) return;
    binary_add(a.raw(), b.raw(), y.raw(), n, a.format().dtype, relu);
  }
  void accumulate_into(const Tensor& x, Tensor& y) override {
    const size_t n = same("accumulate_into", x, y);
    if (n == 0) return;
    binary_add(y.raw(), x.raw(), y.raw(), n, x.format().dtype, false);
  }
  void dropout(const Tensor& x, Tensor& y, float* mask, float p, uint64_t seed) override {
    const size_t n = same("dropout", x, y);
    DT_CHECK(x.format().is_plain(), "dropout: plain formats only, not ", x.format().str());
    if (x.format().dtype == DType::f32) return dropout_forward(x.data(), y.data(), mask, n, p, seed);
    DT_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1), got ", p);
    const float scale = 1.0f / (1.0f - p);
    const auto* xs = static_cast<const uint16_t*>(x.raw());
    auto* ys = static_cast<uint16_t*>(y.raw());
    const ptrdiff_t m = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd if (n >= kParallelMin)
    for (ptrdiff_t i = 0; i < m; ++i) {
      const float k = dropout_uniform(seed, static_cast<uint64_t>(i)) >= p ? scale : 0.0f;
      mask[i] = k;
      ys[i] = bf16_bits(bf16_value(xs[i]) * k);
    }
  }
  void dropout_grad(const float* mask, const Tensor& dy, Tensor& dx) override {
    const size_t n = same("dropout_grad", dy, dx);
    if (dy.format().dtype == DType::f32) return dropout_backward(mask, dy.data(), dx.data(), n);
    const auto* ds = static_cast<const uint16_t*>(dy.raw());
    auto* xs = static_cast<uint16_t*>(dx.raw());
    const ptrdiff_t m = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd if (n >= kParallelMin)
    for (ptrdiff_t i = 0; i < m; ++i) xs[i] = bf16_bits(bf16_value(ds[i]) * mask[i]);
  }
  void convert(const Tensor& src, Tensor& dst) override {
    DT_CHECK(src.shape() == dst.shape(), "convert: shapes ", src.shape().str(), " and ", dst.shape().str(), " differ");
    if (src.format() == dst.format()) {
      if (src.raw() != dst.raw()) copy_bytes(src.raw(), dst.raw(), src.bytes());
      return;
    }
    const Shape& sh = src.shape();
    onednn::ThreadScope team(onednn::team_for_elements(double(src.stored())));
    const dnnl::memory::dims dims{sh.n(), sh.c(), sh.h(), sh.w()};
    const auto key = std::make_tuple(std::vector<int64_t>(dims.begin(), dims.end()), src.format().dtype,
                                     src.format().cblock, dst.format().dtype, dst.format().cblock);
    auto it = reorders_.find(key);
    if (it == reorders_.end()) {
      Reorder r;
      r.src = onednn::user_memory(onednn::act_md(dims, src.format()), ctx_->eng);
      r.dst = onednn::user_memory(onednn::act_md(dims, dst.format()), ctx_->eng);
      r.prim = dnnl::reorder(r.src, r.dst);
      it = reorders_.emplace(key, std::move(r)).first;
    }
    Reorder& r = it->second;
    r.src.set_data_handle(const_cast<void*>(src.raw()));
    r.dst.set_data_handle(dst.raw());
    r.prim.execute(ctx_->strm, r.src, r.dst);
    ctx_->strm.wait();
  }

  // One pass over the arena: each thread takes a contiguous share of the
  // segments' elements and applies each segment's weight decay.
  // With param_bf16, each element's bf16 bits are written from the register
  // that holds its new value (the weight mirror: 2 more bytes written per
  // parameter, instead of a 4-byte read and a 2-byte write by each forward).
  void sgd_update_segments(float* param, const float* grad, float* mom, const SgdSegment* segs, size_t n_segs,
                           float lr, float momentum, uint16_t* param_bf16) override {
    if (mom == nullptr || n_segs == 0)
      return Backend::sgd_update_segments(param, grad, mom, segs, n_segs, lr, momentum, param_bf16);
    sgd_pass(param, mom, param, mom, grad, segs, n_segs, lr, momentum, param_bf16);
  }
  // Out of place in the same pass: reads the old values from param_in/mom_in
  // (a cold read each, as in place) and writes only the outputs, so a
  // speculating server keeps the old generation without copying it.
  void sgd_update_segments_into(const float* param_in, const float* mom_in, float* param_out, float* mom_out,
                                const float* grad, const SgdSegment* segs, size_t n_segs, float lr,
                                float momentum) override {
    if (mom_in == nullptr || mom_out == nullptr || n_segs == 0)
      return Backend::sgd_update_segments_into(param_in, mom_in, param_out, mom_out, grad, segs, n_segs, lr,
                                               momentum);
    sgd_pass(param_in, mom_in, param_out, mom_out, grad, segs, n_segs, lr, momentum, nullptr);
  }

  // torch.optim.SGD: g = grad + wd·param; mom = momentum·mom + g; param −= lr·mom.
  // mom may be nullptr when momentum == 0 (then param −= lr·g), as in the reference.
  void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr,
                  float momentum, float weight_decay) override {
    const ptrdiff_t n = static_cast<ptrdiff_t>(count);
    if (mom == nullptr) {
      DT_CHECK(momentum == 0.0f, "sgd_update: momentum ", momentum, " needs a momentum buffer");
#pragma omp parallel for simd if (count >= kParallelMin)
      for (ptrdiff_t i = 0; i < n; ++i) param[i] -= lr * (grad[i] + weight_decay * param[i]);
      return;
    }
#pragma omp parallel for simd if (count >= kParallelMin)
    for (ptrdiff_t i = 0; i < n; ++i) {
      const float g = grad[i] + weight_decay * param[i];
      const float m = momentum * mom[i] + g;
      mom[i] = m;
      param[i] -= lr * m;
    }
  }

 private:
  // The SGD pass of the two functions above: p_in/m_in and p_out/m_out are the
  // same arenas (in place) or do not overlap; every element is read before it
  // is written, so the two give bitwise the same values.
  static void sgd_pass(const float* p_in, const float* m_in, float* p_out, float* m_out, const float* grad,
                       const SgdSegment* segs, size_t n_segs, float lr, float momentum, uint16_t* param_bf16) {
    std::vector<size_t> start(n_segs + 1, 0);  // prefix sums of the segments' lengths
    for (size_t i = 0; i < n_segs; ++i) start[i + 1] = start[i] + (segs[i].end - segs[i].begin);
    const size_t total = start[n_segs];
    const bool avx512 = has_avx512f();
#pragma omp parallel if (total >= kParallelMin)
    {
      const size_t nt = static_cast<size_t>(omp_get_num_threads()), t = static_cast<size_t>(omp_get_thread_num());
      const size_t per = (total / nt + 15) / 16 * 16;  // whole cache lines per thread
      const size_t lo = std::min(total, t * per), hi = t + 1 == nt ? total : std::min(total, lo + per);
      size_t s = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), lo) - start.begin()) - 1;
      for (size_t at = lo; at < hi && s < n_segs; ++s) {
        const size_t end = std::min(hi, start[s + 1]);
        const ptrdiff_t b = static_cast<ptrdiff_t>(segs[s].begin + (at - start[s]));
        const ptrdiff_t e = b + static_cast<ptrdiff_t>(end - at);
        const float wd = segs[s].weight_decay;
        if (param_bf16 == nullptr && avx512) {
          sgd_avx512(p_in, m_in, p_out, m_out, grad, b, e, lr, momentum, wd);
        } else if (param_bf16 == nullptr) {
          sgd_plain_scalar(p_in, m_in, p_out, m_out, grad, b, e, lr, momentum, wd);
        } else {  // in place only (sgd_update_segments)
          if (avx512)
            sgd_mirror_avx512(p_out, grad, m_out, param_bf16, b, e, lr, momentum, wd);
          else
            sgd_mirror_scalar(p_out, grad, m_out, param_bf16, b, e, lr, momentum, wd);
        }
        at = end;
      }
    }
  }

  struct Relu {
    dnnl::eltwise_forward fwd;
    dnnl::eltwise_backward bwd;
    dnnl::memory x, y, dy, dx;
  };
  struct Binary {
    dnnl::binary prim;
    dnnl::memory a, b, y;
  };
  struct Reorder {
    dnnl::reorder prim;
    dnnl::memory src, dst;
  };

  static float bf16_value(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static uint16_t bf16_bits(float f) {  // round to nearest even (finite values; NaN stays NaN)
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }

  // The stored elements of the tensors (one format and shape), else Error.
  static size_t same(const char* fn, const Tensor& a, const Tensor& b, const Tensor* c = nullptr) {
    DT_CHECK(a.format() == b.format() && a.shape() == b.shape() &&
                 (c == nullptr || (c->format() == a.format() && c->shape() == a.shape())),
             "cpu backend ", fn, ": operands differ in format or shape (", a.format().str(), " ", a.shape().str(),
             ", ", b.format().str(), " ", b.shape().str(), ")");
    return a.stored();
  }

  void copy_bytes(const void* src, void* dst, size_t bytes) {
    const auto* s = static_cast<const char*>(src);
    auto* d = static_cast<char*>(dst);
    const size_t chunk = size_t{1} << 20;
    const ptrdiff_t chunks = static_cast<ptrdiff_t>((bytes + chunk - 1) / chunk);
#pragma omp parallel for if (bytes >= 4 * kParallelMin)
    for (ptrdiff_t i = 0; i < chunks; ++i) {
      const size_t at = static_cast<size_t>(i) * chunk;
      std::memcpy(d + at, s + at, std::min(chunk, bytes - at));
    }
  }

  // y = a + b (then ReLU) over n elements of type t; y may be a or b.
  void binary_add(const void* a, const void* b, void* y, size_t n, DType t, bool relu) {
    onednn::ThreadScope team(onednn::team_for_elements(double(n)));
    const auto key = std::make_tuple(n, static_cast<int>(t), relu);
    auto it = binary_.find(key);
    if (it == binary_.end()) {
      const auto& eng = ctx_->eng;
      const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(n)}, onednn::dtype_of(t), onednn::tag::x);
      dnnl::binary::primitive_desc pd({dnnl::algorithm::binary_add, md, md, md}, onednn::relu_attr(relu), eng);
      Binary bin{dnnl::binary(pd), onednn::user_memory(md, eng), onednn::user_memory(md, eng),
                 onednn::user_memory(md, eng)};
      it = binary_.emplace(key, std::move(bin)).first;
    }
    Binary& bin = it->second;
    bin.a.set_data_handle(const_cast<void*>(a));
    bin.b.set_data_handle(const_cast<void*>(b));
    bin.y.set_data_handle(y);
    bin.prim.execute(ctx_->strm, {{DNNL_ARG_SRC_0, bin.a}, {DNNL_ARG_SRC_1, bin.b}, {DNNL_ARG_DST, bin.y}});
    ctx_->strm.wait();
  }

  Relu& relu(size_t count, DType t = DType::f32) {
    auto it = relu_.find({count, static_cast<int>(t)});
    if (it != relu_.end()) return it->second;
    const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(count)}, onednn::dtype_of(t), onednn::tag::x);
    const auto& eng = ctx_->eng;
    dnnl::eltwise_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md, 0.0f},
        eng);
    dnnl::eltwise_backward::primitive_desc bpd(
        {dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md, md, 0.0f}, eng, fpd);
    Relu r{dnnl::eltwise_forward(fpd), dnnl::eltwise_backward(bpd), onednn::user_memory(md, eng),
           onednn::user_memory(md, eng), onednn::user_memory(md, eng), onednn::user_memory(md, eng)};
    return relu_.emplace(std::make_pair(count, static_cast<int>(t)), std::move(r)).first->second;
  }

  CtxPtr ctx_;
  std::map<std::pair<size_t, int>, Relu> relu_;
  std::map<std::tuple<size_t, int, bool>, Binary> binary_;
  std::map<std::tuple<std::vector<int64_t>, DType, int, DType, int>, Reorder> reorders_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace dtrain::layers
