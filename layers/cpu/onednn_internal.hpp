// layers/cpu/onednn_internal.hpp — shared pieces of the oneDNN CPU backend
// (private to layers/cpu/onednn_*.cpp).
//
// Ctx holds the one dnnl::engine(cpu, 0) and the dnnl::stream of a backend;
// every kernel keeps a shared_ptr to it, so kernels may outlive the backend.
//
// Port is one tensor argument of a primitive: the caller's plain buffer
// (NCHW / OIHW, a dnnl::memory whose handle is set on every call) and the
// layout the primitive wants. When the two differ, Port owns a buffer in the
// primitive's layout (allocated once) and a reorder primitive (created once)
// in the needed direction; when they agree, the primitive works on the
// caller's buffer directly.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>

#include "layers/backend.hpp"
#include "layers/format.hpp"

namespace dtrain::layers::onednn {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Ctx {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
};
using CtxPtr = std::shared_ptr<Ctx>;

// A plain f32 memory descriptor of the given dims and tag.
inline dnnl::memory::desc plain_md(const dnnl::memory::dims& dims, tag t) {
  return dnnl::memory::desc(dims, dt::f32, t);
}

inline dt dtype_of(DType t) { return t == DType::bf16 ? dt::bf16 : dt::f32; }

// The descriptor of an activation [N, C, H, W] stored in format f (format.hpp).
dnnl::memory::desc act_md(const dnnl::memory::dims& nchw, const Format& f);
// The Format a 4-D descriptor is, if it is one of ours (nchw, nChw8c,
// nChw16c in f32 or bf16); false otherwise.
bool format_of(const dnnl::memory::desc& md, Format* f);
// A primitive attribute that applies a ReLU to the output (post-op), or none.
dnnl::primitive_attr relu_attr(bool relu);
// oneDNN's implementation name is one of its reference (scalar) kernels.
bool is_ref_impl(const char* impl_info);
// oneDNN's implementation name is one of its JIT-generated kernels ("jit:avx2",
// "jit_bf16:avx512_core_bf16", …); scalar fallbacks such as "simple_nchw" are not.
bool is_jit_impl(const char* impl_info);

// Threads that pay for themselves. A parallel region costs a fork and a join
// of the OpenMP team (a few µs when the team is hot, a scheduler slice when a
// team thread was descheduled), so a kernel whose work per call is small runs
// on one thread: below kSmallFlops floating-point operations (≈ 10–20 µs on
// one AVX-512 core; LeNet-5's fc2 and fc3, 1.3 and 0.1 MFLOP at minibatch 64)
// or, for memory-bound kernels, below kSmallElements elements (the size from
// which the elementwise loops of onednn.cpp go parallel).
inline constexpr double kSmallFlops = 2e6;
inline constexpr double kSmallElements = 1 << 15;
// The team of a kernel with `flops` of compute or `elements` of data per call.
int team_for_flops(double flops);
int team_for_elements(double elements);
// Sets the OpenMP team size for the scope (oneDNN reads it when it creates a
// primitive — its JIT kernels split their work for that many threads — and
// when it runs one), and restores it. Kernels make and run their primitives
// inside one.
class ThreadScope {
 public:
  explicit ThreadScope(int threads);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int prev_ = 0;
};

// A memory object that wraps caller storage; the handle is set per call.
inline dnnl::memory user_memory(const dnnl::memory::desc& md, const dnnl::engine& eng) {
  return dnnl::memory(md, eng, DNNL_MEMORY_NONE);
}

inline void* handle(const float* p) { return const_cast<float*>(p); }

class Port {
 public:
  Port() = default;
  // user_md: the caller's plain layout; prim_md: what the primitive expects.
  // input: data flows caller → primitive (else primitive → caller).
  Port(const dnnl::memory::desc& user_md, const dnnl::memory::desc& prim_md, const Ctx& ctx,
       bool input)
      : user_(user_memory(user_md, ctx.eng)), reorder_(user_md != prim_md) {
    if (reorder_) {
      prim_ = dnnl::memory(prim_md, ctx.eng);
      conv_ = input ? dnnl::reorder(user_, prim_) : dnnl::reorder(prim_, user_);
    } else {
      prim_ = user_;
    }
  }
  bool reorders() const { return reorder_; }
  const dnnl::memory::desc prim_desc() const { return prim_.get_desc(); }

  // An input: point at p, reorder into the primitive's layout when needed.
  dnnl::memory& in(const float* p, dnnl::stream& s) {
    user_.set_data_handle(handle(p));
    if (reorder_) conv_.execute(s, user_, prim_);
    return prim_;
  }
  // An output: the primitive writes prim(); finish() copies it to p.
  dnnl::memory& out(float* p) {
    user_.set_data_handle(p);
    return prim_;
  }
  void finish(dnnl::stream& s) {
    if (reorder_) conv_.execute(s, prim_, user_);
  }
  // The primitive-layout memory as last filled (for reuse across calls).
  dnnl::memory& prim() { return prim_; }

 private:
  dnnl::memory user_, prim_;
  dnnl::reorder conv_;
  bool reorder_ = false;
};

std::unique_ptr<ConvKernel> make_conv(CtxPtr ctx, const ConvDesc& d);
std::unique_ptr<PoolKernel> make_pool(CtxPtr ctx, const PoolDesc& d);
std::unique_ptr<LrnKernel> make_lrn(CtxPtr ctx, const LrnDesc& d);
std::unique_ptr<BatchNormKernel> make_batch_norm(CtxPtr ctx, const BatchNormDesc& d);
std::unique_ptr<LinearKernel> make_linear(CtxPtr ctx, const LinearDesc& d);

}  // namespace dtrain::layers::onednn
