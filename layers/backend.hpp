// layers/backend.hpp — the backend contract (after ggml-backend-impl.h).
//
// A backend is a factory of stateful kernels (one per layer instance, holding
// its primitives, workspaces and saved statistics) plus a few stateless
// elementwise functions. All pointers are device pointers of the backend's
// device. Tensors are float32 plain NCHW (2-D tensors are [N, F]) unless a
// kernel was created with a KernelExec that lets it choose (below): then its
// activation pointers address storage in the formats the kernel reports
// (src_format(), dst_format(); format.hpp), bf16 elements included, while
// weights, biases and their gradients stay float32 plain.
//
// Gradient semantics: every backward call OVERWRITES its outputs (dx, dw, db,
// dgamma, dbeta). A pointer given as nullptr is not computed (dx of the first
// layer). Fan-out accumulation is the Net's job (accumulate()). The gradient
// of an activation is stored in the activation's format (dy in dst_format(),
// dx in src_format()).
// Every kernel's backward follows a forward on the same, unmodified inputs
// and weights (backends may reuse what forward reordered or saved).
// Preconditions (checked, Error otherwise): pooling pad ≤ kernel/2; batch
// norm in training needs N·H·W > 1; dropout p ∈ [0, 1); labels ∈ [0, K).
// Optional pointers: running_mean/running_var may be nullptr (not updated),
// `correct` may be nullptr, `mom` may be nullptr when momentum is 0.
//
// Backends: "reference" (plain loops, layers/cpu/reference*.cpp, the truth the
// others are tested against), "cpu" (oneDNN, layers/cpu/: blocked formats,
// fused ReLU, bf16 where the CPU has AVX512-BF16), "cuda" (cuDNN + cuBLAS,
// layers/cuda/, built when the toolkit is found; its device
// pointers are not host-readable: data enters through upload(), leaves through
// download()), and "cpu-staged" (layers/cpu/staged.hpp: the CPU kernels behind
// the cuda backend's memory model, with every pointer checked — the test double
// that runs the trainer's device path without a GPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/tensor.hpp"

