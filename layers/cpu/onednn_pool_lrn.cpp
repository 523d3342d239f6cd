// layers/cpu/onednn_pool_lrn.cpp — max/avg pooling and cross-channel LRN on
// oneDNN.
//
// Pooling runs in the format it is given (KernelExec::any_format: the
// producer's, else plain NCHW) and the precision of the net, f32 or bf16:
// oneDNN's JIT pooling takes nchw and nChw16c alike (reordering to nChw16c
// and back cost more than it saved). Max pooling keeps the forward
// workspace (argmax) for backward. Exception: f32 max pooling with
// non-overlapping windows (kernel = stride, no padding: LeNet's 2×2/2) runs
// on plain OpenMP loops (MaxPoolLoops) in the producer's format, plain or
// nChw{8,16}c, where oneDNN 2.6 is slow in every layout (1 thread, fwd + bwd
// ms, [64,6,28,28], Intel Xeon with AVX-512: oneDNN nchw 1.05 + 1.13, nChw16c
// 0.76 + 0.76; loops on nchw 0.50 + 0.10; AMD EPYC with AVX2: oneDNN nChw8c
// 2.96 + 2.72). For overlapping 3×3/2 windows
// oneDNN's forward stays faster than these scalar loops (AlexNet
// [16,64,55,55]: 3.8 against 19 ms), so they keep oneDNN.
//
// LRN on plain NCHW has only oneDNN's reference backward (~500 ms for AlexNet's
// [16, 96, 55, 55] against ~20 ms blocked, 2 threads), so LRN runs in the first
// channel-blocked layout (nChw16c, else nChw8c) whose backward is a JIT kernel:
// with any_format that is the format it reads and writes, else x/y/dy/dx are
// reordered from and to NCHW once per call into buffers allocated once. LRN
// computes in f32 whatever the net's precision (the Net converts bf16 inputs).
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
#include <cstdint>
#include <emmintrin.h>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers::onednn {
namespace {

using dnnl::memory;

class PoolOneDnn final : public PoolKernel {
 public:
  PoolOneDnn(CtxPtr ctx, const PoolDesc& d)
      : ctx_(std::move(ctx)), d_(d), threads_(team_for_elements(double(d.n) * d.c * d.h * d.w)) {
    ThreadScope team(threads_);
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "pool: empty output for input ", d.h, "x", d.w);
    // The producer's format when oneDNN has a JIT kernel for it (forward
    // JIT, backward not a reference kernel), else the first blocked one that
    // has (on AVX2 plain NCHW gets only the scalar simple_nchw: AlexNet's
    // pool1, [16,64,55,55] 3×3/2, 2 threads, AMD EPYC: 27.6 + 7.6 ms against
    // 3.8 + 3.7 ms in nChw8c, plus a 3.8 ms conversion of its input), else
    // the first whose forward is not a reference kernel, else the producer's.
    std::vector<int> blocks{1};
    if (d.exec.any_format) {
      blocks = {d.exec.src.cblock};
      for (int b : {16, 8, 1})
        if (b != blocks.front()) blocks.push_back(b);
    }
    int chosen = -1, fallback = -1;
    for (int b : blocks) {
      fmt_ = Format{d.exec.precision, b};
      make(d);
      if (is_jit_impl(fwd_pd_.impl_info_str()) && !is_ref_impl(bwd_pd_.impl_info_str())) {
        chosen = b;
        break;
      }
      if (fallback < 0 && !is_ref_impl(fwd_pd_.impl_info_str())) fallback = b;
    }
    if (chosen < 0) chosen = fallback >= 0 ? fallback : blocks.front();
    if (fmt_.cblock != chosen) {
      fmt_ = Format{d.exec.precision, chosen};
      make(d);
    }
  }

  Format src_format() const override { return fmt_; }
  Format dst_format() const override { return fmt_; }
  std::string impl() const override { return fwd_pd_.impl_info_str(); }

  // x [N,C,H,W] → y [N,C,OH,OW]
  void forward(const float* x, float* y) override {
    ThreadScope team(threads_);
    run_forward(x, y);
    ctx_->strm.wait();
  }

