// layers/cpu/reference_norm.cpp — plain-loop LRN (across channels) and batch
// normalisation of the reference backend.
//
// LRN (Krizhevsky et al. 2012; formula and window in layers/backend.hpp):
//   S[c] = Σ_{c'∈win(c)} x[c']²,  D[c] = k + α/size · S[c],  y[c] = x[c] · D[c]^−β
//   ∂L/∂x[j] = dy[j] · D[j]^−β − (2αβ/size) · x[j] · Σ_{c : j∈win(c)} dy[c] · x[c] · D[c]^(−β−1)
// (the second sum is formed by scattering over win(c), so even sizes with their
// asymmetric window need no inverse-window arithmetic).
//
// Batch norm (Ioffe & Szegedy 2015), per channel over M = N·H·W values:
//   μ = Σx / M, σ² = Σ(x − μ)² / M (biased), x̂ = (x − μ)/√(σ² + ε), y = γ·x̂ + β
//   running_mean ← (1 − m)·running_mean + m·μ
//   running_var  ← (1 − m)·running_var  + m·σ²·M/(M − 1)      (torch)
//   dβ = Σ dy, dγ = Σ dy·x̂, dx = γ/(M·√(σ² + ε)) · (M·dy − dβ − x̂·dγ)
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/reference_kernels.hpp"

namespace dtrain::layers::reference {
namespace {

class RefLrn final : public LrnKernel {
 public:
  explicit RefLrn(const LrnDesc& d) : d_(d) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0, "lrn: empty shape");
    DT_CHECK(d.size > 0, "lrn: size must be positive, got ", d.size);
  }

  // x [N,C,H,W] → y [N,C,H,W]
  void forward(const float* x, float* y) override {
    std::vector<double> den(size_t(d_.c));
    for_each_column([&](size_t base, size_t stride) {
      denominators(x, base, stride, den);
      for (int c = 0; c < d_.c; ++c)
        y[base + c * stride] = float(x[base + c * stride] * std::pow(den[c], -double(d_.beta)));
    });
  }

  // dy [N,C,H,W] → dx [N,C,H,W] (overwritten)
  void backward(const float* x, const float* /*y*/, const float* dy, float* dx) override {
    std::vector<double> den(size_t(d_.c)), g(size_t(d_.c));
    const double beta = d_.beta, coef = 2.0 * double(d_.alpha) * beta / d_.size;
    for_each_column([&](size_t base, size_t stride) {
      denominators(x, base, stride, den);
      for (int c = 0; c < d_.c; ++c) g[c] = dy[base + c * stride] * std::pow(den[c], -beta);
      for (int c = 0; c < d_.c; ++c) {
        // y[c] depends on every x[c'] in win(c)
        const double t = coef * dy[base + c * stride] * x[base + c * stride] *
                         std::pow(den[c], -beta - 1.0);
        for (int cc = lo(c); cc <= hi(c); ++cc) g[cc] -= t * x[base + cc * stride];
      }
      for (int c = 0; c < d_.c; ++c) dx[base + c * stride] = float(g[c]);
    });
  }

 private:
  int lo(int c) const { return c - (d_.size - 1) / 2 < 0 ? 0 : c - (d_.size - 1) / 2; }
  int hi(int c) const { return c + d_.size / 2 >= d_.c ? d_.c - 1 : c + d_.size / 2; }

  // Calls f(base, stride) for every (n, h, w): the C values of that pixel are at
  // base + c·stride.
  template <typename F>
  void for_each_column(F f) const {
    const size_t plane = size_t(d_.h) * d_.w;
    for (int n = 0; n < d_.n; ++n)
      for (size_t p = 0; p < plane; ++p) f(size_t(n) * d_.c * plane + p, plane);
  }

  // den[c] = k + α/size · Σ_{c'∈win(c)} x[c']²
  void denominators(const float* x, size_t base, size_t stride, std::vector<double>& den) const {
    for (int c = 0; c < d_.c; ++c) {
      double s = 0.0;
      for (int cc = lo(c); cc <= hi(c); ++cc) {
        const double v = x[base + cc * stride];
        s += v * v;
      }
      den[c] = double(d_.k) + double(d_.alpha) / d_.size * s;
    }
  }

  LrnDesc d_;
};

