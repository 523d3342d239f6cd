// tests/exec_backend.cpp — see exec_backend.hpp.
#include "exec_backend.hpp"

#include <vector>

#include "core/error.hpp"

namespace dtrain::test {

using namespace dtrain::layers;

namespace {

// Buffers in a kernel's formats and the conversions from and to f32 NCHW.
class Formats {
 public:
  Formats(Backend& be, const Kernel& k, Shape x, Shape y) : be_(be), x_(x), y_(y), fx_(k.src_format()), fy_(k.dst_format()) {}

  // p (f32 nchw, shape s) converted into buffer `slot` in format f; returns the buffer.
  float* in(int slot, const float* p, const Shape& s, const Format& f) {
    float* b = buffer(slot, s, f);
    Tensor dst = Tensor::view(b, s, f);
    be_.convert(Tensor::view(const_cast<float*>(p), s), dst);
    return b;
  }
  float* out_buffer(int slot, const Shape& s, const Format& f) { return buffer(slot, s, f); }
  void out(int slot, float* p, const Shape& s, const Format& f) {
    Tensor dst = Tensor::view(p, s);
    be_.convert(Tensor::view(bufs_[static_cast<size_t>(slot)].get(), s, f), dst);
  }
  const Shape &x() const { return x_; }
  const Shape &y() const { return y_; }
  const Format &fx() const { return fx_; }
  const Format &fy() const { return fy_; }

 private:
  float* buffer(int slot, const Shape& s, const Format& f) {
    if (bufs_.size() <= static_cast<size_t>(slot)) bufs_.resize(static_cast<size_t>(slot) + 1);
    auto& b = bufs_[static_cast<size_t>(slot)];
    if (!b) b = be_.allocate((f.bytes(s) + 3) / 4);
    return b.get();
  }
  Backend& be_;
  Shape x_, y_;
  Format fx_, fy_;
  std::vector<std::shared_ptr<float>> bufs_;
};

enum Slot { kX, kY, kDy, kDx, kYi };

class Weighted final : public WeightedKernel {
 public:
  Weighted(Backend& be, std::unique_ptr<WeightedKernel> k, Shape x, Shape y) : k_(std::move(k)), f_(be, *k_, x, y) {}
  void forward(const float* x, const float* w, const float* b, float* y) override {
    k_->forward(f_.in(kX, x, f_.x(), f_.fx()), w, b, f_.out_buffer(kY, f_.y(), f_.fy()));
    f_.out(kY, y, f_.y(), f_.fy());
  }
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db) override {
    float* dxk = dx ? f_.out_buffer(kDx, f_.x(), f_.fx()) : nullptr;
    k_->backward(f_.in(kX, x, f_.x(), f_.fx()), w, f_.in(kDy, dy, f_.y(), f_.fy()), dxk, dw, db);
    if (dx) f_.out(kDx, dx, f_.x(), f_.fx());
  }

 private:
  std::unique_ptr<WeightedKernel> k_;
  Formats f_;
};

class Unary final : public UnaryKernel {
 public:
  Unary(Backend& be, std::unique_ptr<UnaryKernel> k, Shape x, Shape y) : k_(std::move(k)), f_(be, *k_, x, y) {}
  void forward(const float* x, float* y) override {
    k_->forward(f_.in(kX, x, f_.x(), f_.fx()), f_.out_buffer(kY, f_.y(), f_.fy()));
    f_.out(kY, y, f_.y(), f_.fy());
  }
  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    k_->backward(f_.in(kX, x, f_.x(), f_.fx()), f_.in(kY, y, f_.y(), f_.fy()), f_.in(kDy, dy, f_.y(), f_.fy()),
                 f_.out_buffer(kDx, f_.x(), f_.fx()));
    f_.out(kDx, dx, f_.x(), f_.fx());
  }

 private:
  std::unique_ptr<UnaryKernel> k_;
  Formats f_;
};

class Norm final : public BatchNormKernel {
 public:
  Norm(Backend& be, std::unique_ptr<BatchNormKernel> k, Shape x) : k_(std::move(k)), f_(be, *k_, x, x) {}
  void forward_train(const float* x, const float* gamma, const float* beta, float* y, float* rm, float* rv) override {
    k_->forward_train(f_.in(kX, x, f_.x(), f_.fx()), gamma, beta, f_.out_buffer(kY, f_.y(), f_.fy()), rm, rv);
    f_.out(kY, y, f_.y(), f_.fy());
  }
  void forward_infer(const float* x, const float* gamma, const float* beta, const float* rm, const float* rv,
                     float* y) override {
    // Its own input buffer: backward reuses what forward_train left in kX.
    k_->forward_infer(f_.in(kYi, x, f_.x(), f_.fx()), gamma, beta, rm, rv, f_.out_buffer(kY, f_.y(), f_.fy()));
    f_.out(kY, y, f_.y(), f_.fy());
  }
  void backward(const float* x, const float* dy, const float* gamma, float* dx, float* dg, float* db) override {
    float* dxk = dx ? f_.out_buffer(kDx, f_.x(), f_.fx()) : nullptr;
    k_->backward(f_.in(kX, x, f_.x(), f_.fx()), f_.in(kDy, dy, f_.y(), f_.fy()), gamma, dxk, dg, db);
    if (dx) f_.out(kDx, dx, f_.x(), f_.fx());
  }

