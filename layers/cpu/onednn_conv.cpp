// layers/cpu/onednn_conv.cpp — convolution on oneDNN (forward with bias and a
// fused ReLU, backward-data, backward-weights with bias, groups; f32 or bf16).
//
// Layouts. Weights, bias and their gradients are the arena's: f32, plain
// w [K,C/g,KH,KW] (for g > 1 the same bytes as oneDNN's goihw [g, K/g, C/g,
// KH, KW]). Each direction's primitive reads weights in the layout it picks
// (format_tag::any, in the kernel's precision: a bf16 copy with bf16), made
// by a reorder per forward; dw is computed in f32 and reordered back.
//
// Activations, two modes (KernelExec::any_format):
// - chosen (any_format): the kernel reads x and writes y in the formats its
//   forward primitive picks (nChw16c on AVX-512; on AMX, for bf16, a layout
//   that was not nchw or nChw{8,16}c, so nhwc — its AMX kernels read acdb —
//   where its nChw16c kernels are the slower AVX512-BF16 ones; the first
//   layer reads nchw), and keeps the producer's format instead when the
//   same implementation takes it; with KernelExec::channels_last, nhwc first
//   where a direct kernel takes it; dx and dy are in the same formats. No
//   activation is reordered here: the Net converts where producer and
//   consumer disagree.
// - plain (the default): x, y are plain NCHW; each direction runs either on
//   the plain layouts (oneDNN's gemm kernel) or on blocked ones with reorders
//   into buffers allocated once. The choice per direction, from micro-timings
//   on an AVX-512 Xeon, 2 threads, N = 16 (plain / blocked ms, reorders
//   included):
//     AlexNet conv2 5×5 g2  fwd 52/37  bwd-data 65/38  bwd-weights 70/40
//     ResNet-50 3×3 64→64   fwd 31/17  bwd-data 41/21  bwd-weights 41/22
//     ResNet-50 1×1 256→64  fwd  9/13  bwd-data  9/12  bwd-weights 12/15
//     AlexNet conv1 C=3     fwd 34/14  bwd-data 37/92  bwd-weights 39/16
//   and, 1 thread, N = 64, backward-data only: LeNet conv2 6→16 5×5 on 14×14
//   1.15/0.53; C=4→16 on 28×28 10.5/3.9; C=3→16 on 28×28 9.4/14.4;
//   so: 1×1 kernels stay plain in every direction; otherwise blocked, except
//   backward-data when C/g < 4 (first layers; their dx is usually not wanted).
//
// The fused ReLU is a post-op of the forward primitive; backward receives dy
// already masked (KernelExec::relu, by the Net).
//
// Reuse between calls. forward() reorders w (and a plain x) on every call (it
// cannot know whether they changed). backward() reuses the reordered copies of
// x and w that the last forward() made when it is given the same pointers —
// valid in training, where backward follows forward for the same x and w
// before the optimizer touches w; a backward on other pointers (or without a
// forward) reorders its own copies. Backward primitives are made on the first
// backward that needs them (backward-data only when dx is wanted).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers::onednn {
namespace {

using dnnl::memory;

class ConvOneDnn final : public ConvKernel {
 public:
  ConvOneDnn(CtxPtr ctx, const ConvDesc& d)
      : ctx_(std::move(ctx)),
        d_(d),
        threads_(team_for_flops(2.0 * d.n * d.k * d.out_h() * d.out_w() * (d.c / std::max(1, d.groups)) * d.kh * d.kw)) {
    ThreadScope team(threads_);
    DT_CHECK(d.groups >= 1 && d.c % d.groups == 0 && d.k % d.groups == 0,
             "conv: C=", d.c, " and K=", d.k, " must be divisible by groups=", d.groups);
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "conv: empty output for input ", d.h, "x", d.w);
    const int g = d.groups;
    src_dims_ = {d.n, d.c, d.h, d.w};
    dst_dims_ = {d.n, d.k, d.out_h(), d.out_w()};
    wei_dims_ = g > 1 ? memory::dims{g, d.k / g, d.c / g, d.kh, d.kw}
                      : memory::dims{d.k, d.c, d.kh, d.kw};
    wei_tag_ = g > 1 ? tag::goihw : tag::oihw;
    strides_ = {d.stride_h, d.stride_w};
    pad_ = {d.pad_h, d.pad_w};
    // Right padding so that oneDNN's output size equals ours (floor mode).
    pad_r_ = {std::max(0, (d.out_h() - 1) * d.stride_h + d.kh - d.h - d.pad_h),
              std::max(0, (d.out_w() - 1) * d.stride_w + d.kw - d.w - d.pad_w)};
    prec_ = d.exec.precision;