  // dy [N,C,OH,OW] → dx [N,C,H,W]
  void backward(const float* x, const float* /*y*/, const float* dy, float* dx) override {
    ThreadScope team(threads_);
    auto& s = ctx_->strm;
    if (has_ws_ && x != fwd_x_) {
      if (!y_scratch_) y_scratch_ = memory(fwd_pd_.dst_desc(), ctx_->eng);
      run_forward(x, static_cast<float*>(y_scratch_.get_data_handle()));
    }
    dy_.set_data_handle(handle(dy));
    dx_.set_data_handle(dx);
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_SRC, dx_}};
    if (has_ws_) args.emplace(DNNL_ARG_WORKSPACE, ws_);
    bwd_.execute(s, args);
    s.wait();
  }

 private:
  void make(const PoolDesc& d) {
    const auto& eng = ctx_->eng;
    auto src = act_md({d.n, d.c, d.h, d.w}, fmt_);
    auto dst = act_md({d.n, d.c, d.out_h(), d.out_w()}, fmt_);
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
  int threads_;  // the team of its primitives (team_for_elements)
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward::primitive_desc bwd_pd_;
  dnnl::pooling_backward bwd_;
  Format fmt_;  // of x, y, dx, dy
  memory x_, y_, dy_, dx_, ws_, y_scratch_;
  bool has_ws_ = false;
  const float* fwd_x_ = nullptr;  // the input the workspace belongs to
};

