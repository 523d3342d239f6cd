// layers/cuda/cuda_kernels.cu — the CUDA backend's custom kernels: elementwise
// ops, dropout, softmax cross-entropy, SGD, linear bias, LRN, the bf16 casts of
// the mixed-precision convolutions and GEMMs. Each mirrors the
// plain-loop reference (layers/cpu/reference*.cpp) formula for formula; sums
// that the reference takes in double are taken in double here too.
//
// LRN is custom rather than cudnnLRNCrossChannel*: cuDNN limits the window to
// 1..16 channels and k ≥ 1e-5, and does not document where an even window sits;
// the contract's window win(c) = [c − (size−1)/2, c + size/2] is explicit here.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.hpp"
#include "layers/cuda/cuda_kernels.hpp"
#include "layers/format.hpp"

namespace dtrain::layers::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(size_t count) {
  size_t b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);  // grid-stride beyond
}

void check_launch() { DT_CHECK_CUDA(cudaGetLastError()); }

#define DT_GRID_LOOP(i, count) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (count); i += size_t(blockDim.x) * gridDim.x)

__global__ void k_fill(float* dst, size_t count, float v) {
  DT_GRID_LOOP(i, count) dst[i] = v;
}
__global__ void k_relu_fwd(const float* x, float* y, size_t count) {
  DT_GRID_LOOP(i, count) y[i] = x[i] < 0.0f ? 0.0f : x[i];  // NaN propagates
}
__global__ void k_relu_bwd(const float* y, const float* dy, float* dx, size_t count) {
  DT_GRID_LOOP(i, count) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
__global__ void k_add(const float* a, const float* b, float* y, size_t count) {
  DT_GRID_LOOP(i, count) y[i] = a[i] + b[i];
}
__global__ void k_accumulate(const float* x, float* y, size_t count) {
  DT_GRID_LOOP(i, count) y[i] += x[i];
}

// dropout_uniform() of layers/backend.hpp, bit for bit (splitmix64, top 24 bits).
__device__ float uniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}
__global__ void k_dropout_fwd(const float* x, float* y, float* mask, size_t count, float p,
                              float scale, uint64_t seed) {
  DT_GRID_LOOP(i, count) {
    const float m = uniform(seed, i) >= p ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}
__global__ void k_mul(const float* a, const float* b, float* y, size_t count) {
  DT_GRID_LOOP(i, count) y[i] = a[i] * b[i];
}

// One thread per sample (K ≤ a few thousand: the loop is short next to a conv net).
__global__ void k_xent_fwd(const float* logits, const int32_t* labels, int n, int k, float* probs,
                           double* loss, int32_t* hit, int32_t* bad) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* z = logits + size_t(i) * k;
  float* q = probs + size_t(i) * k;
  const int32_t label = labels[i];
  if (label < 0 || label >= k) {
    *bad = 1;
    loss[i] = 0.0;
    hit[i] = 0;
    return;
  }
  int arg = 0;
  for (int j = 1; j < k; ++j)
    if (z[j] > z[arg]) arg = j;
  const double zmax = z[arg];
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += exp(double(z[j]) - zmax);
  for (int j = 0; j < k; ++j) q[j] = float(exp(double(z[j]) - zmax) / sum);
  loss[i] = zmax + log(sum) - double(z[label]);
  hit[i] = arg == label ? 1 : 0;
}
__global__ void k_xent_bwd(const float* probs, const int32_t* labels, int n, int k, float scale,
                           float* dlogits) {
  DT_GRID_LOOP(at, size_t(n) * k) {
    const int i = int(at / k), j = int(at % k);
    const double target = j == labels[i] ? 1.0 : 0.0;
    dlogits[at] = float((double(probs[at]) - target) * scale);
  }
}