    if (d.exec.any_format) {
      chosen_ = true;
      fwd_pd_ = choose_forward(d.exec);
      DT_CHECK(format_of(fwd_pd_.src_desc(), &src_fmt_) && format_of(fwd_pd_.dst_desc(), &dst_fmt_),
               "conv: oneDNN chose formats dtrain does not know");
    } else {
      src_fmt_ = dst_fmt_ = Format::plain(prec_);
      const bool one_by_one = d.kh == 1 && d.kw == 1;
      fwd_blocked_ = !one_by_one;
      bwd_data_blocked_ = !one_by_one && d.c / g >= 4;
      bwd_weights_blocked_ = !one_by_one;
      fwd_pd_ = fwd_pd(act(src_dims_, src_fmt_, fwd_blocked_), wei(fwd_blocked_), act(dst_dims_, dst_fmt_, fwd_blocked_));
    }
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    src_ = Port(user_src(), fwd_pd_.src_desc(), *ctx_, true);
    wei_ = Port(user_wei(), fwd_pd_.weights_desc(), *ctx_, true);
    dst_ = Port(user_dst(), fwd_pd_.dst_desc(), *ctx_, false);
    if (d.bias) bias_ = user_memory(bias_md(), ctx_->eng);
  }

  Format src_format() const override { return src_fmt_; }
  Format dst_format() const override { return dst_fmt_; }