namespace dtrain::layers {

// How the Net asks a kernel to run (Net::plan fills it; the default is the
// plain float32 kernel every backend has). A backend is asked only for what it
// declares (Backend::blocked_formats, fuses_relu, precision_unsupported).
struct KernelExec {
  Format src;                    // the format x arrives in (a hint: the kernel may read another)
  DType precision = DType::f32;  // element type of its activations and weight copies
  bool any_format = false;       // it may choose blocked formats for x and y
  bool channels_last = false;    // with any_format: prefer nhwc where a direct (JIT) kernel takes it
  bool relu = false;             // y = max(op(x), 0); backward then takes dy of that output
                                 // already masked by y > 0 unless masks_relu_grad()
  bool float_out = false;        // write y as float32 where it can (the net's output)
};

// Throws Error unless e asks for the plain float32 kernel without a fused
// ReLU (the only kind a backend without those capabilities makes). allow_bf16:
// e.precision may also be bf16 (a backend that computes in bf16 behind f32
// nchw tensors, as cuda does; whether this device can is precision_unsupported's
// business).
void require_plain_exec(const KernelExec& e, const std::string& backend, const char* kernel,
                        bool allow_bf16 = false);

struct ConvDesc {
  int n = 1, c = 1, h = 1, w = 1;  // input [N, C, H, W]
  int k = 1;                       // output channels; weights [K, C/groups, KH, KW]
  int kh = 1, kw = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;        // symmetric zero padding
  int groups = 1;                  // C and K divisible by groups
  bool bias = true;                // bias [K]
  KernelExec exec;
  int out_h() const { return (h + 2 * pad_h - kh) / stride_h + 1; }
  int out_w() const { return (w + 2 * pad_w - kw) / stride_w + 1; }
};

enum class PoolKind { max, avg };

struct PoolDesc {
  int n = 1, c = 1, h = 1, w = 1;  // input [N, C, H, W]; output [N, C, OH, OW]
  int kh = 1, kw = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;        // max: padding is -inf; avg: see below
  PoolKind kind = PoolKind::max;
  bool avg_include_pad = true;     // avg divides by KH·KW (torch's count_include_pad=True)
  KernelExec exec;
  int out_h() const { return (h + 2 * pad_h - kh) / stride_h + 1; }  // floor mode
  int out_w() const { return (w + 2 * pad_w - kw) / stride_w + 1; }
};

// Local response normalisation across channels (Krizhevsky et al. 2012, Caffe's
// LRN layer, oneDNN lrn_across_channels):
//   y[n,c,h,w] = x[n,c,h,w] / (k + alpha/size · Σ_{c'∈win(c)} x[n,c',h,w]²)^beta
// win(c) = [c − (size−1)/2, c + size/2] ∩ [0, C) — Caffe's window, which also
// defines even sizes (oneDNN and torch centre even windows differently).
struct LrnDesc {
  int n = 1, c = 1, h = 1, w = 1;
  int size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 1.0f;
  KernelExec exec;
};

// Batch normalisation over (N, H, W) per channel (Ioffe & Szegedy 2015).
// Training uses the biased batch variance for normalising; running statistics
// follow torch: running = (1 − momentum)·running + momentum·batch, with the
// unbiased (N·H·W − 1) variance.
struct BatchNormDesc {
  int n = 1, c = 1, h = 1, w = 1;
  float eps = 1e-5f;
  float momentum = 0.1f;
  KernelExec exec;
};

// y = x·Wᵀ + b: x [N, IN], W [OUT, IN] (torch layout), b [OUT], y [N, OUT].
struct LinearDesc {
  int n = 1, in = 1, out = 1;
  bool bias = true;
  KernelExec exec;
};

// The stateful kernels. Four layer kinds share two interfaces: convolution and
// linear are "weighted" (x, w, b → y), pooling and LRN are "unary" (x → y).
// Every kernel says which formats it reads and writes (fixed at creation,
// from its KernelExec; plain float32 by default).
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Format src_format() const { return {}; }  // x and dx
  virtual Format dst_format() const { return {}; }  // y and dy
  // With exec.relu: true when backward() applies the ReLU's mask to dy itself
  // (from what forward saved); false when the caller passes dy already masked.
  virtual bool masks_relu_grad() const { return false; }
  // Which implementation runs the forward (tests check the choice): oneDNN's
  // impl_info_str ("jit:avx2", "simple_nchw:any", …), "loops" for dtrain's
  // own loops; "" where the kernel does not say (today the cpu backend's
  // pooling says, and its linear: "matmul <impl>; backward on inner product
  // <data's impl>, <weights' impl>" or "… on matmul …").
  virtual std::string impl() const { return ""; }
};

// Conv: x [N,C,H,W], w [K,C/g,KH,KW], b [K] → y [N,K,OH,OW].
// Linear: x [N,IN], w [OUT,IN], b [OUT] → y [N,OUT]. b is nullptr when !bias.
class WeightedKernel : public Kernel {
 public:
  virtual void forward(const float* x, const float* w, const float* b, float* y) = 0;
  // dy (y's shape) → dx (x's shape), dw (w's shape), db (b's shape)
  virtual void backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                        float* db) = 0;
  // bf16 kernels: w16 holds bf16_bits (format.hpp) of every element of the w
  // the next forward() gets, in w's layout (the Net's weight mirror, net.hpp);
  // that forward and its backward() may read it instead of converting w.
  // nullptr (the default): they convert w themselves. Kernels that compute in
  // f32, or convert w into a layout of their own, ignore it.
  virtual void use_weights_bf16(const uint16_t* w16) { (void)w16; }
};
using ConvKernel = WeightedKernel;
using LinearKernel = WeightedKernel;

// Pool: x [N,C,H,W] → y [N,C,OH,OW]; LRN: x [N,C,H,W] → y [N,C,H,W].
class UnaryKernel : public Kernel {
 public:
  virtual void forward(const float* x, float* y) = 0;  // may save state (argmax) for backward
  // Uses what the last forward() saved; dx (x's shape) overwritten.
  virtual void backward(const float* x, const float* y, const float* dy, float* dx) = 0;
};
using PoolKernel = UnaryKernel;
using LrnKernel = UnaryKernel;

class BatchNormKernel : public Kernel {
 public:
  // x, y [N,C,H,W]; gamma, beta, running_mean, running_var: [C]. Saves batch mean and 1/σ.
  virtual void forward_train(const float* x, const float* gamma, const float* beta, float* y,
                             float* running_mean, float* running_var) = 0;
  virtual void forward_infer(const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float* y) = 0;
  // Uses the statistics of the last forward_train().
  virtual void backward(const float* x, const float* dy, const float* gamma, float* dx,
                        float* dgamma, float* dbeta) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;