// Max pooling on plain loops over NCHW, or over f32 NCHW{8,16}c when the
// producer writes that (KernelExec::any_format): one (n, c) plane — one
// (n, channel block) plane of B-lane vectors — per OpenMP iteration; forward
// keeps, per output and channel, the in-plane index (h·W + w) of the first
// maximum (lowest h, then lowest w; a NaN wins), as the reference does;
// backward scatters dy there. In a blocked plane the B channels of a block
// are the vector lanes; padding channels read zeros and write zeros (their
// dy is zero). Blocked because on a CPU without AVX-512 oneDNN 2.6's JIT
// pooling on nChw8c with padding channels is slow (LeNet-5's pool1,
// [64,6,28,28], 1 thread, AMD EPYC with AVX2: 2.96 + 2.72 ms, half the step;
// these loops 0.18 + 0.14 ms on nChw8c, 1.34 + 0.10 on plain NCHW — `dtrain
// bench compute --model lenet5 --threads 1 --profile`, with and without --plain).
class MaxPoolLoops final : public PoolKernel {
 public:
  MaxPoolLoops(const PoolDesc& d, int cblock) : d_(d), b_(cblock) {
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "pool: empty output for input ", d.h, "x", d.w);
    DT_CHECK(d.pad_h < d.kh && d.pad_w < d.kw, "pool: padding ", d.pad_h, "x", d.pad_w,
             " must be smaller than the kernel ", d.kh, "x", d.kw);
    DT_CHECK(b_ == 1 || b_ == 8 || b_ == 16, "pool: channel block ", b_, " (1, 8 or 16)");
    planes_ = ptrdiff_t(d.n) * ((d.c + b_ - 1) / b_);
    argmax_.resize(size_t(planes_) * b_ * d.out_h() * d.out_w());
  }

  Format src_format() const override { return Format::blocked(b_); }
  Format dst_format() const override { return Format::blocked(b_); }
  std::string impl() const override { return "loops"; }

  // x [N,C,H,W] → y [N,C,OH,OW] (in the kernel's format)
  void forward(const float* x, float* y) override {
    if (b_ == 8)
      forward_blocked<8>(x, y);
    else if (b_ == 16)
      forward_blocked<16>(x, y);
    else
      forward_plain(x, y);
    fwd_x_ = x;
  }

  // dy [N,C,OH,OW] → dx [N,C,H,W]
  void backward(const float* x, const float* /*y*/, const float* dy, float* dx) override {
    if (x != fwd_x_) {  // the argmax belongs to another input: recompute it
      if (y_scratch_.empty()) y_scratch_.resize(argmax_.size());
      forward(x, y_scratch_.data());
    }
    const ptrdiff_t b = b_;
    const size_t in_plane = size_t(d_.h) * d_.w, out_plane = size_t(d_.out_h()) * d_.out_w();
#pragma omp parallel for if (planes_ * ptrdiff_t(in_plane) * b >= 4096)
    for (ptrdiff_t p = 0; p < planes_; ++p) {
      float* gp = dx + p * in_plane * b;
      const float* dyp = dy + p * out_plane * b;
      const int32_t* ap = argmax_.data() + p * out_plane * b;
      std::fill(gp, gp + in_plane * b, 0.0f);
      for (size_t o = 0; o < out_plane; ++o)
        for (ptrdiff_t c = 0; c < b; ++c) gp[ptrdiff_t(ap[o * b + c]) * b + c] += dyp[o * b + c];
    }
  }

 private:
  void forward_plain(const float* x, float* y) {
    const int oh_n = d_.out_h(), ow_n = d_.out_w(), h_n = d_.h, w_n = d_.w;
    const size_t in_plane = size_t(h_n) * w_n, out_plane = size_t(oh_n) * ow_n;
#pragma omp parallel for if (planes_ * ptrdiff_t(in_plane) >= 4096)
    for (ptrdiff_t p = 0; p < planes_; ++p) {
      const float* xp = x + p * in_plane;
      float* yp = y + p * out_plane;
      int32_t* ap = argmax_.data() + p * out_plane;
      // Window elements are visited in (h, w) order, each as a branch-free
      // update of a whole output row, so strict '>' keeps the first maximum.
      for (int oh = 0; oh < oh_n; ++oh) {
        const int h0 = oh * d_.stride_h - d_.pad_h;
        const int hs = std::max(h0, 0), he = std::min(h0 + d_.kh, h_n);
        float* yr = yp + oh * ow_n;
        int32_t* ar = ap + oh * ow_n;
        std::fill(yr, yr + ow_n, -std::numeric_limits<float>::infinity());
        std::fill(ar, ar + ow_n, -1);
        for (int ih = hs; ih < he; ++ih)
          for (int j = 0; j < d_.kw; ++j) {
            // outputs whose column ow·s − pad + j lies inside [0, W)
            const int off = j - d_.pad_w, s = d_.stride_w;
            const int lo = off >= 0 ? 0 : (-off + s - 1) / s;
            const int hi = off > w_n - 1 ? 0 : std::min(ow_n, (w_n - 1 - off) / s + 1);
            const float* xr = xp + size_t(ih) * w_n;
            const int32_t base = ih * w_n + off;
            for (int ow = lo; ow < hi; ++ow) {
              const float v = xr[ow * s + off];
              const bool take = v > yr[ow] || ar[ow] < 0 || (v != v && yr[ow] == yr[ow]);
              yr[ow] = take ? v : yr[ow];
              ar[ow] = take ? base + ow * s : ar[ow];
            }
          }
      }
    }
  }

  // The same visit order per output, the B channels of a block as lanes.
  template <int B>
  void forward_blocked(const float* x, float* y) {
    const int oh_n = d_.out_h(), ow_n = d_.out_w(), h_n = d_.h, w_n = d_.w;
    const size_t in_plane = size_t(h_n) * w_n, out_plane = size_t(oh_n) * ow_n;
#pragma omp parallel for if (planes_ * ptrdiff_t(in_plane) * B >= 4096)
    for (ptrdiff_t p = 0; p < planes_; ++p) {
      const float* xp = x + p * in_plane * B;
      float* yp = y + p * out_plane * B;
      int32_t* ap = argmax_.data() + p * out_plane * B;
      for (int oh = 0; oh < oh_n; ++oh) {
        const int h0 = oh * d_.stride_h - d_.pad_h;
        const int hs = std::max(h0, 0), he = std::min(h0 + d_.kh, h_n);
        for (int ow = 0; ow < ow_n; ++ow) {
          const int w0 = ow * d_.stride_w - d_.pad_w;
          const int ws = std::max(w0, 0), we = std::min(w0 + d_.kw, w_n);
          // The window's first element starts the maximum (the window is
          // never empty: padding < kernel), so the reference's "nothing
          // taken yet" case needs no test; then, per lane, take v when
          // v > max, or v is a NaN and max is not (SSE2: the x86-64
          // baseline, B/4 registers each for the maxima and their indices).
          constexpr int G = B / 4;
          const int32_t first = hs * w_n + ws;
          __m128 m[G];
          __m128i a[G];
          for (int g = 0; g < G; ++g) {
            m[g] = _mm_loadu_ps(xp + size_t(first) * B + 4 * g);
            a[g] = _mm_set1_epi32(first);
          }
          for (int ih = hs; ih < he; ++ih)
            for (int iw = ih == hs ? ws + 1 : ws; iw < we; ++iw) {
              const int32_t at = ih * w_n + iw;
              const float* xv = xp + size_t(at) * B;
              const __m128i atv = _mm_set1_epi32(at);
              for (int g = 0; g < G; ++g) {
                const __m128 v = _mm_loadu_ps(xv + 4 * g);
                const __m128 take =
                    _mm_or_ps(_mm_cmpgt_ps(v, m[g]), _mm_and_ps(_mm_cmpunord_ps(v, v), _mm_cmpord_ps(m[g], m[g])));
                m[g] = _mm_or_ps(_mm_and_ps(take, v), _mm_andnot_ps(take, m[g]));
                const __m128i ti = _mm_castps_si128(take);
                a[g] = _mm_or_si128(_mm_and_si128(ti, atv), _mm_andnot_si128(ti, a[g]));
              }
            }
          for (int g = 0; g < G; ++g) {
            _mm_storeu_ps(yp + (size_t(oh) * ow_n + ow) * B + 4 * g, m[g]);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(ap + (size_t(oh) * ow_n + ow) * B + 4 * g), a[g]);
          }
        }
      }
    }
  }

  PoolDesc d_;
  int b_;                         // channel block: 1 (plain NCHW), 8 or 16
  ptrdiff_t planes_ = 0;          // N · ⌈C / b⌉
  std::vector<int32_t> argmax_;   // per output and lane: index into its input plane (h·W + w)
  const float* fwd_x_ = nullptr;  // the input argmax_ belongs to
  std::vector<float> y_scratch_;
};

