// layers/cpu/staged.cpp — the "cpu-staged" backend (staged.hpp): a registry of
// live "device" allocations, pointer checks in front of every call, and
// forwarding to the wrapped backend's kernels.
#include "layers/cpu/staged.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

// Live device allocations: begin address → bytes.
class Registry {
 public:
  void add(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    live_[reinterpret_cast<uintptr_t>(p)] = bytes;
    total_ += bytes;
  }
  void remove(const void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(p));
    if (it == live_.end()) return;
    total_ -= it->second;
    live_.erase(it);
  }
  // Is [p, p + bytes) inside one live allocation? Does it touch any?
  bool inside(const void* p, size_t bytes) const {
    std::lock_guard<std::mutex> lk(mu_);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    return a >= it->first && a + bytes <= it->first + it->second;
  }
  bool touches(const void* p, size_t bytes) const {
    std::lock_guard<std::mutex> lk(mu_);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p), e = a + std::max<size_t>(bytes, 1);
    auto it = live_.lower_bound(e);  // first allocation starting at or after the end
    if (it == live_.begin()) return false;
    --it;
    return it->first + it->second > a;
  }
  size_t total() const {
    std::lock_guard<std::mutex> lk(mu_);
    return total_;
  }

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> live_;
  size_t total_ = 0;
};

using RegistryPtr = std::shared_ptr<Registry>;

// Throws when p (bytes long; 1 when the extent is the kernel's business) is not device memory.
void need_dev(const Registry& r, const void* p, size_t bytes, const char* call, const char* arg) {
  if (p == nullptr) DT_FAIL("cpu-staged: ", call, ": ", arg, " is nullptr");
  if (!r.inside(p, std::max<size_t>(bytes, 1)))
    DT_FAIL("cpu-staged: ", call, ": ", arg, " (", p, ", ", bytes, " bytes) is not inside a device allocation of "
            "this backend (a host pointer given to the device, or a range past an allocation's end)");
}
void opt_dev(const Registry& r, const void* p, size_t bytes, const char* call, const char* arg) {
  if (p != nullptr) need_dev(r, p, bytes, call, arg);
}
constexpr size_t F = sizeof(float);

class StagedConv final : public ConvKernel {
 public:
  StagedConv(RegistryPtr r, std::unique_ptr<ConvKernel> k) : r_(std::move(r)), k_(std::move(k)) {}
  void forward(const float* x, const float* w, const float* b, float* y) override {
    need_dev(*r_, x, F, "conv forward", "x");
    need_dev(*r_, w, F, "conv forward", "w");
    opt_dev(*r_, b, F, "conv forward", "b");
    need_dev(*r_, y, F, "conv forward", "y");
    k_->forward(x, w, b, y);
  }
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    need_dev(*r_, x, F, "conv backward", "x");
    need_dev(*r_, w, F, "conv backward", "w");
    need_dev(*r_, dy, F, "conv backward", "dy");
    opt_dev(*r_, dx, F, "conv backward", "dx");
    opt_dev(*r_, dw, F, "conv backward", "dw");
    opt_dev(*r_, db, F, "conv backward", "db");
    k_->backward(x, w, dy, dx, dw, db);
  }

 private:
  RegistryPtr r_;
  std::unique_ptr<ConvKernel> k_;
};

class StagedPool final : public PoolKernel {
 public:
  StagedPool(RegistryPtr r, std::unique_ptr<PoolKernel> k) : r_(std::move(r)), k_(std::move(k)) {}
  void forward(const float* x, float* y) override {
    need_dev(*r_, x, F, "pool forward", "x");
    need_dev(*r_, y, F, "pool forward", "y");
    k_->forward(x, y);
  }
  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    need_dev(*r_, x, F, "pool backward", "x");
    need_dev(*r_, y, F, "pool backward", "y");
    need_dev(*r_, dy, F, "pool backward", "dy");
    need_dev(*r_, dx, F, "pool backward", "dx");
    k_->backward(x, y, dy, dx);
  }

 private:
  RegistryPtr r_;
  std::unique_ptr<PoolKernel> k_;
};

