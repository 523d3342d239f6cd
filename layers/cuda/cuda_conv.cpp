// layers/cuda/cuda_conv.cpp — convolution through cuDNN (forward, backward
// data, backward filter, groups via cudnnSetConvolutionGroupCount) with the
// per-layer algorithm search under a workspace budget, in f32 or bf16.
//
// Algorithm search (cuda_backend.hpp): at the first call of each pass,
// cudnnFind*AlgorithmEx times every algorithm on the real buffers with a
// temporary workspace of the budget (halved until it can be allocated); the
// results come sorted by time and the first that succeeded and fits the budget
// is kept. FP32 mode searches with CUDNN_FMA_MATH (no TF32 tensor cores); TF32
// mode with CUDNN_DEFAULT_MATH; bf16 with CUDNN_TENSOR_OP_MATH. The search
// overwrites the pass's output, which the real call then overwrites again.
//
// bf16 (KernelExec::precision; cuDNN's BFLOAT16 configuration: x, w, y bf16,
// the convolution descriptor's compute type CUDNN_DATA_FLOAT, so products
// accumulate in f32). The caller's x, y, dx, dy stay f32 NCHW and w, dw, b,
// db the arena's f32; per call, x and dy are cast into the context's shared
// bf16 scratch (cuda_common.hpp) and w into the kernel's own bf16 copy
// (forward casts it every call; backward reuses forward's copy for the same
// pointer, Bf16Weights); cuDNN writes y, dx, dw in bf16 into the scratch and
// they are widened into the caller's f32 buffers. The bias add and db run in
// f32 on the f32 y and dy, as in FP32 mode. The search runs on the bf16
// descriptors and buffers: the algorithms kept are those of the bf16 call.
// Each bf16 output is thus rounded once (relative 2^-9) before widening.
#include <algorithm>
#include <memory>
#include <string>

#include "core/log.hpp"
#include "layers/cuda/cuda_common.hpp"
#include "layers/cuda/cuda_kernels.hpp"

namespace dtrain::layers::cuda {
namespace {

const char* fwd_name(int a) {
  static const char* n[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                            "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return a >= 0 && a < 8 ? n[a] : "?";
}
const char* bwd_data_name(int a) {
  static const char* n[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                            "WINOGRAD_NONFUSED"};
  return a >= 0 && a < 6 ? n[a] : "?";
}
const char* bwd_filter_name(int a) {
  static const char* n[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                            "WINOGRAD_NONFUSED", "FFT_TILING"};
  return a >= 0 && a < 7 ? n[a] : "?";
}

std::string describe(const ConvDesc& d) {
  return detail::concat("[", d.n, ",", d.c, ",", d.h, ",", d.w, "]→", d.k, " ", d.kh, "x", d.kw,
                        " s", d.stride_h, " p", d.pad_h, d.groups > 1 ? " g" : "",
                        d.groups > 1 ? std::to_string(d.groups) : "",
                        d.exec.precision == DType::bf16 ? " bf16" : "");
}

// A temporary workspace of at most `budget` bytes for the search.
struct SearchWorkspace {
  void* p = nullptr;
  size_t bytes = 0;
  explicit SearchWorkspace(size_t budget) {
    for (size_t b = budget; b > 0; b /= 2)
      if (cudaMalloc(&p, b) == cudaSuccess) {
        bytes = b;
        return;
      }
    (void)cudaGetLastError();
    p = nullptr;
  }
  ~SearchWorkspace() {
    if (p != nullptr) cudaFree(p);
  }
};

// The first (fastest) successful result that fits the budget.
template <typename Perf>
ConvAlgoChoice pick(const Perf* perf, int count, size_t budget, cudnnMathType_t* math,
                    const char* (*name)(int), const char* pass, const ConvDesc& d) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > budget) continue;
    ConvAlgoChoice c;
    c.chosen = true;
    c.algo = static_cast<int>(perf[i].algo);
    c.name = name(c.algo);
    c.ms = perf[i].time;
    c.workspace_bytes = perf[i].memory;
    *math = perf[i].mathType;
    return c;
  }
  DT_FAIL("conv ", describe(d), ": no ", pass, " algorithm fits the workspace budget of ", budget,
          " bytes (", count, " tried)");
}

