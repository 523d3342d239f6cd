// layers/cpu/onednn.cpp — the "cpu" backend: oneDNN for convolution, pooling,
// LRN, batch normalisation and ReLU, OpenBLAS sgemm for linear layers, and
// plain OpenMP-vectorised loops for the elementwise functions.
//
// One dnnl::engine(cpu, 0) and one dnnl::stream per backend (onednn::Ctx),
// shared by its kernels. Every kernel builds its primitives once (constructor
// or first call) and reorders into buffers allocated once; see
// onednn_conv.cpp for the layout choices. ReLU primitives are cached per
// element count (a net has only a handful of distinct counts).

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "core/error.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers {
namespace {

using onednn::Ctx;
using onednn::CtxPtr;

// Below this many elements an OpenMP team costs more than it saves.
constexpr size_t kParallelMin = 1 << 15;

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
    return onednn::make_linear(d);
  }

  // x, y: [count]; y = max(x, 0) (oneDNN eltwise_relu).
  void relu_forward(const float* x, float* y, size_t count) override {
    if (count == 0) return;
    Relu& r = relu(count);
    r.x.set_data_handle(onednn::handle(x));
    r.y.set_data_handle(y);
    r.fwd.execute(ctx_->strm, {{DNNL_ARG_SRC, r.x}, {DNNL_ARG_DST, r.y}});
    ctx_->strm.wait();
  }

  // dx = dy where y > 0, else 0 (eltwise_relu_use_dst_for_bwd).
  void relu_backward(const float* y, const float* dy, float* dx, size_t count) override {
    if (count == 0) return;
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
  struct Relu {
    dnnl::eltwise_forward fwd;
    dnnl::eltwise_backward bwd;
    dnnl::memory x, y, dy, dx;
  };

  Relu& relu(size_t count) {
    auto it = relu_.find(count);
    if (it != relu_.end()) return it->second;
    auto md = onednn::plain_md({static_cast<dnnl::memory::dim>(count)}, onednn::tag::x);
    const auto& eng = ctx_->eng;
    dnnl::eltwise_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md, 0.0f},
        eng);
    dnnl::eltwise_backward::primitive_desc bpd(
        {dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md, md, 0.0f}, eng, fpd);
    Relu r{dnnl::eltwise_forward(fpd), dnnl::eltwise_backward(bpd), onednn::user_memory(md, eng),
           onednn::user_memory(md, eng), onednn::user_memory(md, eng), onednn::user_memory(md, eng)};
    return relu_.emplace(count, std::move(r)).first->second;
  }

  CtxPtr ctx_;
  std::unordered_map<size_t, Relu> relu_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace dtrain::layers
