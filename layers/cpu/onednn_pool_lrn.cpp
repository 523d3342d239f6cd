// layers/cpu/onednn_pool_lrn.cpp — max/avg pooling and cross-channel LRN on
// oneDNN.
//
// Pooling runs on plain NCHW (oneDNN's JIT pooling handles it; reordering to
// nChw16c and back cost more than it saved). Max pooling keeps the forward
// workspace (argmax) for backward.
//
// LRN on plain NCHW has only oneDNN's reference backward (~500 ms for AlexNet's
// [16, 96, 55, 55] against ~20 ms blocked, 2 threads), so LRN runs in the first
// channel-blocked layout (nChw16c, else nChw8c) whose backward is a JIT kernel,
// with x/y/dy/dx reordered once per call into buffers allocated once.
//
// oneDNN centres its window, [c − (size−1)/2, c + (size−1)/2], which is the
// contract's [c − (size−1)/2, c + size/2] only for odd sizes; even sizes run
// on plain OpenMP loops over NCHW instead (LrnLoops), and so do the shapes
// for which oneDNN has no JIT kernel (its lrn_ref is single-pass scalar code).
//
// Both backward passes need the last forward's workspace: when backward() is
// given another x than the last forward() (or none ran), the forward is
// recomputed into a scratch output first.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers::onednn {
namespace {

using dnnl::memory;

bool is_reference_impl(const char* impl) { return std::string(impl).find("ref") != std::string::npos; }

class PoolOneDnn final : public PoolKernel {
 public:
  PoolOneDnn(CtxPtr ctx, const PoolDesc& d) : ctx_(std::move(ctx)), d_(d) {
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "pool: empty output for input ", d.h, "x", d.w);
    const auto& eng = ctx_->eng;
    auto src = plain_md({d.n, d.c, d.h, d.w}, tag::nchw);
    auto dst = plain_md({d.n, d.c, d.out_h(), d.out_w()}, tag::nchw);
    // Floor mode: the last window never reaches past the left padding's width,
    // so right padding ≤ left padding and include-pad divides by KH·KW.
    memory::dims pad_r{std::max(0, (d.out_h() - 1) * d.stride_h + d.kh - d.h - d.pad_h),
                       std::max(0, (d.out_w() - 1) * d.stride_w + d.kw - d.w - d.pad_w)};
    auto alg = d.kind == PoolKind::max  ? dnnl::algorithm::pooling_max
               : d.avg_include_pad     ? dnnl::algorithm::pooling_avg_include_padding
                                       : dnnl::algorithm::pooling_avg_exclude_padding;
    memory::dims strides{d.stride_h, d.stride_w}, kernel{d.kh, d.kw}, pad_l{d.pad_h, d.pad_w};
    fwd_pd_ = {{dnnl::prop_kind::forward_training, alg, src, dst, strides, kernel, pad_l, pad_r},
               eng};
    fwd_ = dnnl::pooling_forward(fwd_pd_);
    bwd_pd_ = {{alg, src, dst, strides, kernel, pad_l, pad_r}, eng, fwd_pd_};
    bwd_ = dnnl::pooling_backward(bwd_pd_);
    x_ = user_memory(src, eng);
    y_ = user_memory(dst, eng);
    dy_ = user_memory(dst, eng);
    dx_ = user_memory(src, eng);
    has_ws_ = fwd_pd_.workspace_desc().get_size() > 0;
    if (has_ws_) ws_ = memory(fwd_pd_.workspace_desc(), eng);
  }

  // x [N,C,H,W] → y [N,C,OH,OW]
  void forward(const float* x, float* y) override {
    run_forward(x, y);
    ctx_->strm.wait();
  }

  // dy [N,C,OH,OW] → dx [N,C,H,W]
  void backward(const float* x, const float* /*y*/, const float* dy, float* dx) override {
    auto& s = ctx_->strm;
    if (has_ws_ && x != fwd_x_) {
      if (y_scratch_.empty()) y_scratch_.resize(y_.get_desc().get_size() / sizeof(float));
      run_forward(x, y_scratch_.data());
    }
    dy_.set_data_handle(handle(dy));
    dx_.set_data_handle(dx);
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_SRC, dx_}};
    if (has_ws_) args.emplace(DNNL_ARG_WORKSPACE, ws_);
    bwd_.execute(s, args);
    s.wait();
  }

 private:
  void run_forward(const float* x, float* y) {
    x_.set_data_handle(handle(x));
    y_.set_data_handle(y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}};
    if (has_ws_) args.emplace(DNNL_ARG_WORKSPACE, ws_);
    fwd_.execute(ctx_->strm, args);
    fwd_x_ = x;
  }

  CtxPtr ctx_;
  PoolDesc d_;
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward::primitive_desc bwd_pd_;
  dnnl::pooling_backward bwd_;
  memory x_, y_, dy_, dx_, ws_;
  bool has_ws_ = false;
  const float* fwd_x_ = nullptr;  // the input the workspace belongs to
  std::vector<float> y_scratch_;
};

