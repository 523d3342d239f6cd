// layers/cpu/reference_conv.cpp — plain-loop convolution and linear (fully
// connected) kernels of the reference backend.
//
// Convolution is cross-correlation as in Caffe/torch/cuDNN:
//   y[n,k,oh,ow] = b[k] + Σ_{c∈group(k), i, j} x[n, c, oh·sh − ph + i, ow·sw − pw + j]
//                                               · w[k, c − c0(k), i, j]
// with zero padding, group(k) = the C/g input channels of k's group.
// Backward applies the same index map in the other direction; all sums are
// accumulated in double and written once (outputs are overwritten).
#include <cstddef>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/reference_kernels.hpp"

namespace dtrain::layers::reference {
namespace {

class RefConv final : public ConvKernel {
 public:
  explicit RefConv(const ConvDesc& d) : d_(d) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0 && d.k > 0, "conv: empty shape");
    DT_CHECK(d.kh > 0 && d.kw > 0 && d.stride_h > 0 && d.stride_w > 0, "conv: bad kernel/stride");
    DT_CHECK(d.pad_h >= 0 && d.pad_w >= 0, "conv: negative padding");
    DT_CHECK(d.groups > 0 && d.c % d.groups == 0 && d.k % d.groups == 0, "conv: C=", d.c,
             " and K=", d.k, " must be divisible by groups=", d.groups);
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "conv: kernel larger than padded input");
  }

  // x [N,C,H,W], w [K,C/g,KH,KW], b [K] or nullptr → y [N,K,OH,OW]
  void forward(const float* x, const float* w, const float* b, float* y) override {
    const int oh_n = d_.out_h(), ow_n = d_.out_w();
    const int cg = d_.c / d_.groups, kg = d_.k / d_.groups;
    for (int n = 0; n < d_.n; ++n)
      for (int k = 0; k < d_.k; ++k) {
        const int c0 = (k / kg) * cg;
        for (int oh = 0; oh < oh_n; ++oh)
          for (int ow = 0; ow < ow_n; ++ow) {
            double acc = (d_.bias && b != nullptr) ? b[k] : 0.0;
            for (int c = 0; c < cg; ++c)
              for (int i = 0; i < d_.kh; ++i) {
                const int ih = oh * d_.stride_h - d_.pad_h + i;
                if (ih < 0 || ih >= d_.h) continue;
                for (int j = 0; j < d_.kw; ++j) {
                  const int iw = ow * d_.stride_w - d_.pad_w + j;
                  if (iw < 0 || iw >= d_.w) continue;
                  acc += double(x[x_at(n, c0 + c, ih, iw)]) * w[w_at(k, c, i, j)];
                }
              }
            y[((size_t(n) * d_.k + k) * oh_n + oh) * ow_n + ow] = float(acc);
          }
      }
  }

  // dy [N,K,OH,OW] → dx [N,C,H,W] (optional), dw [K,C/g,KH,KW] (optional), db [K] (optional)
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    const int oh_n = d_.out_h(), ow_n = d_.out_w();
    const int cg = d_.c / d_.groups, kg = d_.k / d_.groups;
    std::vector<double> gx(dx ? size_t(d_.n) * d_.c * d_.h * d_.w : 0, 0.0);
    std::vector<double> gw(dw ? size_t(d_.k) * cg * d_.kh * d_.kw : 0, 0.0);
    std::vector<double> gb(size_t(d_.k), 0.0);
    for (int n = 0; n < d_.n; ++n)
      for (int k = 0; k < d_.k; ++k) {
        const int c0 = (k / kg) * cg;
        for (int oh = 0; oh < oh_n; ++oh)
          for (int ow = 0; ow < ow_n; ++ow) {
            const double g = dy[((size_t(n) * d_.k + k) * oh_n + oh) * ow_n + ow];
            gb[k] += g;
            for (int c = 0; c < cg; ++c)
              for (int i = 0; i < d_.kh; ++i) {
                const int ih = oh * d_.stride_h - d_.pad_h + i;
                if (ih < 0 || ih >= d_.h) continue;
                for (int j = 0; j < d_.kw; ++j) {
                  const int iw = ow * d_.stride_w - d_.pad_w + j;
                  if (iw < 0 || iw >= d_.w) continue;
                  const size_t xi = x_at(n, c0 + c, ih, iw), wi = w_at(k, c, i, j);
                  if (dx) gx[xi] += g * w[wi];
                  if (dw) gw[wi] += g * x[xi];
                }
              }
          }
      }
    for (size_t i = 0; i < gx.size(); ++i) dx[i] = float(gx[i]);
    for (size_t i = 0; i < gw.size(); ++i) dw[i] = float(gw[i]);
    if (db != nullptr && d_.bias)
      for (int k = 0; k < d_.k; ++k) db[k] = float(gb[k]);
  }

 private:
  size_t x_at(int n, int c, int h, int w) const {
    return ((size_t(n) * d_.c + c) * d_.h + h) * d_.w + w;
  }
  size_t w_at(int k, int c, int i, int j) const {
    return ((size_t(k) * (d_.c / d_.groups) + c) * d_.kh + i) * d_.kw + j;
  }
  ConvDesc d_;
};

class RefLinear final : public LinearKernel {
 public:
  explicit RefLinear(const LinearDesc& d) : d_(d) {
    DT_CHECK(d.n > 0 && d.in > 0 && d.out > 0, "linear: empty shape n=", d.n, " in=", d.in,
             " out=", d.out);
  }

  // x [N,IN], w [OUT,IN], b [OUT] or nullptr → y [N,OUT] = x·Wᵀ + b
  void forward(const float* x, const float* w, const float* b, float* y) override {
    for (int n = 0; n < d_.n; ++n)
      for (int o = 0; o < d_.out; ++o) {
        double acc = (d_.bias && b != nullptr) ? b[o] : 0.0;
        for (int i = 0; i < d_.in; ++i)
          acc += double(x[size_t(n) * d_.in + i]) * w[size_t(o) * d_.in + i];
        y[size_t(n) * d_.out + o] = float(acc);
      }
  }

  // dy [N,OUT] → dx [N,IN] = dy·W, dw [OUT,IN] = dyᵀ·x, db [OUT] = Σ_n dy (each optional)
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    if (dx != nullptr)
      for (int n = 0; n < d_.n; ++n)
        for (int i = 0; i < d_.in; ++i) {
          double acc = 0.0;
          for (int o = 0; o < d_.out; ++o)
            acc += double(dy[size_t(n) * d_.out + o]) * w[size_t(o) * d_.in + i];
          dx[size_t(n) * d_.in + i] = float(acc);
        }
    if (dw != nullptr)
      for (int o = 0; o < d_.out; ++o)
        for (int i = 0; i < d_.in; ++i) {
          double acc = 0.0;
          for (int n = 0; n < d_.n; ++n)
            acc += double(dy[size_t(n) * d_.out + o]) * x[size_t(n) * d_.in + i];
          dw[size_t(o) * d_.in + i] = float(acc);
        }
    if (db != nullptr && d_.bias)
      for (int o = 0; o < d_.out; ++o) {
        double acc = 0.0;
        for (int n = 0; n < d_.n; ++n) acc += dy[size_t(n) * d_.out + o];
        db[o] = float(acc);
      }
  }

 private:
  LinearDesc d_;
};

}  // namespace

std::unique_ptr<ConvKernel> make_conv(const ConvDesc& d) { return std::make_unique<RefConv>(d); }
std::unique_ptr<LinearKernel> make_linear(const LinearDesc& d) {
  return std::make_unique<RefLinear>(d);
}

}  // namespace dtrain::layers::reference
