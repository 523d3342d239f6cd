// layers/cuda/cuda_norm_pool.cpp — pooling and batch normalisation through
// cuDNN, LRN through the custom kernel of cuda_kernels.cu.
//
// Pooling: CUDNN_POOLING_MAX_DETERMINISTIC / AVERAGE_COUNT_{INCLUDE,EXCLUDE}_PADDING,
// NaN propagated, floor-mode output size (checked against PoolDesc). Max
// pooling backward recomputes the argmax from x and y; on exact ties inside a
// window cuDNN may route dy to another of the tied elements than the
// reference's first maximum (the values agree; the [cuda] tests use tie-free data).
//
// Batch norm: CUDNN_BATCHNORM_SPATIAL, exponentialAverageFactor = momentum, so
// running = (1 − m)·running + m·batch as in torch; cuDNN's running variance is the
// unbiased (M − 1) one, as the contract asks (torch relies on the same; the
// [cuda] test compares running_var with the reference). The normalisation uses
// the biased variance, and cuDNN saves mean and 1/√(σ² + ε) for backward.
// Optional pointers the contract allows to be nullptr (running stats, dx,
// dgamma, dbeta) are given scratch storage, since cuDNN computes them together.
#include "layers/cuda/cuda_common.hpp"
#include "layers/cuda/cuda_kernels.hpp"

namespace dtrain::layers::cuda {
namespace {

class CudaPool final : public PoolKernel {
 public:
  CudaPool(ContextPtr ctx, const PoolDesc& d)
      : ctx_(std::move(ctx)), x_(d.n, d.c, d.h, d.w), y_(d.n, d.c, d.out_h(), d.out_w()) {
    DT_CHECK(d.kh > 0 && d.kw > 0 && d.stride_h > 0 && d.stride_w > 0, "pool: bad kernel/stride");
    DT_CHECK(d.pad_h >= 0 && d.pad_w >= 0 && 2 * d.pad_h <= d.kh && 2 * d.pad_w <= d.kw,
             "pool: padding must be at most half the kernel (pad ", d.pad_h, "x", d.pad_w,
             ", kernel ", d.kh, "x", d.kw, ")");
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "pool: kernel larger than padded input");
    const cudnnPoolingMode_t mode =
        d.kind == PoolKind::max ? CUDNN_POOLING_MAX_DETERMINISTIC
        : d.avg_include_pad     ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    DT_CHECK_CUDNN(cudnnCreatePoolingDescriptor(&pool_));
    DT_CHECK_CUDNN(cudnnSetPooling2dDescriptor(pool_, mode, CUDNN_PROPAGATE_NAN, d.kh, d.kw,
                                               d.pad_h, d.pad_w, d.stride_h, d.stride_w));
    int n = 0, c = 0, h = 0, w = 0;
    DT_CHECK_CUDNN(cudnnGetPooling2dForwardOutputDim(pool_, x_.d, &n, &c, &h, &w));
    DT_CHECK(h == d.out_h() && w == d.out_w(), "pool: cuDNN's output ", h, "x", w,
             " differs from the contract's ", d.out_h(), "x", d.out_w());
  }
  ~CudaPool() override { cudnnDestroyPoolingDescriptor(pool_); }

  // x [N,C,H,W] → y [N,C,OH,OW]
  void forward(const float* x, float* y) override {
    DT_CHECK_CUDNN(cudnnPoolingForward(ctx_->cudnn(), pool_, &kOne, x_.d, x, &kZero, y_.d, y));
  }
  // dy [N,C,OH,OW] → dx [N,C,H,W] (overwritten)
  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    DT_CHECK_CUDNN(cudnnPoolingBackward(ctx_->cudnn(), pool_, &kOne, y_.d, y, y_.d, dy, x_.d, x,
                                        &kZero, x_.d, dx));
  }

 private:
  ContextPtr ctx_;
  TensorDesc x_, y_;
  cudnnPoolingDescriptor_t pool_ = nullptr;
};

