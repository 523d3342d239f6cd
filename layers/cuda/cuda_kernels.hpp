// layers/cuda/cuda_kernels.hpp — launchers of the custom CUDA kernels, for
// what cuDNN and cuBLAS do not have (or do not define as the contract does).
// Plain C++ declarations: the .cpp files of the backend call them without nvcc.
// Every launcher enqueues on the legacy default stream and checks the launch
// (DT_CHECK_CUDA on cudaGetLastError); shapes as in layers/backend.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtrain::layers::cuda {

void fill(float* dst, size_t count, float value);
void relu_forward(const float* x, float* y, size_t count);
void relu_backward(const float* y, const float* dy, float* dx, size_t count);
void add(const float* a, const float* b, float* y, size_t count);
void accumulate(const float* x, float* y, size_t count);
// mask[i] = u(seed, i) ≥ p ? 1/(1 − p) : 0 (dropout_uniform of backend.hpp); y = x·mask
void dropout_forward(const float* x, float* y, float* mask, size_t count, float p, uint64_t seed);
void dropout_backward(const float* mask, const float* dy, float* dx, size_t count);

// logits [N,K], labels [N] (device) → probs [N,K]; loss [N] (double, −log p[label]),
// hit [N] (1 when the lowest-index argmax equals the label). bad_label: set to 1
// when a label is outside [0, K) (that sample's outputs are then zero).
void softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k, float* probs,
                          double* loss, int32_t* hit, int32_t* bad_label);
// dlogits = (probs − onehot(label))·scale
void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k, float scale,
                           float* dlogits);

// torch.optim.SGD; mom may be nullptr (then momentum is 0)
void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr,
                float momentum, float weight_decay);

// y [N, OUT] += b[o] on every row (linear bias)
void add_row_bias(float* y, const float* b, int n, int out);
// db[o] = Σ_n dy[n, o] (accumulated in double, deterministic)
void row_bias_grad(const float* dy, float* db, int n, int out);

// LRN across channels, the reference's formula and window (backend.hpp):
// x, y, dy, dx [N, C, H·W]
void lrn_forward(const float* x, float* y, int n, int c, int hw, int size, float alpha, float beta,
                 float k);
void lrn_backward(const float* x, const float* dy, float* dx, int n, int c, int hw, int size,
                  float alpha, float beta, float k);

// float32 ↔ bfloat16 (bf16 elements as their uint16_t bit patterns, device
// memory): to_bf16 rounds to nearest, ties to even, a NaN stays a quiet NaN —
// by layers::bf16_bits (format.hpp), the host's layers::to_bf16 too, so host
// and device round identically — and returns y (the operand its caller passes
// on); from_bf16 widens exactly. x, y: [count].
uint16_t* to_bf16(const float* x, uint16_t* y, size_t count);
void from_bf16(const uint16_t* x, float* y, size_t count);

}  // namespace dtrain::layers::cuda