class RefBatchNorm final : public BatchNormKernel {
 public:
  explicit RefBatchNorm(const BatchNormDesc& d) : d_(d) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0, "batch norm: empty shape");
    DT_CHECK(d.eps > 0.0f, "batch norm: eps must be positive");
  }

  // x [N,C,H,W], gamma/beta [C] → y [N,C,H,W]; running_mean/var [C] updated in
  // place (either may be nullptr: not updated). Saves μ and 1/√(σ² + ε) per channel.
  void forward_train(const float* x, const float* gamma, const float* beta, float* y,
                     float* running_mean, float* running_var) override {
    const size_t m = count();
    DT_CHECK(m > 1, "batch norm: training needs more than one value per channel (N·H·W = ", m, ")");
    mean_.assign(size_t(d_.c), 0.0);
    inv_std_.assign(size_t(d_.c), 0.0);
    for (int c = 0; c < d_.c; ++c) {
      double s = 0.0;
      for_channel(c, [&](size_t i) { s += x[i]; });
      const double mu = s / double(m);
      double v = 0.0;
      for_channel(c, [&](size_t i) { v += (x[i] - mu) * (x[i] - mu); });
      const double var = v / double(m);
      mean_[c] = mu;
      inv_std_[c] = 1.0 / std::sqrt(var + double(d_.eps));
      const double scale = double(gamma[c]) * inv_std_[c], shift = beta[c];
      for_channel(c, [&](size_t i) { y[i] = float((x[i] - mu) * scale + shift); });
      const double mom = d_.momentum;
      if (running_mean != nullptr)
        running_mean[c] = float((1.0 - mom) * running_mean[c] + mom * mu);
      if (running_var != nullptr)
        running_var[c] = float((1.0 - mom) * running_var[c] + mom * var * double(m) / double(m - 1));
    }
  }

  // y = γ·(x − running_mean)/√(running_var + ε) + β
  void forward_infer(const float* x, const float* gamma, const float* beta,
                     const float* running_mean, const float* running_var, float* y) override {
    for (int c = 0; c < d_.c; ++c) {
      const double scale = double(gamma[c]) / std::sqrt(double(running_var[c]) + double(d_.eps));
      const double mu = running_mean[c], shift = beta[c];
      for_channel(c, [&](size_t i) { y[i] = float((x[i] - mu) * scale + shift); });
    }
  }

  // dy [N,C,H,W] → dx [N,C,H,W], dgamma [C], dbeta [C] (each optional, overwritten)
  void backward(const float* x, const float* dy, const float* gamma, float* dx, float* dgamma,
                float* dbeta) override {
    DT_CHECK(mean_.size() == size_t(d_.c), "batch norm backward() called before forward_train()");
    const double m = double(count());
    for (int c = 0; c < d_.c; ++c) {
      const double mu = mean_[c], is = inv_std_[c];
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for_channel(c, [&](size_t i) {
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (x[i] - mu) * is;
      });
      if (dbeta != nullptr) dbeta[c] = float(sum_dy);
      if (dgamma != nullptr) dgamma[c] = float(sum_dy_xhat);
      if (dx != nullptr) {
        const double k = double(gamma[c]) * is / m;
        for_channel(c, [&](size_t i) {
          dx[i] = float(k * (m * dy[i] - sum_dy - (x[i] - mu) * is * sum_dy_xhat));
        });
      }
    }
  }

 private:
  size_t count() const { return size_t(d_.n) * d_.h * d_.w; }

  // Calls f(i) for every flat index i of channel c.
  template <typename F>
  void for_channel(int c, F f) const {
    const size_t plane = size_t(d_.h) * d_.w;
    for (int n = 0; n < d_.n; ++n) {
      const size_t base = (size_t(n) * d_.c + c) * plane;
      for (size_t p = 0; p < plane; ++p) f(base + p);
    }
  }

  BatchNormDesc d_;
  std::vector<double> mean_, inv_std_;  // [C], from the last forward_train()
};

}  // namespace

std::unique_ptr<LrnKernel> make_lrn(const LrnDesc& d) { return std::make_unique<RefLrn>(d); }
std::unique_ptr<BatchNormKernel> make_batch_norm(const BatchNormDesc& d) {
  return std::make_unique<RefBatchNorm>(d);
}

}  // namespace dtrain::layers::reference
