// layers/cpu/onednn_linear.cpp — fully connected layer on oneDNN's matmul
// (its brgemm kernels: the same ISA dispatch as the convolutions, whatever
// core type OPENBLAS_CORETYPE forces on the BLAS), with bias and a fused
// ReLU as the forward's epilogue; f32 or bf16.
//
// y = x·Wᵀ + b with x [N, IN], W [OUT, IN] (torch layout, the arena's f32),
// b [OUT], y [N, OUT], all row-major ("ab"). The three products:
//   forward        y  [N, OUT] = x [N, IN] · Wᵀ      (Wᵀ: W read as "ba")
//   backward-data  dx [N, IN]  = dy [N, OUT] · W
//   backward-wts   dW [OUT, IN] = dyᵀ · x            (dyᵀ: dy read as "ba")
// For layers of ≥ 2^20 weights the two backward products run on oneDNN's
// inner product (its jit gemm) on the same row-major operands, the others on
// the matmul: see backward_on_inner_product.
// In f32 every operand is the caller's memory, read in place (no reorder). In
// bf16, x and dx are bf16; W is read from the Net's weight mirror when the
// forward is given it (use_weights_bf16), else converted to a bf16 copy by
// the forward (and reused by backward for the same pointer); dW and db stay f32; y is bf16,
// or f32 when the layer writes the net's output (KernelExec::float_out: the
// logits), and then dy is converted to bf16 for the two backward products.
// db = Σ_n dy in f32. The fused ReLU (KernelExec::relu) is a post-op; the
// Net masks dy before backward.
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/onednn_internal.hpp"
#include "layers/tensor.hpp"