class LrnOneDnn final : public LrnKernel {
 public:
  LrnOneDnn(CtxPtr ctx, const LrnDesc& d) : ctx_(std::move(ctx)), d_(d) {
    const auto& eng = ctx_->eng;
    memory::dims dims{d.n, d.c, d.h, d.w};
    auto alg = dnnl::algorithm::lrn_across_channels;
    for (int b : {16, 8, 1}) {
      auto md = act_md(dims, Format::blocked(b));
      fwd_pd_ = {{dnnl::prop_kind::forward_training, alg, md, d.size, d.alpha, d.beta, d.k}, eng};
      bwd_pd_ = {{alg, md, md, d.size, d.alpha, d.beta, d.k}, eng, fwd_pd_};
      jit_ = !is_ref_impl(bwd_pd_.impl_info_str()) && !is_ref_impl(fwd_pd_.impl_info_str());
      if (jit_) {
        if (d.exec.any_format) fmt_ = Format::blocked(b);
        break;
      }
    }
    auto user = act_md(dims, fmt_);
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
  Format src_format() const override { return fmt_; }
  Format dst_format() const override { return fmt_; }

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
  Format fmt_;  // f32 nchw unless any_format
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
  const bool tiles = d.kh == d.stride_h && d.kw == d.stride_w && d.pad_h == 0 && d.pad_w == 0;
  // The loops run in the producer's f32 format, plain or channel-blocked; an
  // nhwc producer gets oneDNN's pooling (a JIT kernel reads nhwc).
  const int cblock = d.exec.any_format ? d.exec.src.cblock : 1;
  const bool f32 = d.exec.precision == DType::f32 && (!d.exec.any_format || d.exec.src.dtype == DType::f32);
  if (d.kind == PoolKind::max && tiles && f32 && cblock >= 1) return std::make_unique<MaxPoolLoops>(d, cblock);
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
