// engine/compute.cpp — the backend factory of compute.hpp.
#include "engine/compute.hpp"

#include "core/error.hpp"
#include "layers/cpu/staged.hpp"
#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

namespace dtrain::engine {

std::unique_ptr<layers::Backend> make_compute_backend(const TrainConfig& cfg, int cuda_device, bool log) {
  auto host_kernels = [&] { return layers::make_backend(cfg.reference_kernels ? "reference" : "cpu"); };
  if (cfg.device == Device::cpu) return host_kernels();
  if (cfg.device == Device::cpu_staged) return layers::make_staged_backend(host_kernels());
#ifdef DTRAIN_HAVE_CUDA
  layers::CudaOptions co;
  co.device = cuda_device;
  co.workspace_bytes = static_cast<size_t>(cfg.workspace_mb) << 20;
  co.tf32 = cfg.tf32;
  co.log_algorithms = log;
  return layers::make_cuda_backend(co);
#else
  (void)cuda_device;
  (void)log;
  DT_USAGE("option 'device': cuda: this dtrain was built without the CUDA backend; use --device cpu");
#endif
}

size_t workspace_bytes(const layers::Backend& backend) {
#ifdef DTRAIN_HAVE_CUDA
  if (backend.name() == std::string("cuda"))
    return layers::cuda_workspace_bytes(backend) + layers::cuda_bf16_scratch_bytes(backend);
#endif
  (void)backend;
  return 0;
}

}  // namespace dtrain::engine
