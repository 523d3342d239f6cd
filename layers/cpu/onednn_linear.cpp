// layers/cpu/onednn_linear.cpp — fully connected layer on OpenBLAS sgemm.
//
// y = x·Wᵀ + b with x [N, IN], W [OUT, IN] (torch layout), b [OUT], y [N, OUT],
// all row-major. Backward: dx = dy·W, dW = dyᵀ·x, db = Σ_n dy.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers::onednn {
namespace {

class LinearBlas final : public LinearKernel {
 public:
  explicit LinearBlas(const LinearDesc& d) : d_(d) {}

  // x [N,IN], w [OUT,IN], b [OUT] or nullptr → y [N,OUT]
  void forward(const float* x, const float* w, const float* b, float* y) override {
    const int n = d_.n, in = d_.in, out = d_.out;
    float beta = 0.0f;
    if (d_.bias && b != nullptr) {
      for (int i = 0; i < n; ++i) std::copy(b, b + out, y + static_cast<size_t>(i) * out);
      beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y,
                out);
  }

  // dy [N,OUT] → dx [N,IN] (nullptr: skipped), dw [OUT,IN], db [OUT]
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    const int n = d_.n, in = d_.in, out = d_.out;
    if (dx != nullptr)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                  0.0f, dx, in);
    if (dw != nullptr)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 0.0f,
                  dw, in);
    if (d_.bias && db != nullptr) {
      std::fill(db, db + out, 0.0f);
      for (int i = 0; i < n; ++i) {
        const float* row = dy + static_cast<size_t>(i) * out;
#pragma omp simd
        for (int o = 0; o < out; ++o) db[o] += row[o];
      }
    }
  }

 private:
  LinearDesc d_;
};

}  // namespace

std::unique_ptr<LinearKernel> make_linear(const LinearDesc& d) {
  return std::make_unique<LinearBlas>(d);
}

}  // namespace dtrain::layers::onednn
