// layers/cpu/onednn_conv.cpp — convolution on oneDNN (forward, backward-data,
// backward-weights with bias, groups).
//
// Layouts. The kernel's I/O is plain: x [N,C,H,W], w [K,C/g,KH,KW] (for g > 1
// the same bytes as oneDNN's goihw [g, K/g, C/g, KH, KW]), y [N,K,OH,OW].
// Each direction is created either on the plain layouts (oneDNN then runs
// its gemm-based kernel) or with format_tag::any (it picks blocked layouts
// such as nChw16c / OIhw16i16o and its direct JIT kernel); blocked tensors
// are reordered into buffers allocated once per kernel. The choice per
// direction, from micro-timings on an AVX-512 Xeon, 2 threads, N = 16
// (plain / blocked ms, reorders included; see the final report of the
// backend's commit):
//   AlexNet conv2 5×5 g2  fwd 52/37  bwd-data 65/38  bwd-weights 70/40
//   ResNet-50 3×3 64→64   fwd 31/17  bwd-data 41/21  bwd-weights 41/22
//   ResNet-50 1×1 256→64  fwd  9/13  bwd-data  9/12  bwd-weights 12/15
//   AlexNet conv1 C=3     fwd 34/14  bwd-data 37/92  bwd-weights 39/16
// and, 1 thread, N = 64, backward-data only: LeNet conv2 6→16 5×5 on 14×14
// 1.15/0.53; C=4→16 on 28×28 10.5/3.9; C=3→16 on 28×28 9.4/14.4;
// so: 1×1 kernels stay plain in every direction; otherwise blocked, except
// backward-data when C/g < 4 (first layers; their dx is usually not wanted).
//
// Reuse between calls. forward() reorders x and w on every call (it cannot
// know whether they changed). backward() reuses the blocked copies of x and w
// that the last forward() made when it is given the same pointers — valid in
// training, where backward follows forward for the same x and w before the
// optimizer touches w; a backward on other pointers (or without a forward)
// reorders its own copies. forward-only (inference) use never depends on it.
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers::onednn {
namespace {

using dnnl::memory;

class ConvOneDnn final : public ConvKernel {
 public:
  ConvOneDnn(CtxPtr ctx, const ConvDesc& d) : ctx_(std::move(ctx)), d_(d) {
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

    const bool one_by_one = d.kh == 1 && d.kw == 1;
    fwd_blocked_ = !one_by_one;
    bwd_data_blocked_ = !one_by_one && d.c / g >= 4;
    bwd_weights_blocked_ = !one_by_one;

    const auto& eng = ctx_->eng;
    fwd_pd_ = fwd_pd(fwd_blocked_);
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    src_ = Port(user_src(), fwd_pd_.src_desc(), *ctx_, true);
    wei_ = Port(user_wei(), fwd_pd_.weights_desc(), *ctx_, true);
    dst_ = Port(user_dst(), fwd_pd_.dst_desc(), *ctx_, false);
    if (d.bias) bias_ = user_memory(bias_md(), eng);
  }

  // x [N,C,H,W], w [K,C/g,KH,KW], b [K] or nullptr → y [N,K,OH,OW]
  void forward(const float* x, const float* w, const float* b, float* y) override {
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
    auto& s = ctx_->strm;
    init_backward();
    if (dx != nullptr) {
      memory& wm = weights_for_bwd_data(w);
      memory& dym = bd_dy_.in(dy, s);
      bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, dym},
                            {DNNL_ARG_WEIGHTS, wm},
                            {DNNL_ARG_DIFF_SRC, bd_dx_.out(dx)}});
      bd_dx_.finish(s);
    }
    if (dw != nullptr || (d_.bias && db != nullptr)) {
      // Share the reordered dy with backward-data when both want the same layout.
      memory& dym = (dx != nullptr && bw_dy_shares_bd_) ? bd_dy_.prim() : bw_dy_.in(dy, s);
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
  memory::desc user_src() const { return plain_md(src_dims_, tag::nchw); }
  memory::desc user_dst() const { return plain_md(dst_dims_, tag::nchw); }
  memory::desc user_wei() const { return plain_md(wei_dims_, wei_tag_); }
  memory::desc bias_md() const { return plain_md({d_.k}, tag::x); }
  memory::desc md(const memory::dims& dims, tag plain, bool blocked) const {
    return plain_md(dims, blocked ? tag::any : plain);
  }

  dnnl::convolution_forward::primitive_desc fwd_pd(bool blocked) const {
    auto s = md(src_dims_, tag::nchw, blocked), w = md(wei_dims_, wei_tag_, blocked),
         y = md(dst_dims_, tag::nchw, blocked);
    auto pk = dnnl::prop_kind::forward_training;
    auto alg = dnnl::algorithm::convolution_direct;
    if (d_.bias)
      return {{pk, alg, s, w, bias_md(), y, strides_, pad_, pad_r_}, ctx_->eng};
    return {{pk, alg, s, w, y, strides_, pad_, pad_r_}, ctx_->eng};
  }

  // Backward primitives and their ports, created on the first backward().
  void init_backward() {
    if (bwd_ready_) return;
    const auto& eng = ctx_->eng;
    auto alg = dnnl::algorithm::convolution_direct;

    auto hint_d = bwd_data_blocked_ == fwd_blocked_ ? fwd_pd_ : fwd_pd(bwd_data_blocked_);
    auto sd = md(src_dims_, tag::nchw, bwd_data_blocked_);
    auto wd = md(wei_dims_, wei_tag_, bwd_data_blocked_);
    auto yd = md(dst_dims_, tag::nchw, bwd_data_blocked_);
    bd_pd_ = {{alg, sd, wd, yd, strides_, pad_, pad_r_}, eng, hint_d};
    bwd_data_ = dnnl::convolution_backward_data(bd_pd_);
    bd_dy_ = Port(user_dst(), bd_pd_.diff_dst_desc(), *ctx_, true);
    bd_dx_ = Port(user_src(), bd_pd_.diff_src_desc(), *ctx_, false);
    bd_w_shares_fwd_ = bd_pd_.weights_desc() == fwd_pd_.weights_desc();
    if (!bd_w_shares_fwd_) bd_w_ = Port(user_wei(), bd_pd_.weights_desc(), *ctx_, true);

    auto hint_w = bwd_weights_blocked_ == fwd_blocked_ ? fwd_pd_ : fwd_pd(bwd_weights_blocked_);
    auto sw = md(src_dims_, tag::nchw, bwd_weights_blocked_);
    auto ww = md(wei_dims_, wei_tag_, bwd_weights_blocked_);
    auto yw = md(dst_dims_, tag::nchw, bwd_weights_blocked_);
    if (d_.bias)
      bw_pd_ = {{alg, sw, ww, bias_md(), yw, strides_, pad_, pad_r_}, eng, hint_w};
    else
      bw_pd_ = {{alg, sw, ww, yw, strides_, pad_, pad_r_}, eng, hint_w};
    bwd_weights_ = dnnl::convolution_backward_weights(bw_pd_);
    bw_dy_shares_bd_ = bw_pd_.diff_dst_desc() == bd_pd_.diff_dst_desc();
    bw_dy_ = Port(user_dst(), bw_pd_.diff_dst_desc(), *ctx_, true);
    bw_x_shares_fwd_ = bw_pd_.src_desc() == fwd_pd_.src_desc();
    if (!bw_x_shares_fwd_) bw_x_ = Port(user_src(), bw_pd_.src_desc(), *ctx_, true);
    bw_dw_ = Port(user_wei(), bw_pd_.diff_weights_desc(), *ctx_, false);
    if (d_.bias) diff_bias_ = user_memory(bias_md(), eng);
    bwd_ready_ = true;
  }

  memory& weights_for_bwd_data(const float* w) {
    auto& s = ctx_->strm;
    if (!bd_w_shares_fwd_) return bd_w_.in(w, s);
    if (w == fwd_w_) return wei_.prim();  // reordered by the last forward()
    fwd_w_ = w;  // the blocked copy now holds this w
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
  memory::dims src_dims_, dst_dims_, wei_dims_, strides_, pad_, pad_r_;
  tag wei_tag_ = tag::oihw;
  bool fwd_blocked_ = true, bwd_data_blocked_ = true, bwd_weights_blocked_ = true;

  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_forward fwd_;
  Port src_, wei_, dst_;
  memory bias_;
  const float* fwd_x_ = nullptr;  // what src_/wei_ hold in blocked form
  const float* fwd_w_ = nullptr;

  bool bwd_ready_ = false, bd_w_shares_fwd_ = false, bw_x_shares_fwd_ = false;
  bool bw_dy_shares_bd_ = false;
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
