// bench/gpu_throughput.cpp — GPU training throughput of one model on the CUDA
// backend (the dtrain side of bench/gpu-check.sh; bench/torch_gpu.py is the
// PyTorch side with the same settings).
//
// One random minibatch [B, 3, 224, 224] (U(−1, 1)) and random labels are made
// once and uploaded: this measures compute (T_C), not input. A step is what the
// trainer does on one GPU: forward (train), softmax cross-entropy (its loss
// comes back to the host, as the trainer logs it), backward, SGD (momentum
// 0.9). --warmup steps (which include cuDNN's algorithm search) are discarded;
// then --steps steps are each timed after a device synchronisation.
// --tf32: TF32 tensor cores in the f32 convolutions and GEMMs; --bf16: the net
// in bf16 (NetOptions::precision: convolutions and GEMMs on bf16 copies with
// f32 accumulation, the rest f32; layers/cuda/cuda_backend.hpp), the peer of
// torch.autocast(dtype=torch.bfloat16) in bench/torch_gpu.py.
//
//   dtrain_gpu_bench --model alexnet-owt --minibatch 128 [--steps 20] [--warmup 5]
//                    [--tf32 | --bf16] [--workspace-mb 1024] [--quiet-algos]
// prints: dtrain model M minibatch B tf32 0|1 bf16 0|1 steps S images_per_s X step_s_median Y …
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "layers/cuda/cuda_backend.hpp"
#include "layers/models.hpp"
#include "layers/sgd.hpp"

using namespace dtrain;
using namespace dtrain::layers;

int main(int argc, char** argv) {
  std::string model = "resnet50";
  int minibatch = 128, steps = 20, warmup = 5;
  CudaOptions co;
  co.workspace_bytes = size_t(1024) << 20;
  NetOptions no;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "dtrain_gpu_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") model = next();
    else if (a == "--minibatch") minibatch = std::stoi(next());
    else if (a == "--steps") steps = std::stoi(next());
    else if (a == "--warmup") warmup = std::stoi(next());
    else if (a == "--workspace-mb") co.workspace_bytes = size_t(std::stoul(next())) << 20;
    else if (a == "--tf32") co.tf32 = true;
    else if (a == "--bf16") no.precision = DType::bf16;
    else if (a == "--quiet-algos") co.log_algorithms = false;
    else {
      std::fprintf(stderr, "dtrain_gpu_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (co.tf32 && no.precision == DType::bf16) {
    std::fprintf(stderr, "dtrain_gpu_bench: --tf32 and --bf16 are separate rows; pick one\n");
    return 2;
  }
  try {
    auto backend = make_cuda_backend(co);
    ModelOptions mo;
    mo.minibatch = minibatch;
    Net net = make_model(model, mo);
    net.finalize(*backend, 1, no);  // bf16 on a GPU without it: a UsageError naming the device
    const Shape in = net.input_shape();
    const int k = static_cast<int>(net.output_shape().c());
    Sgd sgd(*backend, SgdOptions{}, net.param_ranges(), net.num_params());

    const size_t xn = size_t(minibatch) * in.c() * in.h() * in.w();
    std::vector<float> hx(xn);
    std::vector<int32_t> hl(static_cast<size_t>(minibatch));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& v : hx) v = u(rng);
    for (auto& l : hl) l = static_cast<int32_t>(rng() % uint32_t(k));
    auto x = backend->allocate(xn), labels = backend->allocate(size_t(minibatch));
    auto probs = backend->allocate(size_t(minibatch) * k), dlogits = backend->allocate(size_t(minibatch) * k);
    backend->upload(hx.data(), x.get(), xn * sizeof(float));
    backend->upload(hl.data(), labels.get(), hl.size() * sizeof(int32_t));
    const Tensor xt = Tensor::view(x.get(), Shape(minibatch, in.c(), in.h(), in.w()), Device::cuda);
    const Tensor dt = Tensor::view(dlogits.get(), Shape::flat(minibatch, k), Device::cuda);
    const auto* lab = reinterpret_cast<const int32_t*>(labels.get());

    std::vector<double> times;
    double loss = 0;
    for (int s = 0; s < warmup + steps; ++s) {
      backend->synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      net.set_step_seed(uint64_t(s));
      const Tensor& logits = net.forward(xt, true);
      loss = backend->softmax_xent_forward(logits.data(), lab, minibatch, k, probs.get(), nullptr);
      backend->softmax_xent_backward(probs.get(), lab, minibatch, k, 1.0f / float(minibatch),
                                     dlogits.get());
      net.backward(dt);
      sgd.step(net.params().data(), net.grads().data(), 0.01f);
      backend->synchronize();
      const double dt_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s >= warmup) times.push_back(dt_s);
    }
    double total = 0;
    for (double t : times) total += t;
    std::sort(times.begin(), times.end());
    const double median = times.empty() ? 0.0 : times[times.size() / 2];
    std::printf("dtrain model %s minibatch %d tf32 %d bf16 %d steps %d images_per_s %.1f step_s_median %.4f "
                "workspace_mib %.1f bf16_scratch_mib %.1f last_loss %.4f\n",
                model.c_str(), minibatch, co.tf32 ? 1 : 0, no.precision == DType::bf16 ? 1 : 0, steps,
                total > 0 ? double(steps) * minibatch / total : 0.0, median,
                double(cuda_workspace_bytes(*backend)) / double(1 << 20),
                double(cuda_bf16_scratch_bytes(*backend)) / double(1 << 20), loss / minibatch);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "dtrain_gpu_bench: %s\n", e.what());
    return e.exit_code();
  }
}