class CudaConv final : public ConvKernel {
 public:
  CudaConv(ContextPtr ctx, const ConvDesc& d)
      : ctx_(std::move(ctx)), d_(d), bf16_(d.exec.precision == DType::bf16),
        xn_(size_t(d.n) * d.c * d.h * d.w), yn_(size_t(d.n) * d.k * d.out_h() * d.out_w()),
        wn_(size_t(d.k) * (d.groups > 0 ? d.c / d.groups : d.c) * d.kh * d.kw),
        x_(d.n, d.c, d.h, d.w, data_type()), y_(d.n, d.k, d.out_h(), d.out_w(), data_type()),
        yf_(d.n, d.k, d.out_h(), d.out_w()), b_(1, d.k, 1, 1) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0 && d.k > 0, "conv: empty shape");
    DT_CHECK(d.groups > 0 && d.c % d.groups == 0 && d.k % d.groups == 0, "conv: C=", d.c,
             " and K=", d.k, " must be divisible by groups=", d.groups);
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "conv: kernel larger than padded input");
    DT_CHECK_CUDNN(cudnnCreateFilterDescriptor(&w_));
    DT_CHECK_CUDNN(cudnnSetFilter4dDescriptor(w_, data_type(), CUDNN_TENSOR_NCHW, d.k,
                                              d.c / d.groups, d.kh, d.kw));
    DT_CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&conv_));
    // The compute type: f32 in both modes (bf16 products accumulate in f32).
    DT_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(conv_, d.pad_h, d.pad_w, d.stride_h, d.stride_w,
                                                   1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    DT_CHECK_CUDNN(cudnnSetConvolutionGroupCount(conv_, d.groups));
    search_math_ = bf16_ ? CUDNN_TENSOR_OP_MATH : ctx_->options().tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    if (bf16_) w16_ = std::make_unique<Bf16Weights>(wn_);
    report_.desc = d;
    report_.activation_bytes_per_sample =
        (size_t(d.c) * d.h * d.w + size_t(d.k) * d.out_h() * d.out_w()) * sizeof(float);
    row_ = ctx_->add_report(report_);
  }

  ~CudaConv() override {
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyFilterDescriptor(w_);
  }

  // x [N,C,H,W], w [K,C/g,KH,KW], b [K] or nullptr → y [N,K,OH,OW] (all f32)
  void forward(const float* x, const float* w, const float* b, float* y) override {
    auto h = ctx_->cudnn();
    const void *xp = x, *wp = w;
    void* yp = y;
    Context::Bf16Parts s;
    if (bf16_) {  // x → bf16 scratch, w → the bf16 copy; y comes out in bf16 scratch
      s = ctx_->bf16_scratch({xn_, yn_});
      xp = to_bf16(x, s.p[0], xn_);
      wp = w16_->cast(w);
      yp = s.p[1];
    }
    if (!report_.forward.chosen) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int got = 0;
      {
        SearchWorkspace ws(ctx_->options().workspace_bytes);
        DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, search_math_));
        DT_CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(
            h, x_.d, xp, w_, wp, conv_, y_.d, yp, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, ws.p,
            ws.bytes));
      }
      report_.forward = pick(perf, got, ctx_->options().workspace_bytes, &fwd_math_, fwd_name,
                             "forward", d_);
      chose("forward", report_.forward);
    }
    DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, fwd_math_));
    const size_t wsb = report_.forward.workspace_bytes;
    DT_CHECK_CUDNN(cudnnConvolutionForward(
        h, &kOne, x_.d, xp, w_, wp, conv_,
        static_cast<cudnnConvolutionFwdAlgo_t>(report_.forward.algo), ctx_->workspace(wsb), wsb,
        &kZero, y_.d, yp));
    if (bf16_) from_bf16(s.p[1], y, yn_);
    if (d_.bias && b != nullptr) DT_CHECK_CUDNN(cudnnAddTensor(h, &kOne, b_.d, b, &kOne, yf_.d, y));
  }

  // dy [N,K,OH,OW] → dx [N,C,H,W], dw [K,C/g,KH,KW], db [K] (each optional, overwritten; all f32)
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    auto h = ctx_->cudnn();
    const size_t budget = ctx_->options().workspace_bytes;
    if (db != nullptr && d_.bias)
      DT_CHECK_CUDNN(cudnnConvolutionBackwardBias(h, &kOne, yf_.d, dy, &kZero, b_.d, db));
    const void *xp = x, *wp = w, *dyp = dy;
    void *dxp = dx, *dwp = dw;
    Context::Bf16Parts s;
    if (bf16_ && (dx != nullptr || dw != nullptr)) {
      // parts: dy, x (for dw), dw, dx — each only when its pass runs
      s = ctx_->bf16_scratch({yn_, dw ? xn_ : 0, dw ? wn_ : 0, dx ? xn_ : 0});
      dyp = to_bf16(dy, s.p[0], yn_);
      if (dw != nullptr) {
        xp = to_bf16(x, s.p[1], xn_);
        dwp = s.p[2];
      }
      if (dx != nullptr) {
        wp = w16_->of(w);
        dxp = s.p[3];
      }
    }
    if (dw != nullptr) {
      if (!report_.backward_filter.chosen) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int got = 0;
        {
          SearchWorkspace ws(budget);
          DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, search_math_));
          DT_CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              h, x_.d, xp, y_.d, dyp, conv_, w_, dwp, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
              perf, ws.p, ws.bytes));
        }
        report_.backward_filter =
            pick(perf, got, budget, &filter_math_, bwd_filter_name, "backward-filter", d_);
        chose("backward-filter", report_.backward_filter);
      }
      DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, filter_math_));
      const size_t wsb = report_.backward_filter.workspace_bytes;
      DT_CHECK_CUDNN(cudnnConvolutionBackwardFilter(
          h, &kOne, x_.d, xp, y_.d, dyp, conv_,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(report_.backward_filter.algo),
          ctx_->workspace(wsb), wsb, &kZero, w_, dwp));
      if (bf16_) from_bf16(s.p[2], dw, wn_);
    }
    if (dx != nullptr) {
      if (!report_.backward_data.chosen) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int got = 0;
        {
          SearchWorkspace ws(budget);
          DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, search_math_));
          DT_CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
              h, w_, wp, y_.d, dyp, conv_, x_.d, dxp, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
              perf, ws.p, ws.bytes));
        }
        report_.backward_data =
            pick(perf, got, budget, &data_math_, bwd_data_name, "backward-data", d_);
        chose("backward-data", report_.backward_data);
      }
      DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, data_math_));
      const size_t wsb = report_.backward_data.workspace_bytes;
      DT_CHECK_CUDNN(cudnnConvolutionBackwardData(
          h, &kOne, w_, wp, y_.d, dyp, conv_,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(report_.backward_data.algo),
          ctx_->workspace(wsb), wsb, &kZero, x_.d, dxp));
      if (bf16_) from_bf16(s.p[3], dx, xn_);
    }
  }

 private:
  cudnnDataType_t data_type() const { return bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }

  void chose(const char* pass, const ConvAlgoChoice& c) {
    ctx_->set_report(row_, report_);
    if (ctx_->options().log_algorithms)
      log::info("dtrain: cuda conv ", describe(d_), " ", pass, ": ", c.name, " (", c.ms,
                " ms, workspace ", double(c.workspace_bytes) / double(1 << 20), " MiB of ",
                double(ctx_->options().workspace_bytes) / double(1 << 20), ")");
  }

  ContextPtr ctx_;
  ConvDesc d_;
  bool bf16_;
  size_t xn_, yn_, wn_;  // elements of x, y, w
  TensorDesc x_, y_;     // x and y as cuDNN computes on them (f32, or bf16 in bf16 mode)
  TensorDesc yf_, b_;    // the f32 y (and dy) for the bias and db, and the bias [1, K, 1, 1]
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnMathType_t search_math_ = CUDNN_FMA_MATH, fwd_math_ = CUDNN_FMA_MATH,
                  filter_math_ = CUDNN_FMA_MATH, data_math_ = CUDNN_FMA_MATH;
  std::unique_ptr<Bf16Weights> w16_;  // bf16 mode: the bf16 copy of w
  ConvLayerReport report_;
  size_t row_ = 0;
};

}  // namespace

std::unique_ptr<ConvKernel> make_conv(ContextPtr ctx, const ConvDesc& d) {
  return std::make_unique<CudaConv>(std::move(ctx), d);
}

}  // namespace dtrain::layers::cuda