  // Storage for `count` floats on the backend's device, zero-filled.
  virtual std::shared_ptr<float> allocate(size_t count) = 0;
  virtual void copy(const float* src, float* dst, size_t count) = 0;  // device → device
  virtual void fill(float* dst, size_t count, float value) = 0;
  // Host memory ↔ the backend's device (bytes, so int32 labels travel too; `dst`/`src`
  // on the device side come from allocate()). upload() returns once `host` may be
  // reused; download() once `host` holds the data (it waits for queued work).
  // Default, for host backends: memmove.
  virtual void upload(const void* host, void* dst, size_t bytes);
  virtual void download(const void* src, void* host, size_t bytes);
  // Waits until every queued kernel of this backend has finished (no-op on the CPU).
  virtual void synchronize() {}
  // True when allocate()'s memory is not host memory the caller may read or hand
  // to MPI: data enters through upload() and leaves through download() ("cuda",
  // "cpu-staged"). The trainer's device path keys on this.
  virtual bool discrete_memory() const { return false; }
  // Host memory for transfers to and from the device (`bytes` bytes, 64-byte
  // aligned, contents unspecified): pinned (page-locked) on CUDA, so copies run
  // at full bandwidth and may be asynchronous; plain memory on host backends.
  // upload()/download() accept any host memory; this is the fast kind.
  // host_free() takes only what host_alloc() returned (nullptr is ignored).
  // upload(), download() and host_alloc() may be called from any thread.
  virtual void* host_alloc(size_t bytes);
  virtual void host_free(void* p);

  // What the Net may ask of this backend through KernelExec. Defaults: plain
  // float32 kernels only, each ReLU a layer of its own.
  virtual bool blocked_formats() const { return false; }
  virtual bool fuses_relu() const { return false; }
  // True when host-memory kernels read a bf16 weight mirror
  // (WeightedKernel::use_weights_bf16) and sgd_update_segments can write it.
  virtual bool reads_weight_mirror() const { return false; }
  // "" when the kernels compute in `t`, else why not (a sentence for the user).
  virtual std::string precision_unsupported(DType t) const;