namespace dtrain::layers::onednn {
namespace {

using dnnl::memory;

// Whether the two backward products run on oneDNN's inner product instead of
// its matmul: for a layer whose W holds at least 2^20 elements (4 MiB in f32,
// past a core's L2), in f32, and in bf16 where the CPU has no AMX. There the
// matmul's brgemm repacks the wide W (or dW) block by block, and the inner
// product's jit gemm streams it: AlexNet-OWT's fc6 (4096×9216) at minibatch 16,
// 2 threads, on a Xeon with AVX-512 (2026-12-06, `dtrain bench compute
// --profile`): backward 37.7 → 22.0 ms in f32, 31–32 → 22–23 ms in bf16; fc7
// 14.3 → 10.7 and ResNet-50's fc (1000×2048) 1.7–2.3 → 1.4–1.5 ms in f32.
// LeNet-5's small layers stay on the matmul (1 thread: a step took 4.2 ms
// against 3.2 with the inner product), and so does bf16 with AMX, where the
// matmul runs on AMX tiles (`brg:avx512_core_amx_bf16`).
bool backward_on_inner_product(const LinearDesc& d) {
  if (static_cast<double>(d.in) * d.out < static_cast<double>(1 << 20)) return false;
  if (d.exec.precision != DType::bf16) return true;
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa != dnnl::cpu_isa::avx512_core_amx;
}

class LinearOneDnn final : public LinearKernel {
 public:
  LinearOneDnn(CtxPtr ctx, const LinearDesc& d)
      : ctx_(std::move(ctx)), d_(d), threads_(team_for_flops(2.0 * d.n * d.in * d.out)) {
    ThreadScope team(threads_);
    const auto& eng = ctx_->eng;
    const dt t = dtype_of(d.exec.precision);
    bf16_ = d.exec.precision == DType::bf16;
    in_fmt_ = Format::plain(d.exec.precision);
    out_fmt_ = Format::plain(d.exec.float_out ? DType::f32 : d.exec.precision);
    const memory::dim n = d.n, in = d.in, out = d.out;
    const dt ty = dtype_of(out_fmt_.dtype);

    const memory::desc x_md({n, in}, t, tag::ab), wt_md({in, out}, t, tag::ba), y_md({n, out}, ty, tag::ab);
    const memory::desc b_md({1, out}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc fpd(d.bias ? dnnl::matmul::desc(x_md, wt_md, b_md, y_md)
                                            : dnnl::matmul::desc(x_md, wt_md, y_md),
                                     relu_attr(d.exec.relu), eng);
    fwd_ = dnnl::matmul(fpd);
    const memory::desc dy_md({n, out}, t, tag::ab), w_md({out, in}, t, tag::ab), dx_md({n, in}, t, tag::ab);
    const memory::desc dyt_md({out, n}, t, tag::ba), dw_md({out, in}, dt::f32, tag::ab);
    if (backward_on_inner_product(d)) {
      // The same row-major operands as oneDNN's inner product (nc, oi): its
      // backward runs oneDNN's jit gemm, which streams a wide W once where
      // the matmul's brgemm repacks it (see backward_on_inner_product).
      const auto fwd_hint = dnnl::inner_product_forward::primitive_desc(
          dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, x_md, w_md, dy_md), eng);
      const dnnl::inner_product_backward_data::primitive_desc dpd(
          dnnl::inner_product_backward_data::desc(dx_md, w_md, dy_md), eng, fwd_hint);
      const dnnl::inner_product_backward_weights::primitive_desc wpd(
          dnnl::inner_product_backward_weights::desc(x_md, dw_md, dy_md), eng, fwd_hint);
      bwd_data_ = dnnl::inner_product_backward_data(dpd);
      bwd_weights_ = dnnl::inner_product_backward_weights(wpd);
      ip_backward_ = true;
      impl_ = fpd.impl_info_str() + std::string("; backward on inner product ") + dpd.impl_info_str() + ", " +
              wpd.impl_info_str();
    } else {
      const dnnl::matmul::primitive_desc dpd(dnnl::matmul::desc(dy_md, w_md, dx_md), eng);
      const dnnl::matmul::primitive_desc wpd(dnnl::matmul::desc(dyt_md, x_md, dw_md), eng);
      bwd_data_ = dnnl::matmul(dpd);
      bwd_weights_ = dnnl::matmul(wpd);
      impl_ = fpd.impl_info_str() + std::string("; backward on matmul ") + dpd.impl_info_str() + ", " +
              wpd.impl_info_str();
    }
    impl_ = "matmul " + impl_;

    x_ = user_memory(x_md, eng);
    y_ = user_memory(y_md, eng);
    b_ = user_memory(b_md, eng);
    dx_ = user_memory(dx_md, eng);
    dw_ = user_memory(dw_md, eng);
    dyt_ = user_memory(dyt_md, eng);
    dy_ = user_memory(dy_md, eng);
    if (bf16_) {  // the bf16 copy of W, read as W and as Wᵀ
      // Our own buffer: a oneDNN-allocated one is freed by the first
      // set_data_handle that points the memory at the mirror.
      copy_ = Tensor(Shape::vec(static_cast<int64_t>((w_md.get_size() + sizeof(float) - 1) / sizeof(float))));
      w_ = memory(w_md, eng, copy_.data());
      wt_ = memory(wt_md, eng, copy_.data());
      const memory::desc w_f32({out, in}, dt::f32, tag::ab);
      w_user_ = user_memory(w_f32, eng);
      to_bf16_ = dnnl::reorder(w_user_, w_);
      if (ty != t) {  // dy comes as f32 (the logits' gradient): a bf16 copy for the products
        const memory::desc dy_f32({n, out}, dt::f32, tag::ab);
        dy_user_ = user_memory(dy_f32, eng);
        dy_copy_ = memory(dy_md, eng);
        dy_to_bf16_ = dnnl::reorder(dy_user_, dy_copy_);
      }
    } else {
      w_ = user_memory(w_md, eng);
      wt_ = user_memory(wt_md, eng);
    }
  }

  void use_weights_bf16(const uint16_t* w16) override { w16_ = bf16_ ? w16 : nullptr; }

  // "matmul <forward's impl>; backward on inner product|matmul <data's impl>,
  // <weights' impl>".
  std::string impl() const override { return impl_; }

  Format src_format() const override { return in_fmt_; }
  Format dst_format() const override { return out_fmt_; }

  // x [N,IN], w [OUT,IN], b [OUT] or nullptr → y [N,OUT]
  void forward(const float* x, const float* w, const float* b, float* y) override {
    ThreadScope team(threads_);
    auto& s = ctx_->strm;
    set_weights(w);
    x_.set_data_handle(handle(x));
    y_.set_data_handle(y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_}, {DNNL_ARG_WEIGHTS, wt_}, {DNNL_ARG_DST, y_}};
    if (d_.bias) {
      DT_CHECK(b != nullptr, "linear: bias expected");
      b_.set_data_handle(handle(b));
      args.emplace(DNNL_ARG_BIAS, b_);
    }
    fwd_.execute(s, args);
    s.wait();
  }

