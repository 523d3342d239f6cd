// layers/cpu/staged.cpp — the "cpu-staged" backend (staged.hpp): a registry of
// live "device" allocations, pointer checks in front of every call, and
// forwarding to the wrapped backend's kernels. The kernel wrappers come from one
// template (Staged<K>: per interface, only the argument list of each method).
#include "layers/cpu/staged.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

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
void need_dev(const Registry& r, const void* p, size_t bytes, std::string_view call, std::string_view arg) {
  if (p == nullptr) DT_FAIL("cpu-staged: ", call, ": ", arg, " is nullptr");
  if (!r.inside(p, std::max<size_t>(bytes, 1)))
    DT_FAIL("cpu-staged: ", call, ": ", arg, " (", p, ", ", bytes, " bytes) is not inside a device allocation of "
            "this backend (a host pointer given to the device, or a range past an allocation's end)");
}
constexpr size_t F = sizeof(float);

// Checks the pointer arguments of one call, each `bytes` long: `spec` names them
// in order, separated by spaces, and a trailing '?' marks one that may be nullptr.
template <class... P>
void check(const Registry& r, std::string_view call, size_t bytes, std::string_view spec, const P*... p) {
  const void* ptrs[] = {static_cast<const void*>(p)...};
  for (const void* q : ptrs) {
    const size_t end = spec.find(' ');
    std::string_view name = spec.substr(0, end);
    spec = end == std::string_view::npos ? std::string_view{} : spec.substr(end + 1);
    const bool optional = !name.empty() && name.back() == '?';
    if (optional) name.remove_suffix(1);
    if (!(optional && q == nullptr)) need_dev(r, q, bytes, call, name);
  }
}

// The staged wrapper of a kernel interface K: the registry, the wrapped kernel,
// and the layer kind that names the call in errors ("conv forward: x …"). The
// specialisations below only list each method's arguments for check().
template <class K>
class StagedBase : public K {
 public:
  StagedBase(RegistryPtr r, std::unique_ptr<K> k, std::string kind)
      : r_(std::move(r)), k_(std::move(k)), kind_(std::move(kind)) {}

 protected:
  template <class... P>
  void check_args(const char* pass, std::string_view spec, const P*... p) const {
    check(*r_, kind_ + " " + pass, F, spec, p...);
  }
  RegistryPtr r_;
  std::unique_ptr<K> k_;
  std::string kind_;
};

template <class K>
class Staged;

template <>
class Staged<WeightedKernel> final : public StagedBase<WeightedKernel> {
 public:
  using StagedBase::StagedBase;
  void forward(const float* x, const float* w, const float* b, float* y) override {
    check_args("forward", "x w b? y", x, w, b, y);
    k_->forward(x, w, b, y);
  }
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    check_args("backward", "x w dy dx? dw? db?", x, w, dy, dx, dw, db);
    k_->backward(x, w, dy, dx, dw, db);
  }
};

template <>
class Staged<UnaryKernel> final : public StagedBase<UnaryKernel> {
 public:
  using StagedBase::StagedBase;
  void forward(const float* x, float* y) override {
    check_args("forward", "x y", x, y);
    k_->forward(x, y);
  }
  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    check_args("backward", "x y dy dx", x, y, dy, dx);
    k_->backward(x, y, dy, dx);
  }
};

template <>
class Staged<BatchNormKernel> final : public StagedBase<BatchNormKernel> {
 public:
  using StagedBase::StagedBase;
  void forward_train(const float* x, const float* gamma, const float* beta, float* y, float* running_mean,
                     float* running_var) override {
    check_args("forward", "x gamma beta y running_mean? running_var?", x, gamma, beta, y, running_mean,
               running_var);
    k_->forward_train(x, gamma, beta, y, running_mean, running_var);
  }
  void forward_infer(const float* x, const float* gamma, const float* beta, const float* running_mean,
                     const float* running_var, float* y) override {
    check_args("inference", "x gamma beta running_mean running_var y", x, gamma, beta, running_mean,
               running_var, y);
    k_->forward_infer(x, gamma, beta, running_mean, running_var, y);
  }
  void backward(const float* x, const float* dy, const float* gamma, float* dx, float* dgamma,
                float* dbeta) override {
    check_args("backward", "x dy gamma dx? dgamma? dbeta?", x, dy, gamma, dx, dgamma, dbeta);
    k_->backward(x, dy, gamma, dx, dgamma, dbeta);
  }
};