__global__ void k_sgd(float* param, const float* grad, float* mom, size_t count, float lr,
                      float momentum, float wd) {
  DT_GRID_LOOP(i, count) {
    float g = grad[i] + wd * param[i];
    if (mom != nullptr) {
      mom[i] = momentum * mom[i] + g;
      g = mom[i];
    }
    param[i] -= lr * g;
  }
}

__global__ void k_add_row_bias(float* y, const float* b, int n, int out) {
  DT_GRID_LOOP(i, size_t(n) * out) y[i] += b[i % out];
}
// One block per output o; a fixed-shape tree reduction (deterministic).
__global__ void k_row_bias_grad(const float* dy, float* db, int n, int out) {
  __shared__ double part[kThreads];
  const int o = blockIdx.x;
  double s = 0.0;
  for (int r = threadIdx.x; r < n; r += blockDim.x) s += dy[size_t(r) * out + o];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[o] = float(part[0]);
}

// LRN: element (n, c, p) at (n·C + c)·HW + p; den(c) = k + α/size · Σ_{c'∈win(c)} x[c']².
__device__ double lrn_den(const float* col, size_t hw, int c, int ch, int size, double a_over_n,
                          double k) {
  int lo = c - (size - 1) / 2, hi = c + size / 2;
  if (lo < 0) lo = 0;
  if (hi > ch - 1) hi = ch - 1;
  double s = 0.0;
  for (int cc = lo; cc <= hi; ++cc) {
    const double v = col[cc * hw];
    s += v * v;
  }
  return k + a_over_n * s;
}
__global__ void k_lrn_fwd(const float* x, float* y, int n, int ch, int hw, int size, float alpha,
                          float beta, float k) {
  DT_GRID_LOOP(i, size_t(n) * ch * hw) {
    const size_t p = i % hw, nc = i / hw;
    const int c = int(nc % ch);
    const float* col = x + (nc - c) * hw + p;  // channel 0 of this (n, pixel)
    const double den = lrn_den(col, hw, c, ch, size, double(alpha) / size, k);
    y[i] = float(x[i] * pow(den, -double(beta)));
  }
}
// ∂L/∂x[j] = dy[j]·D[j]^−β − (2αβ/size)·x[j]·Σ_{c : j∈win(c)} dy[c]·x[c]·D[c]^(−β−1),
// and j ∈ win(c) ⇔ c ∈ [j − size/2, j + (size−1)/2].
__global__ void k_lrn_bwd(const float* x, const float* dy, float* dx, int n, int ch, int hw,
                          int size, float alpha, float beta, float k) {
  DT_GRID_LOOP(i, size_t(n) * ch * hw) {
    const size_t p = i % hw, nc = i / hw;
    const int j = int(nc % ch);
    const size_t base = (nc - j) * hw + p;
    const double a_over_n = double(alpha) / size, b = beta;
    double g = dy[i] * pow(lrn_den(x + base, hw, j, ch, size, a_over_n, k), -b);
    int lo = j - size / 2, hi = j + (size - 1) / 2;
    if (lo < 0) lo = 0;
    if (hi > ch - 1) hi = ch - 1;
    double s = 0.0;
    for (int c = lo; c <= hi; ++c) {
      const double den = lrn_den(x + base, hw, c, ch, size, a_over_n, k);
      s += double(dy[base + c * size_t(hw)]) * x[base + c * size_t(hw)] * pow(den, -b - 1.0);
    }
    g -= 2.0 * double(alpha) * b / size * double(x[i]) * s;
    dx[i] = float(g);
  }
}

__global__ void k_to_bf16(const float* x, uint16_t* y, size_t count) {
  DT_GRID_LOOP(i, count) y[i] = bf16_bits(x[i]);  // layers/format.hpp
}
__global__ void k_from_bf16(const uint16_t* x, float* y, size_t count) {
  DT_GRID_LOOP(i, count) y[i] = __uint_as_float(uint32_t(x[i]) << 16);
}

}  // namespace