class LrnOneDnn final : public LrnKernel {
 public:
  LrnOneDnn(CtxPtr ctx, const LrnDesc& d) : ctx_(std::move(ctx)), d_(d) {
    const auto& eng = ctx_->eng;
    memory::dims dims{d.n, d.c, d.h, d.w};
    auto user = plain_md(dims, tag::nchw);
    auto alg = dnnl::algorithm::lrn_across_channels;
    for (tag t : {tag::nChw16c, tag::nChw8c, tag::nchw}) {
      auto md = plain_md(dims, t);
      fwd_pd_ = {{dnnl::prop_kind::forward_training, alg, md, d.size, d.alpha, d.beta, d.k}, eng};
      bwd_pd_ = {{alg, md, md, d.size, d.alpha, d.beta, d.k}, eng, fwd_pd_};
      jit_ = !is_reference_impl(bwd_pd_.impl_info_str()) &&
             !is_reference_impl(fwd_pd_.impl_info_str());
      if (jit_) break;
    }
    fwd_ = dnnl::lrn_forward(fwd_pd_);
    bwd_ = dnnl::lrn_backward(bwd_pd_);
    x_ = Port(user, fwd_pd_.src_desc(), *ctx_, true);
    y_ = Port(user, fwd_pd_.dst_desc(), *ctx_, false);
    dy_ = Port(user, bwd_pd_.diff_dst_desc(), *ctx_, true);
    dx_ = Port(user, bwd_pd_.diff_src_desc(), *ctx_, false);
    has_ws_ = fwd_pd_.workspace_desc().get_size() > 0;
    if (has_ws_) ws_ = memory(fwd_pd_.workspace_desc(), eng);
  }

  // false: oneDNN has only its reference kernels for this shape.
  bool jit() const { return jit_; }

  // x [N,C,H,W] → y [N,C,H,W]
  void forward(const float* x, float* y) override {
    auto& s = ctx_->strm;
    run_forward(x_.in(x, s), y_.out(y));
    y_.finish(s);
    s.wait();
    fwd_x_ = x;
  }

  // dy [N,C,H,W] → dx [N,C,H,W]
  void backward(const float* x, const float* /*y*/, const float* dy, float* dx) override {
    auto& s = ctx_->strm;
    if (x != fwd_x_) {  // recompute the workspace (and the blocked x) for this x
      if (!y_scratch_) y_scratch_ = memory(fwd_pd_.dst_desc(), ctx_->eng);
      run_forward(x_.in(x, s), y_scratch_);
      fwd_x_ = x;
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, x_.prim()}, {DNNL_ARG_DIFF_DST, dy_.in(dy, s)}, {DNNL_ARG_DIFF_SRC, dx_.out(dx)}};
    if (has_ws_) args.emplace(DNNL_ARG_WORKSPACE, ws_);
    bwd_.execute(s, args);
    dx_.finish(s);
    s.wait();
  }

 private:
  void run_forward(memory& x, memory& y) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}};
    if (has_ws_) args.emplace(DNNL_ARG_WORKSPACE, ws_);
    fwd_.execute(ctx_->strm, args);
  }

  CtxPtr ctx_;
  LrnDesc d_;
  dnnl::lrn_forward::primitive_desc fwd_pd_;
  dnnl::lrn_forward fwd_;
  dnnl::lrn_backward::primitive_desc bwd_pd_;
  dnnl::lrn_backward bwd_;
  Port x_, y_, dy_, dx_;
  memory ws_, y_scratch_;
  bool has_ws_ = false, jit_ = false;
  const float* fwd_x_ = nullptr;  // the input x_/ws_ belong to
};