template <class K>
std::unique_ptr<K> staged(RegistryPtr r, std::unique_ptr<K> k, const char* kind) {
  return std::make_unique<Staged<K>>(std::move(r), std::move(k), kind);
}

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
    check(*r_, "copy", count * F, "src dst", src, dst);
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

  std::unique_ptr<ConvKernel> conv(const ConvDesc& d) override { return staged(r_, k_->conv(d), "conv"); }
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d) override { return staged(r_, k_->pool(d), "pool"); }
  std::unique_ptr<LrnKernel> lrn(const LrnDesc& d) override { return staged(r_, k_->lrn(d), "lrn"); }
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormDesc& d) override {
    return staged(r_, k_->batch_norm(d), "batch norm");
  }
  std::unique_ptr<LinearKernel> linear(const LinearDesc& d) override { return staged(r_, k_->linear(d), "linear"); }

  void relu_forward(const float* x, float* y, size_t count) override {
    check(*r_, "relu forward", count * F, "x y", x, y);
    k_->relu_forward(x, y, count);
  }
  void relu_backward(const float* y, const float* dy, float* dx, size_t count) override {
    check(*r_, "relu backward", count * F, "y dy dx", y, dy, dx);
    k_->relu_backward(y, dy, dx, count);
  }
  void add(const float* a, const float* b, float* y, size_t count) override {
    check(*r_, "add", count * F, "a b y", a, b, y);
    k_->add(a, b, y, count);
  }
  void accumulate(const float* x, float* y, size_t count) override {
    check(*r_, "accumulate", count * F, "x y", x, y);
    k_->accumulate(x, y, count);
  }
  void dropout_forward(const float* x, float* y, float* mask, size_t count, float p, uint64_t seed) override {
    check(*r_, "dropout forward", count * F, "x y mask", x, y, mask);
    k_->dropout_forward(x, y, mask, count, p, seed);
  }
  void dropout_backward(const float* mask, const float* dy, float* dx, size_t count) override {
    check(*r_, "dropout backward", count * F, "mask dy dx", mask, dy, dx);
    k_->dropout_backward(mask, dy, dx, count);
  }
  double softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k, float* probs,
                              int64_t* correct) override {
    const size_t nk = size_t(std::max(n, 0)) * size_t(std::max(k, 0));
    check(*r_, "softmax_xent forward", nk * F, "logits", logits);
    check(*r_, "softmax_xent forward", size_t(std::max(n, 0)) * sizeof(int32_t), "labels", labels);
    check(*r_, "softmax_xent forward", nk * F, "probs", probs);
    return k_->softmax_xent_forward(logits, labels, n, k, probs, correct);  // correct: a host pointer
  }
  void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k, float scale,
                             float* dlogits) override {
    const size_t nk = size_t(std::max(n, 0)) * size_t(std::max(k, 0));
    check(*r_, "softmax_xent backward", nk * F, "probs", probs);
    check(*r_, "softmax_xent backward", size_t(std::max(n, 0)) * sizeof(int32_t), "labels", labels);
    check(*r_, "softmax_xent backward", nk * F, "dlogits", dlogits);
    k_->softmax_xent_backward(probs, labels, n, k, scale, dlogits);
  }
  void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr, float momentum,
                  float weight_decay) override {
    check(*r_, "sgd_update", count * F, "param grad mom?", param, grad, mom);
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
