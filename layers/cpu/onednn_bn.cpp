// layers/cpu/onednn_bn.cpp — batch normalisation on oneDNN (training with
// torch-style running statistics, inference with the running statistics,
// backward for x, gamma and beta; an optional fused ReLU; f32 or bf16 data
// with f32 statistics, scale and shift).
//
// oneDNN's training forward returns the batch mean and the BIASED batch
// variance (the one it normalises with) and leaves the running statistics to
// us: running = (1 − momentum)·running + momentum·batch, with the variance
// made unbiased by M/(M − 1), M = N·H·W (torch.nn.BatchNorm2d). The batch mean
// and variance stay in the kernel for backward().
//
// Layout: oneDNN's kernel for plain NCHW ("ncsp_bnorm") is not JIT-compiled;
// the channel-blocked JIT kernel plus reorders in and out was 1.3-3× faster
// (median ms, N=16, 2 threads, fwd/bwd nchw vs nChw16c incl. reorders:
// [64,56,56] 44/32 and 33/30; [256,56,56] 257/120 and 292/140; [512,28,28]
// 241/96 and 266/96). So the kernel runs in the first of (the producer's
// format when the kernel may choose, KernelExec::any_format), nChw16c, nChw8c
// whose implementation is a JIT one, else on nchw; when it may choose, that
// is also the format it reads and writes, else it reorders from and to plain
// NCHW. backward() reuses the reordered x of the last forward_train() when
// given the same pointer (valid in training: x is not modified between a
// layer's forward and backward).
//
// The fused ReLU is oneDNN's fuse_norm_relu: training forward keeps a bit
// mask of the positive outputs (the workspace) and backward applies it to dy
// itself (masks_relu_grad()), so it needs the x of the last forward_train().
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers::onednn {
namespace {

using dnnl::memory;
using dnnl::normalization_flags;

class BatchNormOneDnn final : public BatchNormKernel {
 public:
  BatchNormOneDnn(CtxPtr ctx, const BatchNormDesc& d)
      : ctx_(std::move(ctx)), d_(d), threads_(team_for_elements(double(d.n) * d.c * d.h * d.w)), relu_(d.exec.relu) {
    ThreadScope team(threads_);
    const auto& eng = ctx_->eng;
    const memory::dims dims{d.n, d.c, d.h, d.w};
    const DType prec = d.exec.precision;
    auto chan = plain_md({d.c}, tag::x);
    auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    if (relu_) flags |= normalization_flags::fuse_norm_relu;
    std::vector<int> blocks{16, 8, 1};
    if (d.exec.any_format) blocks.insert(blocks.begin(), d.exec.src.cblock);
    memory::desc data;
    for (int b : blocks) {
      data = act_md(dims, Format{prec, b});
      train_pd_ = {{dnnl::prop_kind::forward_training, data, d.eps, flags}, eng};
      if (std::string(train_pd_.impl_info_str()).find("jit") != std::string::npos) break;
    }
    train_ = dnnl::batch_normalization_forward(train_pd_);
    infer_pd_ = {{dnnl::prop_kind::forward_inference, data, d.eps, flags | normalization_flags::use_global_stats},
                 eng};
    infer_ = dnnl::batch_normalization_forward(infer_pd_);
    bwd_pd_ = {{dnnl::prop_kind::backward, data, data, d.eps, flags}, eng, train_pd_};
    bwd_ = dnnl::batch_normalization_backward(bwd_pd_);

    if (d.exec.any_format)
      DT_CHECK(format_of(data, &fmt_), "batch norm: a format dtrain does not know");
    else
      fmt_ = Format::plain(prec);
    const auto user = act_md(dims, fmt_);
    x_ = Port(user, data, *ctx_, true);
    y_ = Port(user, data, *ctx_, false);
    dy_ = Port(user, data, *ctx_, true);
    dx_ = Port(user, data, *ctx_, false);
    gamma_ = user_memory(chan, eng);
    beta_ = user_memory(chan, eng);
    run_mean_ = user_memory(chan, eng);
    run_var_ = user_memory(chan, eng);
    dgamma_ = user_memory(chan, eng);
    dbeta_ = user_memory(chan, eng);
    mean_ = memory(chan, eng);
    var_ = memory(chan, eng);
    if (relu_) ws_ = memory(train_pd_.workspace_desc(), eng);
    zeros_.assign(d.c, 0.0f);  // the shift argument backward wants but does not read
  }

  Format src_format() const override { return fmt_; }
  Format dst_format() const override { return fmt_; }
  bool masks_relu_grad() const override { return relu_; }

  // x [N,C,H,W], gamma/beta/running_* [C] → y [N,C,H,W]; updates running_*.
  void forward_train(const float* x, const float* gamma, const float* beta, float* y,
                     float* running_mean, float* running_var) override {
    ThreadScope team(threads_);
    const int64_t m_values = int64_t(d_.n) * d_.h * d_.w;
    DT_CHECK(m_values > 1, "batch norm: training needs more than one value per channel (N·H·W = ", m_values, ")");
    auto& s = ctx_->strm;
    gamma_.set_data_handle(handle(gamma));
    beta_.set_data_handle(handle(beta));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_.in(x, s)}, {DNNL_ARG_DST, y_.out(y)},
                                         {DNNL_ARG_SCALE, gamma_},    {DNNL_ARG_SHIFT, beta_},
                                         {DNNL_ARG_MEAN, mean_},      {DNNL_ARG_VARIANCE, var_}};
    if (relu_) args.emplace(DNNL_ARG_WORKSPACE, ws_);
    train_.execute(s, args);
    y_.finish(s);
    s.wait();
    have_stats_ = true;
    fwd_x_ = x;
    const double m = static_cast<double>(d_.n) * d_.h * d_.w;
    const float unbias = m > 1 ? static_cast<float>(m / (m - 1)) : 1.0f;
    const float mom = d_.momentum;
    const auto* mean = static_cast<const float*>(mean_.get_data_handle());
    const auto* var = static_cast<const float*>(var_.get_data_handle());
    for (int c = 0; c < d_.c; ++c) {  // running statistics are optional (backend.hpp)
      if (running_mean != nullptr) running_mean[c] = (1.0f - mom) * running_mean[c] + mom * mean[c];
      if (running_var != nullptr) running_var[c] = (1.0f - mom) * running_var[c] + mom * (var[c] * unbias);
    }
  }

  // Normalises with the running statistics; no state is touched.
  void forward_infer(const float* x, const float* gamma, const float* beta,
                     const float* running_mean, const float* running_var, float* y) override {
    ThreadScope team(threads_);
    auto& s = ctx_->strm;
    gamma_.set_data_handle(handle(gamma));
    beta_.set_data_handle(handle(beta));
    run_mean_.set_data_handle(handle(running_mean));
    run_var_.set_data_handle(handle(running_var));
    fwd_x_ = nullptr;  // x_ now holds this x, maybe not the training one
    infer_.execute(s, {{DNNL_ARG_SRC, x_.in(x, s)},
                       {DNNL_ARG_DST, y_.out(y)},
                       {DNNL_ARG_SCALE, gamma_},
                       {DNNL_ARG_SHIFT, beta_},
                       {DNNL_ARG_MEAN, run_mean_},
                       {DNNL_ARG_VARIANCE, run_var_}});
    y_.finish(s);
    s.wait();
  }

  // dy [N,C,H,W] → dx [N,C,H,W] (nullptr: skipped), dgamma, dbeta [C]
  void backward(const float* x, const float* dy, const float* gamma, float* dx, float* dgamma,
                float* dbeta) override {
    ThreadScope team(threads_);
    DT_CHECK(have_stats_, "batch norm: backward() before any forward_train()");
    DT_CHECK(!relu_ || x == fwd_x_, "batch norm with a fused ReLU: backward() needs the x of the last forward_train()");
    auto& s = ctx_->strm;
    if (dgamma == nullptr || dbeta == nullptr) dstat_scratch_.resize(2 * static_cast<size_t>(d_.c));
    if (dx == nullptr && !dx_scratch_) dx_scratch_ = memory(bwd_pd_.diff_src_desc(), ctx_->eng);
    memory& xm = x == fwd_x_ ? x_.prim() : x_.in(x, s);
    fwd_x_ = x;
    gamma_.set_data_handle(handle(gamma));
    beta_.set_data_handle(zeros_.data());
    dgamma_.set_data_handle(dgamma ? dgamma : dstat_scratch_.data());
    dbeta_.set_data_handle(dbeta ? dbeta : dstat_scratch_.data() + d_.c);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm},
                                         {DNNL_ARG_DIFF_DST, dy_.in(dy, s)},
                                         {DNNL_ARG_SCALE, gamma_},
                                         {DNNL_ARG_SHIFT, beta_},
                                         {DNNL_ARG_MEAN, mean_},
                                         {DNNL_ARG_VARIANCE, var_},
                                         {DNNL_ARG_DIFF_SRC, dx ? dx_.out(dx) : dx_scratch_},
                                         {DNNL_ARG_DIFF_SCALE, dgamma_},
                                         {DNNL_ARG_DIFF_SHIFT, dbeta_}};
    if (relu_) args.emplace(DNNL_ARG_WORKSPACE, ws_);
    bwd_.execute(s, args);
    if (dx != nullptr) dx_.finish(s);
    s.wait();
  }

 private:
  CtxPtr ctx_;
  BatchNormDesc d_;
  int threads_;  // the team of its primitives (team_for_elements)
  dnnl::batch_normalization_forward::primitive_desc train_pd_, infer_pd_;
  dnnl::batch_normalization_forward train_, infer_;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd_;
  dnnl::batch_normalization_backward bwd_;
  bool relu_ = false;
  Format fmt_;            // what x, y, dx, dy are stored in
  Port x_, y_, dy_, dx_;  // fmt_ ↔ the kernel's layout
  memory gamma_, beta_, run_mean_, run_var_, dgamma_, dbeta_;
  const float* fwd_x_ = nullptr;  // the x that x_ holds in the kernel's layout
  memory mean_, var_;  // batch statistics of the last forward_train (biased variance)
  memory ws_;          // the fused ReLU's mask of the last forward_train
  memory dx_scratch_;  // dx when not wanted
  bool have_stats_ = false;
  std::vector<float> zeros_, dstat_scratch_;
};

}  // namespace

std::unique_ptr<BatchNormKernel> make_batch_norm(CtxPtr ctx, const BatchNormDesc& d) {
  return std::make_unique<BatchNormOneDnn>(std::move(ctx), d);
}

}  // namespace dtrain::layers::onednn