// LRN for any window size on plain loops: per image, the window sums run
// along channels with whole H·W planes as the vectorised inner loop.
class LrnLoops final : public LrnKernel {
 public:
  explicit LrnLoops(const LrnDesc& d)
      : d_(d), plane_(size_t(d.h) * d.w), scale_(size_t(d.n) * d.c * plane_), t_(scale_.size()) {}

  // x [N,C,H,W] → y [N,C,H,W]
  void forward(const float* x, float* y) override {
    scales(x);
    const ptrdiff_t total = static_cast<ptrdiff_t>(scale_.size());
    const float* s = scale_.data();
    const float nb = -d_.beta;
#pragma omp parallel for simd
    for (ptrdiff_t i = 0; i < total; ++i) y[i] = x[i] * std::pow(s[i], nb);
  }

  // dx[c'] = dy[c']·s[c']^−β − 2αβ/size · x[c'] · Σ_{c: c'∈win(c)} dy[c]·x[c]·s[c]^(−β−1)
  void backward(const float* x, const float* /*y*/, const float* dy, float* dx) override {
    scales(x);
    const ptrdiff_t total = static_cast<ptrdiff_t>(scale_.size());
    const float* s = scale_.data();
    float* t = t_.data();
    const float nb1 = -d_.beta - 1.0f, nb = -d_.beta;
    const float coef = 2.0f * d_.alpha * d_.beta / d_.size;
#pragma omp parallel for simd
    for (ptrdiff_t i = 0; i < total; ++i) t[i] = dy[i] * x[i] * std::pow(s[i], nb1);
    const int c_n = d_.c;
#pragma omp parallel for collapse(2)
    for (int n = 0; n < d_.n; ++n)
      for (int cp = 0; cp < c_n; ++cp) {
        const size_t at = (size_t(n) * c_n + cp) * plane_;
        // c' ∈ win(c) ⇔ c' − size/2 ≤ c ≤ c' + (size−1)/2
        const int lo = std::max(0, cp - d_.size / 2), hi = std::min(c_n - 1, cp + (d_.size - 1) / 2);
        for (size_t p = 0; p < plane_; ++p) dx[at + p] = 0.0f;
        for (int c = lo; c <= hi; ++c) {
          const float* tc = t + (size_t(n) * c_n + c) * plane_;
#pragma omp simd
          for (size_t p = 0; p < plane_; ++p) dx[at + p] += tc[p];
        }
#pragma omp simd
        for (size_t p = 0; p < plane_; ++p)
          dx[at + p] = dy[at + p] * std::pow(s[at + p], nb) - coef * x[at + p] * dx[at + p];
      }
  }

 private:
  // scale_[n,c] = k + α/size · Σ_{c'∈win(c)} x[n,c']²
  void scales(const float* x) {
    const int c_n = d_.c;
    const float a = d_.alpha / d_.size;
#pragma omp parallel for collapse(2)
    for (int n = 0; n < d_.n; ++n)
      for (int c = 0; c < c_n; ++c) {
        float* s = scale_.data() + (size_t(n) * c_n + c) * plane_;
        const int lo = std::max(0, c - (d_.size - 1) / 2), hi = std::min(c_n - 1, c + d_.size / 2);
        for (size_t p = 0; p < plane_; ++p) s[p] = 0.0f;
        for (int cc = lo; cc <= hi; ++cc) {
          const float* xc = x + (size_t(n) * c_n + cc) * plane_;
#pragma omp simd
          for (size_t p = 0; p < plane_; ++p) s[p] += xc[p] * xc[p];
        }
#pragma omp simd
        for (size_t p = 0; p < plane_; ++p) s[p] = d_.k + a * s[p];
      }
  }

  LrnDesc d_;
  size_t plane_;
  std::vector<float> scale_, t_;
};

}  // namespace

std::unique_ptr<PoolKernel> make_pool(CtxPtr ctx, const PoolDesc& d) {
  return std::make_unique<PoolOneDnn>(std::move(ctx), d);
}

std::unique_ptr<LrnKernel> make_lrn(CtxPtr ctx, const LrnDesc& d) {
  DT_CHECK(d.size > 0, "lrn: size must be positive, got ", d.size);
  if (d.size % 2 == 0) return std::make_unique<LrnLoops>(d);
  auto k = std::make_unique<LrnOneDnn>(std::move(ctx), d);
  if (!k->jit()) return std::make_unique<LrnLoops>(d);
  return k;
}

}  // namespace dtrain::layers::onednn
