// layers/cpu/reference_pool.cpp — plain-loop max and average pooling of the
// reference backend (floor-mode output size, symmetric padding).
//
// Max: padded positions count as −inf, so they never win; the window's first
// maximum (lowest h, then lowest w) is the argmax, saved by forward() as an
// index into the input plane and used by backward() to route dy.
// Average: the window sum (padding contributes zeros) divided by KH·KW when
// avg_include_pad (torch's count_include_pad=True; in floor mode a window never
// reaches past the padded border), else by the number of real input elements in
// the window (count_include_pad=False).
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/reference_kernels.hpp"

namespace dtrain::layers::reference {
namespace {

class RefPool final : public PoolKernel {
 public:
  explicit RefPool(const PoolDesc& d) : d_(d) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0, "pool: empty shape");
    DT_CHECK(d.kh > 0 && d.kw > 0 && d.stride_h > 0 && d.stride_w > 0, "pool: bad kernel/stride");
    // torch's rule; it also guarantees that every window holds a real element.
    DT_CHECK(d.pad_h >= 0 && d.pad_w >= 0 && 2 * d.pad_h <= d.kh && 2 * d.pad_w <= d.kw,
             "pool: padding must be at most half the kernel (pad ", d.pad_h, "x", d.pad_w,
             ", kernel ", d.kh, "x", d.kw, ")");
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "pool: kernel larger than padded input");
  }

  // x [N,C,H,W] → y [N,C,OH,OW]; max pooling saves argmax [N,C,OH,OW]
  void forward(const float* x, float* y) override {
    const int oh_n = d_.out_h(), ow_n = d_.out_w();
    const size_t planes = size_t(d_.n) * d_.c, in_plane = size_t(d_.h) * d_.w;
    if (d_.kind == PoolKind::max) argmax_.assign(planes * oh_n * ow_n, -1);
    for (size_t p = 0; p < planes; ++p) {
      const float* xp = x + p * in_plane;
      for (int oh = 0; oh < oh_n; ++oh)
        for (int ow = 0; ow < ow_n; ++ow) {
          const size_t o = (p * oh_n + oh) * ow_n + ow;
          const int h0 = oh * d_.stride_h - d_.pad_h, w0 = ow * d_.stride_w - d_.pad_w;
          if (d_.kind == PoolKind::max) {
            float best = -std::numeric_limits<float>::infinity();
            int best_i = -1;
            for (int ih = h0; ih < h0 + d_.kh; ++ih)
              for (int iw = w0; iw < w0 + d_.kw; ++iw) {
                if (ih < 0 || ih >= d_.h || iw < 0 || iw >= d_.w) continue;
                const int i = ih * d_.w + iw;
                // strict '>' keeps the first maximum; the first real element is always
                // taken, and a NaN wins (propagates) as in torch
                if (best_i < 0 || xp[i] > best || (std::isnan(xp[i]) && !std::isnan(best)))
                  best = xp[i], best_i = i;
              }
            y[o] = best;
            argmax_[o] = best_i;
          } else {
            double sum = 0.0;
            int real = 0;
            for (int ih = h0; ih < h0 + d_.kh; ++ih)
              for (int iw = w0; iw < w0 + d_.kw; ++iw) {
                if (ih < 0 || ih >= d_.h || iw < 0 || iw >= d_.w) continue;
                sum += xp[ih * d_.w + iw];
                ++real;
              }
            y[o] = float(sum / divisor(real));
          }
        }
    }
  }

  // dy [N,C,OH,OW] → dx [N,C,H,W] (overwritten)
  void backward(const float* /*x*/, const float* /*y*/, const float* dy, float* dx) override {
    const int oh_n = d_.out_h(), ow_n = d_.out_w();
    const size_t planes = size_t(d_.n) * d_.c, in_plane = size_t(d_.h) * d_.w;
    std::vector<double> g(planes * in_plane, 0.0);
    if (d_.kind == PoolKind::max) {
      DT_CHECK(argmax_.size() == planes * oh_n * ow_n,
               "max pool backward() called before forward()");
      for (size_t p = 0; p < planes; ++p)
        for (size_t o = 0; o < size_t(oh_n) * ow_n; ++o)
          g[p * in_plane + argmax_[p * oh_n * ow_n + o]] += dy[p * oh_n * ow_n + o];
    } else {
      for (size_t p = 0; p < planes; ++p)
        for (int oh = 0; oh < oh_n; ++oh)
          for (int ow = 0; ow < ow_n; ++ow) {
            const int h0 = oh * d_.stride_h - d_.pad_h, w0 = ow * d_.stride_w - d_.pad_w;
            const int hb = h0 < 0 ? 0 : h0, wb = w0 < 0 ? 0 : w0;
            const int he = h0 + d_.kh > d_.h ? d_.h : h0 + d_.kh;
            const int we = w0 + d_.kw > d_.w ? d_.w : w0 + d_.kw;
            const double share =
                double(dy[(p * oh_n + oh) * ow_n + ow]) / divisor((he - hb) * (we - wb));
            for (int ih = hb; ih < he; ++ih)
              for (int iw = wb; iw < we; ++iw) g[p * in_plane + ih * d_.w + iw] += share;
          }
    }
    for (size_t i = 0; i < g.size(); ++i) dx[i] = float(g[i]);
  }

 private:
  // Average divisor for a window holding `real` input elements.
  double divisor(int real) const {
    return d_.avg_include_pad ? double(d_.kh) * d_.kw : double(real);
  }

  PoolDesc d_;
  std::vector<int> argmax_;  // per output: index into its input plane (h·W + w)
};

}  // namespace

std::unique_ptr<PoolKernel> make_pool(const PoolDesc& d) { return std::make_unique<RefPool>(d); }

}  // namespace dtrain::layers::reference