class StagedLrn final : public LrnKernel {
 public:
  StagedLrn(RegistryPtr r, std::unique_ptr<LrnKernel> k) : r_(std::move(r)), k_(std::move(k)) {}
  void forward(const float* x, float* y) override {
    need_dev(*r_, x, F, "lrn forward", "x");
    need_dev(*r_, y, F, "lrn forward", "y");
    k_->forward(x, y);
  }
  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    need_dev(*r_, x, F, "lrn backward", "x");
    need_dev(*r_, y, F, "lrn backward", "y");
    need_dev(*r_, dy, F, "lrn backward", "dy");
    need_dev(*r_, dx, F, "lrn backward", "dx");
    k_->backward(x, y, dy, dx);
  }

 private:
  RegistryPtr r_;
  std::unique_ptr<LrnKernel> k_;
};

class StagedBatchNorm final : public BatchNormKernel {
 public:
  StagedBatchNorm(RegistryPtr r, std::unique_ptr<BatchNormKernel> k) : r_(std::move(r)), k_(std::move(k)) {}
  void forward_train(const float* x, const float* gamma, const float* beta, float* y, float* running_mean,
                     float* running_var) override {
    need_dev(*r_, x, F, "batch norm forward", "x");
    need_dev(*r_, gamma, F, "batch norm forward", "gamma");
    need_dev(*r_, beta, F, "batch norm forward", "beta");
    need_dev(*r_, y, F, "batch norm forward", "y");
    opt_dev(*r_, running_mean, F, "batch norm forward", "running_mean");
    opt_dev(*r_, running_var, F, "batch norm forward", "running_var");
    k_->forward_train(x, gamma, beta, y, running_mean, running_var);
  }
  void forward_infer(const float* x, const float* gamma, const float* beta, const float* running_mean,
                     const float* running_var, float* y) override {
    need_dev(*r_, x, F, "batch norm inference", "x");
    need_dev(*r_, gamma, F, "batch norm inference", "gamma");
    need_dev(*r_, beta, F, "batch norm inference", "beta");
    need_dev(*r_, running_mean, F, "batch norm inference", "running_mean");
    need_dev(*r_, running_var, F, "batch norm inference", "running_var");
    need_dev(*r_, y, F, "batch norm inference", "y");
    k_->forward_infer(x, gamma, beta, running_mean, running_var, y);
  }
  void backward(const float* x, const float* dy, const float* gamma, float* dx, float* dgamma,
                float* dbeta) override {
    need_dev(*r_, x, F, "batch norm backward", "x");
    need_dev(*r_, dy, F, "batch norm backward", "dy");
    need_dev(*r_, gamma, F, "batch norm backward", "gamma");
    opt_dev(*r_, dx, F, "batch norm backward", "dx");
    opt_dev(*r_, dgamma, F, "batch norm backward", "dgamma");
    opt_dev(*r_, dbeta, F, "batch norm backward", "dbeta");
    k_->backward(x, dy, gamma, dx, dgamma, dbeta);
  }

 private:
  RegistryPtr r_;
  std::unique_ptr<BatchNormKernel> k_;
};

class StagedLinear final : public LinearKernel {
 public:
  StagedLinear(RegistryPtr r, std::unique_ptr<LinearKernel> k) : r_(std::move(r)), k_(std::move(k)) {}
  void forward(const float* x, const float* w, const float* b, float* y) override {
    need_dev(*r_, x, F, "linear forward", "x");
    need_dev(*r_, w, F, "linear forward", "w");
    opt_dev(*r_, b, F, "linear forward", "b");
    need_dev(*r_, y, F, "linear forward", "y");
    k_->forward(x, w, b, y);
  }
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    need_dev(*r_, x, F, "linear backward", "x");
    need_dev(*r_, w, F, "linear backward", "w");
    need_dev(*r_, dy, F, "linear backward", "dy");
    opt_dev(*r_, dx, F, "linear backward", "dx");
    opt_dev(*r_, dw, F, "linear backward", "dw");
    opt_dev(*r_, db, F, "linear backward", "db");
    k_->backward(x, w, dy, dx, dw, db);
  }

 private:
  RegistryPtr r_;
  std::unique_ptr<LinearKernel> k_;
};