  // x [N,C,H,W], w [K,C/g,KH,KW], b [K] or nullptr → y [N,K,OH,OW] (then ReLU when fused)
  void forward(const float* x, const float* w, const float* b, float* y) override {
    ThreadScope team(threads_);
    auto& s = ctx_->strm;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src_.in(x, s)},
                                         {DNNL_ARG_WEIGHTS, wei_.in(w, s)},
                                         {DNNL_ARG_DST, dst_.out(y)}};
    if (d_.bias) {
      DT_CHECK(b != nullptr, "conv: bias expected");
      bias_.set_data_handle(handle(b));
      args.emplace(DNNL_ARG_BIAS, bias_);
    }
    fwd_.execute(s, args);
    dst_.finish(s);
    s.wait();
    fwd_x_ = x;
    fwd_w_ = w;
  }

  // dy [N,K,OH,OW] → dx [N,C,H,W] (nullptr: skipped), dw [K,C/g,KH,KW], db [K]
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    ThreadScope team(threads_);
    auto& s = ctx_->strm;
    if (dx != nullptr) {
      init_backward_data();
      memory& wm = weights_for_bwd_data(w);
      memory& dym = bd_dy_.in(dy, s);
      bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, dym},
                            {DNNL_ARG_WEIGHTS, wm},
                            {DNNL_ARG_DIFF_SRC, bd_dx_.out(dx)}});
      bd_dx_.finish(s);
    }
    if (dw != nullptr || (d_.bias && db != nullptr)) {
      init_backward_weights();
      // Share the reordered dy with backward-data when both want the same layout.
      const bool share = dx != nullptr && bd_dy_.reorders() && bw_pd_.diff_dst_desc() == bd_pd_.diff_dst_desc();
      memory& dym = share ? bd_dy_.prim() : bw_dy_.in(dy, s);
      memory& xm = src_for_bwd_weights(x);
      std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, dym},
                                           {DNNL_ARG_SRC, xm},
                                           {DNNL_ARG_DIFF_WEIGHTS, bw_dw_.out(dw ? dw : dw_scratch())}};
      if (d_.bias) {
        diff_bias_.set_data_handle(db ? db : db_scratch());
        args.emplace(DNNL_ARG_DIFF_BIAS, diff_bias_);
      }
      bwd_weights_.execute(s, args);
      bw_dw_.finish(s);
    }
    s.wait();
  }

 private:
  memory::desc user_src() const { return act_md(src_dims_, src_fmt_); }
  memory::desc user_dst() const { return act_md(dst_dims_, dst_fmt_); }
  memory::desc user_wei() const { return plain_md(wei_dims_, wei_tag_); }
  memory::desc bias_md() const { return plain_md({d_.k}, tag::x); }
  // An activation descriptor of a primitive: the kernel's own format when it
  // chose one, else the plain one or (blocked) whatever the primitive likes.
  memory::desc act(const memory::dims& dims, const Format& f, bool blocked) const {
    if (chosen_ || !blocked) return act_md(dims, f);
    return memory::desc(dims, dtype_of(prec_), tag::any);
  }
  // Weights in the kernel's precision: plain, or the primitive's layout.
  memory::desc wei(bool blocked) const {
    return memory::desc(wei_dims_, dtype_of(prec_), chosen_ || blocked ? tag::any : wei_tag_);
  }
  memory::desc diff_wei(bool blocked) const {  // dw is computed in f32
    return memory::desc(wei_dims_, dt::f32, chosen_ || blocked ? tag::any : wei_tag_);
  }

  dnnl::convolution_forward::primitive_desc fwd_pd(const memory::desc& s, const memory::desc& w,
                                                   const memory::desc& y) const {
    auto pk = dnnl::prop_kind::forward_training;
    auto alg = dnnl::algorithm::convolution_direct;
    const dnnl::primitive_attr attr = relu_attr(d_.exec.relu);
    if (d_.bias) return {{pk, alg, s, w, bias_md(), y, strides_, pad_, pad_r_}, attr, ctx_->eng};
    return {{pk, alg, s, w, y, strides_, pad_, pad_r_}, attr, ctx_->eng};
  }

  // The forward primitive of the chosen mode: oneDNN's pick of formats, or
  // the producer's format for x when the same implementation takes it.
  dnnl::convolution_forward::primitive_desc choose_forward(const KernelExec& e) const {
    const dt t = dtype_of(prec_);
    if (e.channels_last) {  // nhwc asked for (NetOptions::channels_last): where a direct kernel takes it
      try {
        auto pn = fwd_pd(act_md(src_dims_, Format::nhwc(prec_)), wei(true), act_md(dst_dims_, Format::nhwc(prec_)));
        if (direct(pn.impl_info_str())) return pn;
      } catch (const dnnl::error&) {  // none does
      }
    }
    const memory::desc any_src(src_dims_, t, tag::any), any_dst(dst_dims_, t, tag::any);
    auto pd = fwd_pd(any_src, wei(true), any_dst);
    Format f;
    const Format hint{prec_, e.src.cblock};
    if (!format_of(pd.src_desc(), &f) || f != hint) {
      try {
        auto ph = fwd_pd(act_md(src_dims_, hint), wei(true), any_dst);
        if (std::string(ph.impl_info_str()) == pd.impl_info_str()) pd = ph;
      } catch (const dnnl::error&) {  // no implementation takes the hint
      }
    }
    // A format outside ours: nChw16c where a fast kernel takes it, else plain.
    Format fs, fd;
    if (format_of(pd.src_desc(), &fs) && format_of(pd.dst_desc(), &fd)) return pd;
    try {
      auto pb = fwd_pd(act_md(src_dims_, Format{prec_, 16}), wei(true), act_md(dst_dims_, Format{prec_, 16}));
      if (!is_ref_impl(pb.impl_info_str())) return pb;
    } catch (const dnnl::error&) {
    }
    return fwd_pd(act_md(src_dims_, Format::plain(prec_)), wei(true), act_md(dst_dims_, Format::plain(prec_)));
  }

  // In the chosen mode, a backward direction runs on the kernel's formats
  // when oneDNN has a direct (JIT) kernel for them; else, in this order, on
  // x (and dx) blocked (a convolution whose forward takes nchw x, C < 16, has
  // a direct backward on blocked layouts only), on oneDNN's own pick, and in
  // bf16 on an f32 pick (LeNet's C = 1 → 6 has no bf16 backward-weights kernel
  // but x64:gemm:jit, 3 ms; f32 JIT 0.25 ms); the ports reorder and convert.
  // No direct kernel at all: the first that is not a reference kernel.
  template <class Pd, class Make>
  Pd backward_pd(Make make) const {
    const dt t = dtype_of(prec_);
    Pd first = make(act(src_dims_, src_fmt_, false), act(dst_dims_, dst_fmt_, false), t);
    if (!chosen_ || direct(first.impl_info_str())) return first;
    struct Try {
      memory::desc s, y;
      dt w;
    };
    std::vector<Try> tries{{act_md(src_dims_, Format{prec_, 16}), act(dst_dims_, dst_fmt_, false), t},
                           {memory::desc(src_dims_, t, tag::any), memory::desc(dst_dims_, t, tag::any), t}};
    if (prec_ != DType::f32)
      tries.push_back({memory::desc(src_dims_, dt::f32, tag::any), memory::desc(dst_dims_, dt::f32, tag::any), dt::f32});
    std::optional<Pd> fallback;
    if (!is_ref_impl(first.impl_info_str())) fallback = first;
    for (const Try& c : tries) {
      try {
        Pd pd = make(c.s, c.y, c.w);
        if (direct(pd.impl_info_str())) return pd;
        if (!fallback && !is_ref_impl(pd.impl_info_str())) fallback = pd;
      } catch (const dnnl::error&) {
      }
    }
    return fallback ? *fallback : first;
  }
  static bool direct(const char* impl) {
    const std::string s(impl);
    return s.find("ref") == std::string::npos && s.find("gemm") == std::string::npos;
  }

  void init_backward_data() {
    if (bd_ready_) return;
    auto alg = dnnl::algorithm::convolution_direct;
    auto hint = bwd_data_blocked_ == fwd_blocked_ ? fwd_pd_ : fwd_pd(act(src_dims_, src_fmt_, bwd_data_blocked_),
                                                                     wei(bwd_data_blocked_),
                                                                     act(dst_dims_, dst_fmt_, bwd_data_blocked_));
    const bool b = bwd_data_blocked_;
    if (chosen_) {
      bd_pd_ = backward_pd<dnnl::convolution_backward_data::primitive_desc>([&](auto s, auto y, dt w) {
        const memory::desc wd(wei_dims_, w, tag::any);
        return dnnl::convolution_backward_data::primitive_desc({alg, s, wd, y, strides_, pad_, pad_r_}, ctx_->eng,
                                                               hint);
      });
    } else {
      bd_pd_ = {{alg, act(src_dims_, src_fmt_, b), wei(b), act(dst_dims_, dst_fmt_, b), strides_, pad_, pad_r_},
                ctx_->eng, hint};
    }
    bwd_data_ = dnnl::convolution_backward_data(bd_pd_);
    bd_dy_ = Port(user_dst(), bd_pd_.diff_dst_desc(), *ctx_, true);
    bd_dx_ = Port(user_src(), bd_pd_.diff_src_desc(), *ctx_, false);
    bd_w_shares_fwd_ = bd_pd_.weights_desc() == fwd_pd_.weights_desc();
    if (!bd_w_shares_fwd_) bd_w_ = Port(user_wei(), bd_pd_.weights_desc(), *ctx_, true);
    bd_ready_ = true;
  }

  void init_backward_weights() {
    if (bw_ready_) return;
    auto alg = dnnl::algorithm::convolution_direct;
    const bool b = bwd_weights_blocked_;
    auto hint = b == fwd_blocked_ ? fwd_pd_
                                  : fwd_pd(act(src_dims_, src_fmt_, b), wei(b), act(dst_dims_, dst_fmt_, b));
    using BwPd = dnnl::convolution_backward_weights::primitive_desc;
    auto make = [&](const memory::desc& sw, const memory::desc& yw, dt = dt::f32) -> BwPd {
      if (d_.bias) return {{alg, sw, diff_wei(b), bias_md(), yw, strides_, pad_, pad_r_}, ctx_->eng, hint};
      return {{alg, sw, diff_wei(b), yw, strides_, pad_, pad_r_}, ctx_->eng, hint};
    };
    bw_pd_ = chosen_ ? backward_pd<BwPd>(make) : make(act(src_dims_, src_fmt_, b), act(dst_dims_, dst_fmt_, b), dt::f32);
    bwd_weights_ = dnnl::convolution_backward_weights(bw_pd_);
    bw_dy_ = Port(user_dst(), bw_pd_.diff_dst_desc(), *ctx_, true);
    bw_x_shares_fwd_ = bw_pd_.src_desc() == fwd_pd_.src_desc();
    if (!bw_x_shares_fwd_) bw_x_ = Port(user_src(), bw_pd_.src_desc(), *ctx_, true);
    bw_dw_ = Port(user_wei(), bw_pd_.diff_weights_desc(), *ctx_, false);
    if (d_.bias) diff_bias_ = user_memory(bias_md(), ctx_->eng);
    bw_ready_ = true;
  }

  memory& weights_for_bwd_data(const float* w) {
    auto& s = ctx_->strm;
    if (!bd_w_shares_fwd_) return bd_w_.in(w, s);
    if (w == fwd_w_) return wei_.prim();  // reordered by the last forward()
    fwd_w_ = w;  // the reordered copy now holds this w
    return wei_.in(w, s);
  }
  memory& src_for_bwd_weights(const float* x) {
    auto& s = ctx_->strm;
    if (!bw_x_shares_fwd_) return bw_x_.in(x, s);
    if (x == fwd_x_) return src_.prim();
    fwd_x_ = x;
    return src_.in(x, s);
  }
  float* dw_scratch() {
    if (dw_scratch_.empty()) dw_scratch_.resize(user_wei().get_size() / sizeof(float));
    return dw_scratch_.data();
  }
  float* db_scratch() {
    if (db_scratch_.empty()) db_scratch_.resize(d_.k);
    return db_scratch_.data();
  }

  CtxPtr ctx_;
  ConvDesc d_;
  int threads_;  // the team of its primitives (team_for_flops)
  memory::dims src_dims_, dst_dims_, wei_dims_, strides_, pad_, pad_r_;
  tag wei_tag_ = tag::oihw;
  DType prec_ = DType::f32;
  bool chosen_ = false;  // the kernel chose the activations' formats
  Format src_fmt_, dst_fmt_;
  bool fwd_blocked_ = true, bwd_data_blocked_ = true, bwd_weights_blocked_ = true;

  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_forward fwd_;
  Port src_, wei_, dst_;
  memory bias_;
  const float* fwd_x_ = nullptr;  // what src_/wei_ hold reordered
  const float* fwd_w_ = nullptr;

  bool bd_ready_ = false, bw_ready_ = false, bd_w_shares_fwd_ = false, bw_x_shares_fwd_ = false;
  dnnl::convolution_backward_data::primitive_desc bd_pd_;
  dnnl::convolution_backward_data bwd_data_;
  Port bd_dy_, bd_dx_, bd_w_;
  dnnl::convolution_backward_weights::primitive_desc bw_pd_;
  dnnl::convolution_backward_weights bwd_weights_;
  Port bw_dy_, bw_x_, bw_dw_;
  memory diff_bias_;
  std::vector<float> dw_scratch_, db_scratch_;
};

}  // namespace

std::unique_ptr<ConvKernel> make_conv(CtxPtr ctx, const ConvDesc& d) {
  return std::make_unique<ConvOneDnn>(std::move(ctx), d);
}

}  // namespace dtrain::layers::onednn
