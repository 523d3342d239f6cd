// layers/cuda/cuda_conv.cpp — convolution through cuDNN (forward, backward
// data, backward filter, groups via cudnnSetConvolutionGroupCount) with the
// per-layer algorithm search under a workspace budget, and the linear layer
// through cuBLAS.
//
// Algorithm search (cuda_backend.hpp): at the first call of each pass,
// cudnnFind*AlgorithmEx times every algorithm on the real buffers with a
// temporary workspace of the budget (halved until it can be allocated); the
// results come sorted by time and the first that succeeded and fits the budget
// is kept. FP32 mode searches with CUDNN_FMA_MATH (no TF32 tensor cores); TF32
// mode with CUDNN_DEFAULT_MATH. The search overwrites the pass's output, which
// the real call then overwrites again.
//
// Linear, row-major through column-major cuBLAS (a row-major [R, C] matrix is
// the column-major [C, R] one, its transpose):
//   y[N,OUT]  = x·Wᵀ:  yᵀ  = op(W_cm)ᵀ·xᵀ → sgemm(T, N, OUT, N, IN, w, IN, x, IN, y, OUT)
//   dx[N,IN]  = dy·W:  dxᵀ = Wᵀ·dyᵀ       → sgemm(N, N, IN, N, OUT, w, IN, dy, OUT, dx, IN)
//   dw[OUT,IN] = dyᵀ·x: dwᵀ = xᵀ·dy       → sgemm(N, T, IN, OUT, N, x, IN, dy, OUT, dw, IN)
//   b and db with small kernels (cuda_kernels.cu).
#include <algorithm>
#include <string>

#include "core/log.hpp"
#include "layers/cuda/cuda_common.hpp"
#include "layers/cuda/cuda_kernels.hpp"

namespace dtrain::layers::cuda {
namespace {

const float kOne = 1.0f, kZero = 0.0f;

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
                        d.groups > 1 ? std::to_string(d.groups) : "");
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
      : ctx_(std::move(ctx)), d_(d), x_(d.n, d.c, d.h, d.w), y_(d.n, d.k, d.out_h(), d.out_w()),
        b_(1, d.k, 1, 1) {
    DT_CHECK(d.n > 0 && d.c > 0 && d.h > 0 && d.w > 0 && d.k > 0, "conv: empty shape");
    DT_CHECK(d.groups > 0 && d.c % d.groups == 0 && d.k % d.groups == 0, "conv: C=", d.c,
             " and K=", d.k, " must be divisible by groups=", d.groups);
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, "conv: kernel larger than padded input");
    DT_CHECK_CUDNN(cudnnCreateFilterDescriptor(&w_));
    DT_CHECK_CUDNN(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d.k,
                                              d.c / d.groups, d.kh, d.kw));
    DT_CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&conv_));
    DT_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(conv_, d.pad_h, d.pad_w, d.stride_h, d.stride_w,
                                                   1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    DT_CHECK_CUDNN(cudnnSetConvolutionGroupCount(conv_, d.groups));
    search_math_ = ctx_->options().tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    report_.desc = d;
    report_.activation_bytes_per_sample =
        (size_t(d.c) * d.h * d.w + size_t(d.k) * d.out_h() * d.out_w()) * sizeof(float);
    row_ = ctx_->add_report(report_);
  }

  ~CudaConv() override {
    cudnnDestroyConvolutionDescriptor(conv_);
    cudnnDestroyFilterDescriptor(w_);
  }

  // x [N,C,H,W], w [K,C/g,KH,KW], b [K] or nullptr → y [N,K,OH,OW]
  void forward(const float* x, const float* w, const float* b, float* y) override {
    auto h = ctx_->cudnn();
    if (!report_.forward.chosen) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int got = 0;
      {
        SearchWorkspace ws(ctx_->options().workspace_bytes);
        DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, search_math_));
        DT_CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(
            h, x_.d, x, w_, w, conv_, y_.d, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, ws.p,
            ws.bytes));
      }
      report_.forward = pick(perf, got, ctx_->options().workspace_bytes, &fwd_math_, fwd_name,
                             "forward", d_);
      chose("forward", report_.forward);
    }
    DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, fwd_math_));
    const size_t wsb = report_.forward.workspace_bytes;
    DT_CHECK_CUDNN(cudnnConvolutionForward(
        h, &kOne, x_.d, x, w_, w, conv_,
        static_cast<cudnnConvolutionFwdAlgo_t>(report_.forward.algo), ctx_->workspace(wsb), wsb,
        &kZero, y_.d, y));
    if (d_.bias && b != nullptr) DT_CHECK_CUDNN(cudnnAddTensor(h, &kOne, b_.d, b, &kOne, y_.d, y));
  }

  // dy [N,K,OH,OW] → dx [N,C,H,W], dw [K,C/g,KH,KW], db [K] (each optional, overwritten)
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    auto h = ctx_->cudnn();
    const size_t budget = ctx_->options().workspace_bytes;
    if (db != nullptr && d_.bias)
      DT_CHECK_CUDNN(cudnnConvolutionBackwardBias(h, &kOne, y_.d, dy, &kZero, b_.d, db));
    if (dw != nullptr) {
      if (!report_.backward_filter.chosen) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int got = 0;
        {
          SearchWorkspace ws(budget);
          DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, search_math_));
          DT_CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              h, x_.d, x, y_.d, dy, conv_, w_, dw, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
              perf, ws.p, ws.bytes));
        }
        report_.backward_filter =
            pick(perf, got, budget, &filter_math_, bwd_filter_name, "backward-filter", d_);
        chose("backward-filter", report_.backward_filter);
      }
      DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, filter_math_));
      const size_t wsb = report_.backward_filter.workspace_bytes;
      DT_CHECK_CUDNN(cudnnConvolutionBackwardFilter(
          h, &kOne, x_.d, x, y_.d, dy, conv_,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(report_.backward_filter.algo),
          ctx_->workspace(wsb), wsb, &kZero, w_, dw));
    }
    if (dx != nullptr) {
      if (!report_.backward_data.chosen) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int got = 0;
        {
          SearchWorkspace ws(budget);
          DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, search_math_));
          DT_CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
              h, w_, w, y_.d, dy, conv_, x_.d, dx, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
              perf, ws.p, ws.bytes));
        }
        report_.backward_data =
            pick(perf, got, budget, &data_math_, bwd_data_name, "backward-data", d_);
        chose("backward-data", report_.backward_data);
      }
      DT_CHECK_CUDNN(cudnnSetConvolutionMathType(conv_, data_math_));
      const size_t wsb = report_.backward_data.workspace_bytes;
      DT_CHECK_CUDNN(cudnnConvolutionBackwardData(
          h, &kOne, w_, w, y_.d, dy, conv_,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(report_.backward_data.algo),
          ctx_->workspace(wsb), wsb, &kZero, x_.d, dx));
    }
  }

 private:
  void chose(const char* pass, const ConvAlgoChoice& c) {
    ctx_->set_report(row_, report_);
    if (ctx_->options().log_algorithms)
      log::info("dtrain: cuda conv ", describe(d_), " ", pass, ": ", c.name, " (", c.ms,
                " ms, workspace ", double(c.workspace_bytes) / double(1 << 20), " MiB of ",
                double(ctx_->options().workspace_bytes) / double(1 << 20), ")");
  }

  ContextPtr ctx_;
  ConvDesc d_;
  TensorDesc x_, y_, b_;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnMathType_t search_math_ = CUDNN_FMA_MATH, fwd_math_ = CUDNN_FMA_MATH,
                  filter_math_ = CUDNN_FMA_MATH, data_math_ = CUDNN_FMA_MATH;
  ConvLayerReport report_;
  size_t row_ = 0;
};