class CudaLrn final : public LrnKernel {
 public:
  CudaLrn(ContextPtr ctx, const LrnDesc& d) : ctx_(std::move(ctx)), d_(d) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0, "lrn: empty shape");
    DT_CHECK(d.size > 0, "lrn: size must be positive, got ", d.size);
  }
  void forward(const float* x, float* y) override {
    lrn_forward(x, y, d_.n, d_.c, d_.h * d_.w, d_.size, d_.alpha, d_.beta, d_.k);
  }
  void backward(const float* x, const float* /*y*/, const float* dy, float* dx) override {
    lrn_backward(x, dy, dx, d_.n, d_.c, d_.h * d_.w, d_.size, d_.alpha, d_.beta, d_.k);
  }

 private:
  ContextPtr ctx_;
  LrnDesc d_;
};

class CudaBatchNorm final : public BatchNormKernel {
 public:
  CudaBatchNorm(ContextPtr ctx, const BatchNormDesc& d)
      : ctx_(std::move(ctx)), d_(d), x_(d.n, d.c, d.h, d.w) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0, "batch norm: empty shape");
    DT_CHECK(d.eps > 0.0f && double(d.eps) >= CUDNN_BN_MIN_EPSILON,
             "batch norm: eps must be positive");
    DT_CHECK_CUDNN(cudnnCreateTensorDescriptor(&bn_));
    DT_CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(bn_, x_.d, CUDNN_BATCHNORM_SPATIAL));
    // saved mean, saved 1/σ, two running-stat scratch, dgamma / dbeta scratch: [C] each
    per_channel_ = device_alloc(6 * size_t(d.c) * sizeof(float));
  }
  ~CudaBatchNorm() override { cudnnDestroyTensorDescriptor(bn_); }

  void forward_train(const float* x, const float* gamma, const float* beta, float* y,
                     float* running_mean, float* running_var) override {
    const size_t m = size_t(d_.n) * d_.h * d_.w;
    DT_CHECK(m > 1, "batch norm: training needs more than one value per channel (N·H·W = ", m, ")");
    if ((running_mean == nullptr) != (running_var == nullptr)) {  // cuDNN: both or neither
      if (running_mean == nullptr) running_mean = slot(2);
      if (running_var == nullptr) running_var = slot(3);
    }
    DT_CHECK_CUDNN(cudnnBatchNormalizationForwardTraining(
        ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.d, x, x_.d, y, bn_, gamma, beta,
        double(d_.momentum), running_mean, running_var, double(d_.eps), slot(0), slot(1)));
    trained_ = true;
  }

  void forward_infer(const float* x, const float* gamma, const float* beta,
                     const float* running_mean, const float* running_var, float* y) override {
    DT_CHECK_CUDNN(cudnnBatchNormalizationForwardInference(
        ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.d, x, x_.d, y, bn_, gamma, beta,
        running_mean, running_var, double(d_.eps)));
  }

  void backward(const float* x, const float* dy, const float* gamma, float* dx, float* dgamma,
                float* dbeta) override {
    DT_CHECK(trained_, "batch norm backward() called before forward_train()");
    if (dx == nullptr) {
      if (!dx_scratch_) dx_scratch_ = device_alloc(size_t(d_.n) * d_.c * d_.h * d_.w * sizeof(float));
      dx = dx_scratch_.get();
    }
    if (dgamma == nullptr) dgamma = slot(4);
    if (dbeta == nullptr) dbeta = slot(5);
    DT_CHECK_CUDNN(cudnnBatchNormalizationBackward(
        ctx_->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_.d, x, x_.d, dy,
        x_.d, dx, bn_, gamma, dgamma, dbeta, double(d_.eps), slot(0), slot(1)));
  }

 private:
  float* slot(int i) { return per_channel_.get() + size_t(i) * d_.c; }

  ContextPtr ctx_;
  BatchNormDesc d_;
  TensorDesc x_;
  cudnnTensorDescriptor_t bn_ = nullptr;
  std::shared_ptr<float> per_channel_, dx_scratch_;
  bool trained_ = false;
};

}  // namespace

std::unique_ptr<PoolKernel> make_pool(ContextPtr ctx, const PoolDesc& d) {
  return std::make_unique<CudaPool>(std::move(ctx), d);
}
std::unique_ptr<LrnKernel> make_lrn(ContextPtr ctx, const LrnDesc& d) {
  return std::make_unique<CudaLrn>(std::move(ctx), d);
}
std::unique_ptr<BatchNormKernel> make_batch_norm(ContextPtr ctx, const BatchNormDesc& d) {
  return std::make_unique<CudaBatchNorm>(std::move(ctx), d);
}

}  // namespace dtrain::layers::cuda