void fill(float* dst, size_t count, float value) {
  if (count == 0) return;
  k_fill<<<blocks_for(count), kThreads>>>(dst, count, value);
  check_launch();
}
void relu_forward(const float* x, float* y, size_t count) {
  if (count == 0) return;
  k_relu_fwd<<<blocks_for(count), kThreads>>>(x, y, count);
  check_launch();
}
void relu_backward(const float* y, const float* dy, float* dx, size_t count) {
  if (count == 0) return;
  k_relu_bwd<<<blocks_for(count), kThreads>>>(y, dy, dx, count);
  check_launch();
}
void add(const float* a, const float* b, float* y, size_t count) {
  if (count == 0) return;
  k_add<<<blocks_for(count), kThreads>>>(a, b, y, count);
  check_launch();
}
void accumulate(const float* x, float* y, size_t count) {
  if (count == 0) return;
  k_accumulate<<<blocks_for(count), kThreads>>>(x, y, count);
  check_launch();
}
void dropout_forward(const float* x, float* y, float* mask, size_t count, float p, uint64_t seed) {
  if (count == 0) return;
  k_dropout_fwd<<<blocks_for(count), kThreads>>>(x, y, mask, count, p, 1.0f / (1.0f - p), seed);
  check_launch();
}
void dropout_backward(const float* mask, const float* dy, float* dx, size_t count) {
  if (count == 0) return;
  k_mul<<<blocks_for(count), kThreads>>>(dy, mask, dx, count);
  check_launch();
}
void softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k, float* probs,
                          double* loss, int32_t* hit, int32_t* bad_label) {
  if (n == 0) return;
  k_xent_fwd<<<(n + 127) / 128, 128>>>(logits, labels, n, k, probs, loss, hit, bad_label);
  check_launch();
}
void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k, float scale,
                           float* dlogits) {
  const size_t count = size_t(n) * k;
  if (count == 0) return;
  k_xent_bwd<<<blocks_for(count), kThreads>>>(probs, labels, n, k, scale, dlogits);
  check_launch();
}
void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr,
                float momentum, float weight_decay) {
  if (count == 0) return;
  k_sgd<<<blocks_for(count), kThreads>>>(param, grad, mom, count, lr, momentum, weight_decay);
  check_launch();
}
void add_row_bias(float* y, const float* b, int n, int out) {
  const size_t count = size_t(n) * out;
  if (count == 0) return;
  k_add_row_bias<<<blocks_for(count), kThreads>>>(y, b, n, out);
  check_launch();
}
void row_bias_grad(const float* dy, float* db, int n, int out) {
  if (out == 0) return;
  k_row_bias_grad<<<out, kThreads>>>(dy, db, n, out);
  check_launch();
}
void lrn_forward(const float* x, float* y, int n, int c, int hw, int size, float alpha, float beta,
                 float k) {
  const size_t count = size_t(n) * c * hw;
  if (count == 0) return;
  k_lrn_fwd<<<blocks_for(count), kThreads>>>(x, y, n, c, hw, size, alpha, beta, k);
  check_launch();
}
void lrn_backward(const float* x, const float* dy, float* dx, int n, int c, int hw, int size,
                  float alpha, float beta, float k) {
  const size_t count = size_t(n) * c * hw;
  if (count == 0) return;
  k_lrn_bwd<<<blocks_for(count), kThreads>>>(x, dy, dx, n, c, hw, size, alpha, beta, k);
  check_launch();
}
uint16_t* to_bf16(const float* x, uint16_t* y, size_t count) {
  if (count == 0) return y;
  k_to_bf16<<<blocks_for(count), kThreads>>>(x, y, count);
  check_launch();
  return y;
}
void from_bf16(const uint16_t* x, float* y, size_t count) {
  if (count == 0) return;
  k_from_bf16<<<blocks_for(count), kThreads>>>(x, y, count);
  check_launch();
}

}  // namespace dtrain::layers::cuda