  // dy [N,OUT] → dx [N,IN] (nullptr: skipped), dw [OUT,IN], db [OUT]
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* db) override {
    ThreadScope team(threads_);
    auto& s = ctx_->strm;
    const void* dyp = dy;
    if (dy_copy_) {
      dy_user_.set_data_handle(handle(dy));
      dy_to_bf16_.execute(s, dy_user_, dy_copy_);
      dyp = dy_copy_.get_data_handle();
    }
    if (dx != nullptr) {
      if (w != weights_of_) set_weights(w);
      dy_.set_data_handle(const_cast<void*>(dyp));
      dx_.set_data_handle(dx);
      if (ip_backward_)
        bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DIFF_SRC, dx_}});
      else
        bwd_data_.execute(s, {{DNNL_ARG_SRC, dy_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, dx_}});
    }
    if (dw != nullptr) {
      (ip_backward_ ? dy_ : dyt_).set_data_handle(const_cast<void*>(dyp));  // dy as the product reads it
      x_.set_data_handle(handle(x));
      dw_.set_data_handle(dw);
      if (ip_backward_)
        bwd_weights_.execute(s, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_WEIGHTS, dw_}});
      else
        bwd_weights_.execute(s, {{DNNL_ARG_SRC, dyt_}, {DNNL_ARG_WEIGHTS, x_}, {DNNL_ARG_DST, dw_}});
    }
    s.wait();
    if (d_.bias && db != nullptr) bias_grad(dy, db);
  }

 private:
  // W (f32, the arena's) as the products read it: in place, the mirror's
  // bf16 bits of it, or a bf16 copy.
  void set_weights(const float* w) {
    if (bf16_ && w16_ != nullptr) {
      w_.set_data_handle(const_cast<uint16_t*>(w16_));
      wt_.set_data_handle(const_cast<uint16_t*>(w16_));
    } else if (bf16_) {
      w_.set_data_handle(copy_.data());
      wt_.set_data_handle(copy_.data());
      w_user_.set_data_handle(handle(w));
      to_bf16_.execute(ctx_->strm, w_user_, w_);
    } else {
      w_.set_data_handle(handle(w));
      wt_.set_data_handle(handle(w));
    }
    weights_of_ = w;
  }

  // db [OUT] = Σ_n dy[n, :] (dy in the output's format).
  void bias_grad(const float* dy, float* db) const {
    const int n = d_.n, out = d_.out;
    std::fill(db, db + out, 0.0f);
    if (out_fmt_.dtype == DType::f32) {
      for (int i = 0; i < n; ++i) {
        const float* row = dy + static_cast<size_t>(i) * out;
#pragma omp simd
        for (int o = 0; o < out; ++o) db[o] += row[o];
      }
      return;
    }
    const auto* d16 = reinterpret_cast<const uint16_t*>(dy);
    for (int i = 0; i < n; ++i) {
      const uint16_t* row = d16 + static_cast<size_t>(i) * out;
#pragma omp simd
      for (int o = 0; o < out; ++o) db[o] += from_bf16(row[o]);
    }
  }

  CtxPtr ctx_;
  LinearDesc d_;
  int threads_;  // the team of its primitives (team_for_flops)
  bool bf16_ = false;
  Format in_fmt_, out_fmt_;
  dnnl::matmul fwd_;
  dnnl::primitive bwd_data_, bwd_weights_;  // matmul, or inner product (ip_backward_)
  bool ip_backward_ = false;
  std::string impl_;  // impl(): the three products' implementations, named at construction
  memory x_, y_, b_, w_, wt_, dx_, dw_, dy_, dyt_;
  memory w_user_, dy_user_, dy_copy_;  // bf16: the f32 operands and the copies
  dnnl::reorder to_bf16_, dy_to_bf16_;
  const float* weights_of_ = nullptr;  // the W that w_/wt_ hold
  Tensor copy_;                        // bf16: the kernel's own copy of W (its bytes)
  const uint16_t* w16_ = nullptr;      // bf16: the mirror of the next forward's W, or nullptr
};

}  // namespace

std::unique_ptr<LinearKernel> make_linear(CtxPtr ctx, const LinearDesc& d) {
  return std::make_unique<LinearOneDnn>(std::move(ctx), d);
}

}  // namespace dtrain::layers::onednn