 private:
  std::unique_ptr<BatchNormKernel> k_;
  Formats f_;
};

class ExecBackend final : public Backend {
 public:
  ExecBackend(std::unique_ptr<Backend> inner, KernelExec e) : k_(std::move(inner)), e_(e) {
    DT_CHECK(!e.relu, "exec backend: a fused ReLU changes the kernels' meaning");
  }
  std::string name() const override {
    return k_->name() + "(" + precision_name(e_.precision) + (e_.any_format ? ", chosen formats" : "") + ")";
  }
  Device device() const override { return k_->device(); }
  std::shared_ptr<float> allocate(size_t count) override { return k_->allocate(count); }
  // The inner backend's memory model (a device backend's pointers are not host memory).
  void upload(const void* h, void* d, size_t bytes) override { k_->upload(h, d, bytes); }
  void download(const void* d, void* h, size_t bytes) override { k_->download(d, h, bytes); }
  void synchronize() override { k_->synchronize(); }
  bool discrete_memory() const override { return k_->discrete_memory(); }
  void* host_alloc(size_t bytes) override { return k_->host_alloc(bytes); }
  void host_free(void* p) override { k_->host_free(p); }
  void copy(const float* s, float* d, size_t n) override { k_->copy(s, d, n); }
  void fill(float* d, size_t n, float v) override { k_->fill(d, n, v); }

  std::unique_ptr<ConvKernel> conv(const ConvDesc& d) override {
    ConvDesc e = d;
    e.exec = e_;
    return std::make_unique<Weighted>(*k_, k_->conv(e), Shape(d.n, d.c, d.h, d.w),
                                      Shape(d.n, d.k, d.out_h(), d.out_w()));
  }
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d) override {
    PoolDesc e = d;
    e.exec = e_;
    return std::make_unique<Unary>(*k_, k_->pool(e), Shape(d.n, d.c, d.h, d.w), Shape(d.n, d.c, d.out_h(), d.out_w()));
  }
  std::unique_ptr<LrnKernel> lrn(const LrnDesc& d) override {
    LrnDesc e = d;
    e.exec = e_;
    return std::make_unique<Unary>(*k_, k_->lrn(e), Shape(d.n, d.c, d.h, d.w), Shape(d.n, d.c, d.h, d.w));
  }
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormDesc& d) override {
    BatchNormDesc e = d;
    e.exec = e_;
    return std::make_unique<Norm>(*k_, k_->batch_norm(e), Shape(d.n, d.c, d.h, d.w));
  }
  std::unique_ptr<LinearKernel> linear(const LinearDesc& d) override {
    LinearDesc e = d;
    e.exec = e_;
    return std::make_unique<Weighted>(*k_, k_->linear(e), Shape(d.n, d.in, 1, 1), Shape(d.n, d.out, 1, 1));
  }

  void relu_forward(const float* x, float* y, size_t n) override { k_->relu_forward(x, y, n); }
  void relu_backward(const float* y, const float* dy, float* dx, size_t n) override { k_->relu_backward(y, dy, dx, n); }
  void add(const float* a, const float* b, float* y, size_t n) override { k_->add(a, b, y, n); }
  void accumulate(const float* x, float* y, size_t n) override { k_->accumulate(x, y, n); }
  void dropout_forward(const float* x, float* y, float* m, size_t n, float p, uint64_t s) override {
    k_->dropout_forward(x, y, m, n, p, s);
  }
  void dropout_backward(const float* m, const float* dy, float* dx, size_t n) override {
    k_->dropout_backward(m, dy, dx, n);
  }
  double softmax_xent_forward(const float* z, const int32_t* l, int n, int k, float* p, int64_t* c) override {
    return k_->softmax_xent_forward(z, l, n, k, p, c);
  }
  void softmax_xent_backward(const float* p, const int32_t* l, int n, int k, float s, float* dz) override {
    k_->softmax_xent_backward(p, l, n, k, s, dz);
  }
  void sgd_update(float* p, const float* g, float* m, size_t n, float lr, float mo, float wd) override {
    k_->sgd_update(p, g, m, n, lr, mo, wd);
  }

 private:
  std::unique_ptr<Backend> k_;
  KernelExec e_;
};

}  // namespace

std::unique_ptr<Backend> make_exec_backend(std::unique_ptr<Backend> inner, KernelExec exec) {
  return std::make_unique<ExecBackend>(std::move(inner), exec);
}

}  // namespace dtrain::test
