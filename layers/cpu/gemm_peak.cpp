// layers/cpu/gemm_peak.cpp — the machine's GEMM throughput through oneDNN's
// matmul (what its convolutions and the linear layers reach at best): the
// yardstick `dtrain bench compute` prints next to a model's GFLOP/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/onednn_internal.hpp"

namespace dtrain::layers {

double gemm_gflops(DType t, int size, int reps) {
  DT_CHECK(size > 0 && reps > 0, "gemm_gflops: size and reps must be positive");
  using dnnl::memory;
  onednn::Ctx ctx;
  const memory::dim s = size;
  const auto dt = onednn::dtype_of(t);
  const memory::desc a({s, s}, dt, onednn::tag::ab), b({s, s}, dt, onednn::tag::any), c({s, s}, onednn::dt::f32,
                                                                                        onednn::tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), ctx.eng);
  dnnl::matmul mm(pd);
  memory am(a, ctx.eng), bm(pd.weights_desc(), ctx.eng), cm(c, ctx.eng);
  // Inputs of moderate values (the contents do not change the time; NaNs could).
  auto fill = [&](memory& m) {
    if (t == DType::f32) {
      auto* p = static_cast<float*>(m.get_data_handle());
      std::fill(p, p + m.get_desc().get_size() / 4, 0.5f);
    } else {
      auto* p = static_cast<uint16_t*>(m.get_data_handle());
      std::fill(p, p + m.get_desc().get_size() / 2, to_bf16(0.5f));
    }
  };
  fill(am);
  fill(bm);
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {  // the first run is a warm-up
    const auto t0 = std::chrono::steady_clock::now();
    mm.execute(ctx.strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    ctx.strm.wait();
    const double dt_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, dt_s);
  }
  return 2.0 * s * s * s / best / 1e9;
}

std::string bf16_slower_warning(double bf16_gflops, double f32_gflops) {
  if (!(bf16_gflops > 0) || !(f32_gflops > 0) || bf16_gflops >= 0.9 * f32_gflops) return "";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "--precision bf16: this CPU's bf16 matrix products measured %.0f GFLOP/s against %.0f in fp32 "
                "(%.2fx): its AVX512-BF16 dot products are not faster than fp32 FMAs and oneDNN finds no AMX, so "
                "bf16 will likely train slower than --precision fp32 here",
                bf16_gflops, f32_gflops, bf16_gflops / f32_gflops);
  return buf;
}

std::string measure_bf16_slower_warning() {
  // Only where oneDNN runs bf16 on AVX512-BF16 dot products: AMX is another
  // unit, and the message speaks of these.
  if (dnnl::get_effective_cpu_isa() != dnnl::cpu_isa::avx512_core_bf16) return "";
  const double bf16 = gemm_gflops(DType::bf16, 1024, 4);
  const double f32 = gemm_gflops(DType::f32, 1024, 4);
  return bf16_slower_warning(bf16, f32);
}

}  // namespace dtrain::layers