class CudaLinear final : public LinearKernel {
 public:
  CudaLinear(ContextPtr ctx, const LinearDesc& d) : ctx_(std::move(ctx)), d_(d) {
    DT_CHECK(d.n > 0 && d.in > 0 && d.out > 0, "linear: empty shape n=", d.n, " in=", d.in,
             " out=", d.out);
  }

  // x [N,IN], w [OUT,IN], b [OUT] or nullptr → y [N,OUT]
  void forward(const float* x, const float* w, const float* b, float* y) override {
    DT_CHECK_CUBLAS(cublasSgemm(ctx_->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, d_.out, d_.n, d_.in,
                                &kOne, w, d_.in, x, d_.in, &kZero, y, d_.out));
    if (d_.bias && b != nullptr) add_row_bias(y, b, d_.n, d_.out);
  }

  // dy [N,OUT] → dx [N,IN], dw [OUT,IN], db [OUT] (each optional, overwritten)
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    if (dx != nullptr)
      DT_CHECK_CUBLAS(cublasSgemm(ctx_->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, d_.in, d_.n, d_.out,
                                  &kOne, w, d_.in, dy, d_.out, &kZero, dx, d_.in));
    if (dw != nullptr)
      DT_CHECK_CUBLAS(cublasSgemm(ctx_->cublas(), CUBLAS_OP_N, CUBLAS_OP_T, d_.in, d_.out, d_.n,
                                  &kOne, x, d_.in, dy, d_.out, &kZero, dw, d_.in));
    if (db != nullptr && d_.bias) row_bias_grad(dy, db, d_.n, d_.out);
  }

 private:
  ContextPtr ctx_;
  LinearDesc d_;
};

}  // namespace

std::unique_ptr<ConvKernel> make_conv(ContextPtr ctx, const ConvDesc& d) {
  return std::make_unique<CudaConv>(std::move(ctx), d);
}
std::unique_ptr<LinearKernel> make_linear(ContextPtr ctx, const LinearDesc& d) {
  return std::make_unique<CudaLinear>(std::move(ctx), d);
}

}  // namespace dtrain::layers::cuda