  virtual std::unique_ptr<ConvKernel> conv(const ConvDesc& d) = 0;
  virtual std::unique_ptr<PoolKernel> pool(const PoolDesc& d) = 0;
  virtual std::unique_ptr<LrnKernel> lrn(const LrnDesc& d) = 0;
  virtual std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormDesc& d) = 0;
  virtual std::unique_ptr<LinearKernel> linear(const LinearDesc& d) = 0;

  virtual void relu_forward(const float* x, float* y, size_t count) = 0;
  // dx = dy where y > 0, else 0.
  virtual void relu_backward(const float* y, const float* dy, float* dx, size_t count) = 0;
  virtual void add(const float* a, const float* b, float* y, size_t count) = 0;  // y = a + b
  virtual void accumulate(const float* x, float* y, size_t count) = 0;         // y += x
  // Inverted dropout: mask[i] = keep(i) ? 1/(1−p) : 0, keep(i) ⇔ u(seed, i) ≥ p with
  // u = dropout_uniform() below (identical on every backend); y = x · mask.
  virtual void dropout_forward(const float* x, float* y, float* mask, size_t count, float p,
                               uint64_t seed) = 0;
  virtual void dropout_backward(const float* mask, const float* dy, float* dx, size_t count) = 0;

  // Softmax cross-entropy over logits [N, K] and labels [N] (int32 in [0, K)).
  // Writes probs [N, K]; returns the SUM over the N samples of −log p[label]
  // and stores in *correct the number of samples whose argmax equals the label.
  virtual double softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k,
                                      float* probs, int64_t* correct) = 0;
  // dlogits = (probs − onehot(label)) · scale   (scale = 1 / global minibatch)
  virtual void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k,
                                     float scale, float* dlogits) = 0;

  // SGD with momentum and weight decay over a flat range (torch.optim.SGD):
  //   g = grad + wd·param;  mom = momentum·mom + g;  param −= lr·mom
  virtual void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr,
                          float momentum, float weight_decay) = 0;
  // The same update over consecutive segments [begin, end) of one arena (floats;
  // ascending, non-overlapping), each with its weight decay: one pass over the
  // memory where the backend can (default: sgd_update per segment). param,
  // grad, mom point at the start of the arena. param_bf16, when not nullptr
  // (host memory, the arena's length, only where reads_weight_mirror()):
  // param_bf16[i] = bf16_bits(param[i]) for every updated i, in the same pass.
  struct SgdSegment {
    size_t begin = 0, end = 0;
    float weight_decay = 0;
  };
  virtual void sgd_update_segments(float* param, const float* grad, float* mom, const SgdSegment* segs,
                                   size_t n_segs, float lr, float momentum, uint16_t* param_bf16 = nullptr);
  // The same update out of place (a speculating parameter server's two
  // generations of the parameters and momentum, comm/ps_server.cpp): reads
  // param_in and mom_in, writes param_out and mom_out (host memory, pointers at
  // the start of their arenas; an input and its output are the same arena or
  // do not overlap), nothing else. Bitwise the values sgd_update_segments
  // leaves in place from the same inputs. Default: the segments copied
  // in → out, then sgd_update_segments on out.
  virtual void sgd_update_segments_into(const float* param_in, const float* mom_in, float* param_out,
                                        float* mom_out, const float* grad, const SgdSegment* segs, size_t n_segs,
                                        float lr, float momentum);

  // ---- the same elementwise functions on Tensors of any Format (the Net's
  // activations). Operands share one format and shape (y may alias an input);
  // they act on every stored element, so zero padding channels stay zero. The
  // defaults take plain float32 tensors (the functions above); a backend with
  // bf16 or blocked kernels overrides them.
  virtual void relu(const Tensor& x, Tensor& y);                               // y = max(x, 0)
  virtual void relu_grad(const Tensor& y, const Tensor& dy, Tensor& dx);       // dx = dy·[y > 0]
  virtual void sum(const Tensor& a, const Tensor& b, Tensor& y, bool relu);    // y = a + b (then ReLU)
  virtual void accumulate_into(const Tensor& x, Tensor& y);                    // y += x
  // Inverted dropout as dropout_forward (mask: float32, the tensor's stored
  // elements; plain formats only, so that element i is NCHW element i).
  virtual void dropout(const Tensor& x, Tensor& y, float* mask, float p, uint64_t seed);
  virtual void dropout_grad(const float* mask, const Tensor& dy, Tensor& dx);
  // dst ← src, same shape, any two formats (a copy when they agree). Throws
  // Error for a pair the backend cannot convert (default: float32 plain only).
  virtual void convert(const Tensor& src, Tensor& dst);
};

// Counter-based uniform in [0, 1) from (seed, index): splitmix64, top 24 bits.
inline float dropout_uniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// The ordered list of backends: "cpu", "reference", "cpu-staged", "cuda" (when compiled in).
// Throws UsageError naming the backend when it is unknown or not built.
// Defined in layers/backend_list.cpp (CMake target dtrain_layers, the one that
// sees every backend: dtrain_layers_base ← dtrain_layers_cuda ← dtrain_layers).
std::unique_ptr<Backend> make_backend(const std::string& name);
std::vector<std::string> available_backends();

// Threads used by the CPU kernels (OpenMP for oneDNN, OpenBLAS's own pool).
void set_cpu_threads(int threads);

// Pins the OpenMP team of set_cpu_threads(): team thread i (1 ≤ i < T) to CPU
// cpus[i], so the compute threads do not migrate between the rank's cores.
// The initial thread (team thread 0) keeps its CPU set, as
// engine/placement.hpp's widen_initial_thread leaves it under OMP_PROC_BIND:
// the loader and communication threads it starts later inherit that set.
// Returns the CPUs the team's threads run on (cpus[0..T)), or {} and pins
// nothing when cpus has fewer than T entries or T = 1. Throws Error when the
// kernel refuses a CPU.
std::vector<int> pin_cpu_threads(const std::vector<int>& cpus);

// The CPUs of the OpenMP runtime's places (OMP_PLACES), ascending; empty when
// OpenMP binds no thread (OMP_PROC_BIND unset or false). With a binding, the
// runtime built its places from the CPUs the process started with and bound
// the initial thread to the first place: the union is the process's CPU set.
std::vector<int> cpu_place_cpus();

}  // namespace dtrain::layers