class StagedBackend final : public Backend {
 public:
  explicit StagedBackend(std::unique_ptr<Backend> k) : k_(std::move(k)), r_(std::make_shared<Registry>()) {
    DT_CHECK(!k_->discrete_memory(), "cpu-staged wraps a host backend, not '", k_->name(), "'");
  }

  std::string name() const override { return "cpu-staged(" + k_->name() + ")"; }
  Device device() const override { return Device::cpu; }
  bool discrete_memory() const override { return true; }

  std::shared_ptr<float> allocate(size_t count) override {
    std::shared_ptr<float> mem = k_->allocate(count);
    float* p = mem.get();
    r_->add(p, std::max<size_t>(count, 1) * F);
    RegistryPtr r = r_;
    return std::shared_ptr<float>(p, [r, mem](float* q) mutable {
      r->remove(q);
      mem.reset();
    });
  }
  void copy(const float* src, float* dst, size_t count) override {
    need_dev(*r_, src, count * F, "copy", "src");
    need_dev(*r_, dst, count * F, "copy", "dst");
    k_->copy(src, dst, count);
  }
  void fill(float* dst, size_t count, float value) override {
    need_dev(*r_, dst, count * F, "fill", "dst");
    k_->fill(dst, count, value);
  }
  void upload(const void* host, void* dst, size_t bytes) override {
    if (bytes == 0) return;
    need_dev(*r_, dst, bytes, "upload", "device destination");
    if (r_->touches(host, bytes))
      DT_FAIL("cpu-staged: upload: the host source ", host, " is device memory (a device pointer used as host)");
    std::memmove(dst, host, bytes);
    uploads_.fetch_add(1);
    upload_bytes_.fetch_add(bytes);
  }
  void download(const void* src, void* host, size_t bytes) override {
    if (bytes == 0) return;
    need_dev(*r_, src, bytes, "download", "device source");
    if (r_->touches(host, bytes))
      DT_FAIL("cpu-staged: download: the host destination ", host, " is device memory (a device pointer used as host)");
    std::memmove(host, src, bytes);
    downloads_.fetch_add(1);
    download_bytes_.fetch_add(bytes);
  }
  void synchronize() override { k_->synchronize(); }
  void* host_alloc(size_t bytes) override {
    void* p = Backend::host_alloc(bytes);
    const uint32_t nan = 0x7fc00000u;
    auto* w = static_cast<unsigned char*>(p);
    for (size_t i = 0; i < bytes; ++i) w[i] = reinterpret_cast<const unsigned char*>(&nan)[i % 4];
    return p;
  }

