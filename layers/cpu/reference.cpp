// layers/cpu/reference.cpp — the plain-loop reference Backend: host storage,
// elementwise ops, dropout, softmax cross-entropy and SGD, plus the factory.
// The stateful kernels live in reference_{conv,pool,norm}.cpp.
//
// Written for clarity, not speed: every fast backend is tested against this one,
// and this one is tested by central finite differences (tests/test_reference_*).
#include "layers/cpu/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "layers/cpu/reference_kernels.hpp"

namespace dtrain::layers {
namespace {

// A plain float32 kernel: the descriptor's exec must ask for nothing else.
template <class D, class Make>
auto plain(const D& d, const char* kernel, Make make) {
  require_plain_exec(d.exec, "reference", kernel);
  return make(d);
}

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }
  Device device() const override { return Device::cpu; }

  // 64-byte aligned, zero-filled, at least 64 bytes (so count 0 is a valid pointer).
  std::shared_ptr<float> allocate(size_t count) override {
    DT_CHECK(count <= std::numeric_limits<size_t>::max() / sizeof(float) - 64,
             "allocate: ", count, " floats overflow size_t");
    const size_t bytes = std::max<size_t>(64, (count * sizeof(float) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) DT_FAIL("out of host memory allocating ", bytes, " bytes");
    std::memset(p, 0, bytes);
    return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { std::free(q); });
  }

  void copy(const float* src, float* dst, size_t count) override {
    if (count > 0 && src != dst) std::memmove(dst, src, count * sizeof(float));
  }

  void fill(float* dst, size_t count, float value) override { std::fill(dst, dst + count, value); }

  std::unique_ptr<ConvKernel> conv(const ConvDesc& d) override { return plain(d, "conv", reference::make_conv); }
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d) override { return plain(d, "pool", reference::make_pool); }
  std::unique_ptr<LrnKernel> lrn(const LrnDesc& d) override { return plain(d, "lrn", reference::make_lrn); }
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormDesc& d) override {
    return plain(d, "batch_norm", reference::make_batch_norm);
  }
  std::unique_ptr<LinearKernel> linear(const LinearDesc& d) override {
    return plain(d, "linear", reference::make_linear);
  }
  // y = max(x, 0); NaN propagates (as torch.relu).
  void relu_forward(const float* x, float* y, size_t count) override {
    for (size_t i = 0; i < count; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
  }

  // dx = dy where y > 0, else 0.
  void relu_backward(const float* y, const float* dy, float* dx, size_t count) override {
    for (size_t i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }

  void add(const float* a, const float* b, float* y, size_t count) override {
    for (size_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
  }

  void accumulate(const float* x, float* y, size_t count) override {
    for (size_t i = 0; i < count; ++i) y[i] += x[i];
  }

  // mask[i] = u(seed, i) ≥ p ? 1/(1 − p) : 0; y = x · mask. p ∈ [0, 1).
  void dropout_forward(const float* x, float* y, float* mask, size_t count, float p,
                       uint64_t seed) override {
    DT_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1), got ", p);
    const float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < count; ++i) {
      mask[i] = dropout_uniform(seed, i) >= p ? scale : 0.0f;
      y[i] = x[i] * mask[i];
    }
  }

  void dropout_backward(const float* mask, const float* dy, float* dx, size_t count) override {
    for (size_t i = 0; i < count; ++i) dx[i] = dy[i] * mask[i];
  }

  // logits [N,K], labels [N] → probs [N,K]; returns Σ_n −log p[n, label[n]] computed
  // stably as logsumexp(z) − z[label]; *correct (if not nullptr) counts argmax == label,
  // the argmax being the lowest index among ties.
  double softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k,
                              float* probs, int64_t* correct) override {
    DT_CHECK(n >= 0 && k > 0, "softmax_xent: bad shape n=", n, " k=", k);
    double loss = 0.0;
    int64_t hits = 0;
    for (int i = 0; i < n; ++i) {
      const float* z = logits + size_t(i) * k;
      float* q = probs + size_t(i) * k;
      const int32_t label = labels[i];
      DT_CHECK(label >= 0 && label < k, "softmax_xent: label ", label, " of sample ", i,
               " is outside [0, ", k, ")");
      int arg = 0;
      for (int j = 1; j < k; ++j)
        if (z[j] > z[arg]) arg = j;
      const double zmax = z[arg];
      double sum = 0.0;
      for (int j = 0; j < k; ++j) sum += std::exp(double(z[j]) - zmax);
      for (int j = 0; j < k; ++j) q[j] = float(std::exp(double(z[j]) - zmax) / sum);
      loss += zmax + std::log(sum) - double(z[label]);
      if (arg == label) ++hits;
    }
    if (correct != nullptr) *correct = hits;
    return loss;
  }

  // dlogits [N,K] = (probs − onehot(label)) · scale
  void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k, float scale,
                             float* dlogits) override {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < k; ++j) {
        const size_t at = size_t(i) * k + j;
        const double target = (j == labels[i]) ? 1.0 : 0.0;
        dlogits[at] = float((double(probs[at]) - target) * scale);
      }
  }

  // torch.optim.SGD (dampening 0, no Nesterov):
  //   g = grad + wd·param;  mom = momentum·mom + g;  param −= lr·mom
  // mom may be nullptr when momentum == 0 (then param −= lr·g).
  void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr,
                  float momentum, float weight_decay) override {
    DT_CHECK(mom != nullptr || momentum == 0.0f, "sgd_update: momentum ", momentum,
             " needs a momentum buffer");
    for (size_t i = 0; i < count; ++i) {
      float g = grad[i] + weight_decay * param[i];
      if (mom != nullptr) {
        mom[i] = momentum * mom[i] + g;
        g = mom[i];
      }
      param[i] -= lr * g;
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace dtrain::layers
