// layers/cpu/gemm_peak.cpp — the machine's GEMM throughput through oneDNN's
// matmul (what its convolutions and the linear layers reach at best): the
// yardstick `dtrain bench compute` prints next to a model's GFLOP/s.
#include <algorithm>
#include <chrono>

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

}  // namespace dtrain::layers