  std::unique_ptr<ConvKernel> conv(const ConvDesc& d) override {
    return std::make_unique<StagedConv>(r_, k_->conv(d));
  }
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d) override {
    return std::make_unique<StagedPool>(r_, k_->pool(d));
  }
  std::unique_ptr<LrnKernel> lrn(const LrnDesc& d) override { return std::make_unique<StagedLrn>(r_, k_->lrn(d)); }
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormDesc& d) override {
    return std::make_unique<StagedBatchNorm>(r_, k_->batch_norm(d));
  }
  std::unique_ptr<LinearKernel> linear(const LinearDesc& d) override {
    return std::make_unique<StagedLinear>(r_, k_->linear(d));
  }

  void relu_forward(const float* x, float* y, size_t count) override {
    need_dev(*r_, x, count * F, "relu forward", "x");
    need_dev(*r_, y, count * F, "relu forward", "y");
    k_->relu_forward(x, y, count);
  }
  void relu_backward(const float* y, const float* dy, float* dx, size_t count) override {
    need_dev(*r_, y, count * F, "relu backward", "y");
    need_dev(*r_, dy, count * F, "relu backward", "dy");
    need_dev(*r_, dx, count * F, "relu backward", "dx");
    k_->relu_backward(y, dy, dx, count);
  }
  void add(const float* a, const float* b, float* y, size_t count) override {
    need_dev(*r_, a, count * F, "add", "a");
    need_dev(*r_, b, count * F, "add", "b");
    need_dev(*r_, y, count * F, "add", "y");
    k_->add(a, b, y, count);
  }
  void accumulate(const float* x, float* y, size_t count) override {
    need_dev(*r_, x, count * F, "accumulate", "x");
    need_dev(*r_, y, count * F, "accumulate", "y");
    k_->accumulate(x, y, count);
  }
  void dropout_forward(const float* x, float* y, float* mask, size_t count, float p, uint64_t seed) override {
    need_dev(*r_, x, count * F, "dropout forward", "x");
    need_dev(*r_, y, count * F, "dropout forward", "y");
    need_dev(*r_, mask, count * F, "dropout forward", "mask");
    k_->dropout_forward(x, y, mask, count, p, seed);
  }
  void dropout_backward(const float* mask, const float* dy, float* dx, size_t count) override {
    need_dev(*r_, mask, count * F, "dropout backward", "mask");
    need_dev(*r_, dy, count * F, "dropout backward", "dy");
    need_dev(*r_, dx, count * F, "dropout backward", "dx");
    k_->dropout_backward(mask, dy, dx, count);
  }
  double softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k, float* probs,
                              int64_t* correct) override {
    const size_t nk = size_t(std::max(n, 0)) * size_t(std::max(k, 0));
    need_dev(*r_, logits, nk * F, "softmax_xent forward", "logits");
    need_dev(*r_, labels, size_t(std::max(n, 0)) * sizeof(int32_t), "softmax_xent forward", "labels");
    need_dev(*r_, probs, nk * F, "softmax_xent forward", "probs");
    return k_->softmax_xent_forward(logits, labels, n, k, probs, correct);  // correct: a host pointer
  }
  void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k, float scale,
                             float* dlogits) override {
    const size_t nk = size_t(std::max(n, 0)) * size_t(std::max(k, 0));
    need_dev(*r_, probs, nk * F, "softmax_xent backward", "probs");
    need_dev(*r_, labels, size_t(std::max(n, 0)) * sizeof(int32_t), "softmax_xent backward", "labels");
    need_dev(*r_, dlogits, nk * F, "softmax_xent backward", "dlogits");
    k_->softmax_xent_backward(probs, labels, n, k, scale, dlogits);
  }
  void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr, float momentum,
                  float weight_decay) override {
    need_dev(*r_, param, count * F, "sgd_update", "param");
    need_dev(*r_, grad, count * F, "sgd_update", "grad");
    opt_dev(*r_, mom, count * F, "sgd_update", "mom");
    k_->sgd_update(param, grad, mom, count, lr, momentum, weight_decay);
  }

  size_t device_bytes() const { return r_->total(); }
  StagedCounts counts() const {
    return {uploads_.load(), downloads_.load(), upload_bytes_.load(), download_bytes_.load()};
  }

 private:
  std::unique_ptr<Backend> k_;
  RegistryPtr r_;
  std::atomic<size_t> uploads_{0}, downloads_{0}, upload_bytes_{0}, download_bytes_{0};
};

const StagedBackend& as_staged(const Backend& b) {
  const auto* s = dynamic_cast<const StagedBackend*>(&b);
  DT_CHECK(s != nullptr, "backend '", b.name(), "' is not cpu-staged");
  return *s;
}

}  // namespace

std::unique_ptr<Backend> make_staged_backend(std::unique_ptr<Backend> kernels) {
  DT_CHECK(kernels != nullptr, "make_staged_backend: no kernels");
  return std::make_unique<StagedBackend>(std::move(kernels));
}

size_t staged_device_bytes(const Backend& b) { return as_staged(b).device_bytes(); }
StagedCounts staged_counts(const Backend& b) { return as_staged(b).counts(); }

}  // namespace dtrain::layers
