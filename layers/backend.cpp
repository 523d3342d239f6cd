// layers/backend.cpp — the defaults of the backend contract for host backends
// (transfers as memmove, plain aligned host memory). The factory is
// layers/backend_list.cpp.
#include "layers/backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "core/error.hpp"

namespace dtrain::layers {

void Backend::upload(const void* host, void* dst, size_t bytes) {
  if (bytes > 0 && host != dst) std::memmove(dst, host, bytes);
}

void Backend::download(const void* src, void* host, size_t bytes) {
  if (bytes > 0 && src != host) std::memmove(host, src, bytes);
}

void* Backend::host_alloc(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  DT_CHECK(p != nullptr, "cannot allocate ", bytes, " bytes of host memory");
  return p;
}

void Backend::host_free(void* p) { std::free(p); }

void require_plain_exec(const KernelExec& e, const std::string& backend, const char* kernel, bool allow_bf16) {
  const bool precision_ok = e.precision == DType::f32 || (allow_bf16 && e.precision == DType::bf16);
  DT_CHECK(precision_ok && !e.any_format && !e.relu && e.src == Format{}, "the ", backend, " backend's ", kernel,
           " kernel takes f32 nchw", allow_bf16 ? " (computing in f32 or bf16)" : "",
           " without a fused ReLU; asked for ", dtype_name(e.precision), e.any_format ? " in any format" : "",
           e.relu ? " with a ReLU" : "", " from ", e.src.str());
}

std::string Backend::precision_unsupported(DType t) const {
  if (t == DType::f32) return "";
  return "the " + name() + " backend computes in fp32 only (bf16 needs the cpu backend on a CPU with AVX512-BF16, "
         "or the cuda backend on a GPU of compute capability 8.0 or later)";
}

void Backend::sgd_update_segments(float* param, const float* grad, float* mom, const SgdSegment* segs,
                                  size_t n_segs, float lr, float momentum, uint16_t* param_bf16) {
  DT_CHECK(param_bf16 == nullptr || !discrete_memory(), "the ", name(), " backend keeps no bf16 weight mirror");
  for (size_t i = 0; i < n_segs; ++i) {
    const SgdSegment& s = segs[i];
    sgd_update(param + s.begin, grad + s.begin, mom ? mom + s.begin : nullptr, s.end - s.begin, lr, momentum,
               s.weight_decay);
    if (param_bf16 != nullptr)
      for (size_t k = s.begin; k < s.end; ++k) param_bf16[k] = bf16_bits(param[k]);
  }
}

void Backend::sgd_update_segments_into(const float* param_in, const float* mom_in, float* param_out, float* mom_out,
                                       const float* grad, const SgdSegment* segs, size_t n_segs, float lr,
                                       float momentum) {
  DT_CHECK(!discrete_memory(), "the ", name(), " backend updates its own memory only in place");
  DT_CHECK((mom_in == nullptr) == (mom_out == nullptr), "sgd_update_segments_into: a momentum input without an output",
           " or the other way round");
  for (size_t i = 0; i < n_segs; ++i) {
    const size_t b = segs[i].begin, n = segs[i].end - segs[i].begin;
    if (param_out != param_in) std::copy_n(param_in + b, n, param_out + b);
    if (mom_out != mom_in) std::copy_n(mom_in + b, n, mom_out + b);
  }
  sgd_update_segments(param_out, grad, mom_out, segs, n_segs, lr, momentum);
}

namespace {
// The defaults below take what every backend has: plain float32 tensors.
size_t plain_count(const char* fn, std::initializer_list<const Tensor*> ts) {
  const Tensor& first = **ts.begin();
  for (const Tensor* t : ts) {
    DT_CHECK(t->format().is_plain_f32(), "Backend::", fn, ": this backend takes f32 nchw tensors, not ",
             t->format().str());
    DT_CHECK(t->shape() == first.shape(), "Backend::", fn, ": shapes ", first.shape().str(), " and ",
             t->shape().str(), " differ");
  }
  return static_cast<size_t>(first.numel());
}
float* ptr(const Tensor& t) { return const_cast<float*>(t.data()); }
}  // namespace

void Backend::relu(const Tensor& x, Tensor& y) { relu_forward(x.data(), y.data(), plain_count("relu", {&x, &y})); }
void Backend::relu_grad(const Tensor& y, const Tensor& dy, Tensor& dx) {
  relu_backward(y.data(), dy.data(), dx.data(), plain_count("relu_grad", {&y, &dy, &dx}));
}
void Backend::sum(const Tensor& a, const Tensor& b, Tensor& y, bool relu) {
  const size_t n = plain_count("sum", {&a, &b, &y});
  add(a.data(), b.data(), y.data(), n);
  if (relu) relu_forward(y.data(), y.data(), n);
}
void Backend::accumulate_into(const Tensor& x, Tensor& y) {
  accumulate(x.data(), y.data(), plain_count("accumulate_into", {&x, &y}));
}
void Backend::dropout(const Tensor& x, Tensor& y, float* mask, float p, uint64_t seed) {
  dropout_forward(x.data(), y.data(), mask, plain_count("dropout", {&x, &y}), p, seed);
}
void Backend::dropout_grad(const float* mask, const Tensor& dy, Tensor& dx) {
  dropout_backward(mask, dy.data(), dx.data(), plain_count("dropout_grad", {&dy, &dx}));
}
void Backend::convert(const Tensor& src, Tensor& dst) {
  copy(src.data(), ptr(dst), plain_count("convert", {&src, &dst}));
}

}  // namespace dtrain::layers
