// layers/cpu/onednn_formats.cpp — dtrain's formats (format.hpp) as oneDNN
// memory descriptors, the small attribute helpers the kernels share, and the
// kernels' team sizes (onednn_internal.hpp).
#include <omp.h>

#include <string>

#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers::onednn {

namespace {
tag layout_tag(int cblock) {
  switch (cblock) {
    case 16: return tag::nChw16c;
    case 8: return tag::nChw8c;
    case 0: return tag::nhwc;
    default: return tag::nchw;
  }
}
}  // namespace

dnnl::memory::desc act_md(const dnnl::memory::dims& nchw, const Format& f) {
  return dnnl::memory::desc(nchw, dtype_of(f.dtype), layout_tag(f.cblock));
}

bool format_of(const dnnl::memory::desc& md, Format* f) {
  const dnnl::memory::dims dims = md.dims();
  if (dims.size() != 4) return false;
  const dt t = md.data_type();
  if (t != dt::f32 && t != dt::bf16) return false;
  for (int b : {1, 16, 8, 0}) {
    const Format cand{t == dt::bf16 ? DType::bf16 : DType::f32, b};
    if (act_md(dims, cand) == md) {
      *f = cand;
      return true;
    }
  }
  return false;
}

dnnl::primitive_attr relu_attr(bool relu) {
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

bool is_ref_impl(const char* impl_info) { return std::string(impl_info).find("ref") != std::string::npos; }
bool is_jit_impl(const char* impl_info) { return std::string(impl_info).rfind("jit", 0) == 0; }

int team_for_flops(double flops) { return flops < kSmallFlops ? 1 : omp_get_max_threads(); }
int team_for_elements(double elements) { return elements < kSmallElements ? 1 : omp_get_max_threads(); }

ThreadScope::ThreadScope(int threads) : prev_(omp_get_max_threads()) {
  if (threads != prev_) omp_set_num_threads(threads);
}
ThreadScope::~ThreadScope() {
  if (omp_get_max_threads() != prev_) omp_set_num_threads(prev_);
}

}  // namespace dtrain::layers::onednn
