// layers/cuda/cuda_linear.cpp — the linear layer through cuBLAS, in f32
// (cublasSgemm; TF32 tensor cores with CudaOptions::tf32, the handle's math
// mode) or bf16 (cublasGemmEx on bf16 copies, f32 accumulation and output).
//
// Row-major through column-major cuBLAS (a row-major [R, C] matrix is the
// column-major [C, R] one, its transpose):
//   y[N,OUT]   = x·Wᵀ:  yᵀ  = op(W_cm)ᵀ·xᵀ → gemm(T, N, OUT, N, IN, w, IN, x, IN, y, OUT)
//   dx[N,IN]   = dy·W:  dxᵀ = Wᵀ·dyᵀ       → gemm(N, N, IN, N, OUT, w, IN, dy, OUT, dx, IN)
//   dw[OUT,IN] = dyᵀ·x: dwᵀ = xᵀ·dy       → gemm(N, T, IN, OUT, N, x, IN, dy, OUT, dw, IN)
//   b and db with small kernels (cuda_kernels.cu), in f32 in both modes.
//
// bf16 (KernelExec::precision): the operands A and B of each product are bf16
// (CUDA_R_16BF) and C is the caller's f32 buffer (CUDA_R_32F) with
// CUBLAS_COMPUTE_32F, so products accumulate in f32 and y, dx, dw are written
// in f32 directly (no rounding of the outputs, unlike the bf16 convolutions).
// Per call x and dy are cast into the context's shared bf16 scratch; W into
// the kernel's own copy (every forward; backward reuses forward's copy for the
// same pointer, Bf16Weights). cuBLAS picks tensor-core kernels for these types
// itself (CUBLAS_GEMM_DEFAULT).
#include <memory>

#include "layers/cuda/cuda_common.hpp"
#include "layers/cuda/cuda_kernels.hpp"

namespace dtrain::layers::cuda {
namespace {

class CudaLinear final : public LinearKernel {
 public:
  CudaLinear(ContextPtr ctx, const LinearDesc& d)
      : ctx_(std::move(ctx)), d_(d), bf16_(d.exec.precision == DType::bf16) {
    DT_CHECK(d.n > 0 && d.in > 0 && d.out > 0, "linear: empty shape n=", d.n, " in=", d.in,
             " out=", d.out);
    if (bf16_) w16_ = std::make_unique<Bf16Weights>(size_t(d.out) * d.in);
  }

  // x [N,IN], w [OUT,IN], b [OUT] or nullptr → y [N,OUT] (all f32)
  void forward(const float* x, const float* w, const float* b, float* y) override {
    const void *xp = x, *wp = w;
    if (bf16_) {
      const Context::Bf16Parts s = ctx_->bf16_scratch({size_t(d_.n) * d_.in});
      xp = to_bf16(x, s.p[0], size_t(d_.n) * d_.in);
      wp = w16_->cast(w);
    }
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, d_.out, d_.n, d_.in, wp, d_.in, xp, d_.in, y, d_.out);
    if (d_.bias && b != nullptr) add_row_bias(y, b, d_.n, d_.out);
  }

  // dy [N,OUT] → dx [N,IN], dw [OUT,IN], db [OUT] (each optional, overwritten; all f32)
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    const void *xp = x, *wp = w, *dyp = dy;
    if (bf16_ && (dx != nullptr || dw != nullptr)) {
      const size_t xn = size_t(d_.n) * d_.in, yn = size_t(d_.n) * d_.out;
      const Context::Bf16Parts s = ctx_->bf16_scratch({yn, dw != nullptr ? xn : 0});
      dyp = to_bf16(dy, s.p[0], yn);
      if (dw != nullptr) xp = to_bf16(x, s.p[1], xn);
      if (dx != nullptr) wp = w16_->of(w);
    }
    if (dx != nullptr) gemm(CUBLAS_OP_N, CUBLAS_OP_N, d_.in, d_.n, d_.out, wp, d_.in, dyp, d_.out, dx, d_.in);
    if (dw != nullptr) gemm(CUBLAS_OP_N, CUBLAS_OP_T, d_.in, d_.out, d_.n, xp, d_.in, dyp, d_.out, dw, d_.in);
    if (db != nullptr && d_.bias) row_bias_grad(dy, db, d_.n, d_.out);
  }

 private:
  // C [m, n] (column-major, f32) = op(A)·op(B), A and B f32 or (bf16 mode) bf16.
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda,
            const void* b, int ldb, float* c, int ldc) {
    if (bf16_)
      DT_CHECK_CUBLAS(cublasGemmEx(ctx_->cublas(), ta, tb, m, n, k, &kOne, a, CUDA_R_16BF, lda, b, CUDA_R_16BF,
                                   ldb, &kZero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
      DT_CHECK_CUBLAS(cublasSgemm(ctx_->cublas(), ta, tb, m, n, k, &kOne, static_cast<const float*>(a), lda,
                                  static_cast<const float*>(b), ldb, &kZero, c, ldc));
  }

  ContextPtr ctx_;
  LinearDesc d_;
  bool bf16_;
  std::unique_ptr<Bf16Weights> w16_;  // bf16 mode: the bf16 copy of W
};

}  // namespace

std::unique_ptr<LinearKernel> make_linear(ContextPtr ctx, const LinearDesc& d) {
  return std::make_unique<CudaLinear>(std::move(ctx), d);
}

}  // namespace dtrain::layers::cuda
