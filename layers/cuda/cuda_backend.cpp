// layers/cuda/cuda_backend.cpp — the CUDA Backend: device storage, host ↔
// device transfers, the elementwise functions (custom kernels,
// cuda_kernels.cu), softmax cross-entropy with its loss reduction, SGD, what
// the Net may ask of its kernels (f32 NCHW; bf16 from compute capability 8.0);
// the shared context (cuDNN and cuBLAS handles, the conv workspace, the bf16
// scratch, the convolution reports) and the device helpers of cuda_backend.hpp.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/log.hpp"
#include "layers/cuda/cuda_common.hpp"
#include "layers/cuda/cuda_kernels.hpp"

namespace dtrain::layers {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

int cuda_device_for_local_rank(int local_rank) {
  const int n = cuda_device_count();
  if (n == 0) DT_USAGE("--device cuda: no CUDA device is visible on this node");
  DT_CHECK(local_rank >= 0, "negative local rank ", local_rank);
  return local_rank % n;
}

std::string cuda_device_key(int device) {
  cudaDeviceProp p{};
  DT_CHECK_CUDA(cudaGetDeviceProperties(&p, device));
  char key[96];
  const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  int at = std::snprintf(key, sizeof key, "GPU-");
  for (int i = 0; i < 16; ++i) at += std::snprintf(key + at, sizeof key - at, "%02x", u[i]);
  std::snprintf(key + at, sizeof key - at, " pci %04x:%02x:%02x", p.pciDomainID, p.pciBusID,
                p.pciDeviceID);
  return key;
}

size_t ConvLayerReport::workspace_bytes() const {
  return std::max({forward.workspace_bytes, backward_data.workspace_bytes,
                   backward_filter.workspace_bytes});
}

namespace cuda {

namespace {

// Grows the device buffer *p (*size bytes) to at least `bytes`. Work queued
// earlier may still use the old buffer: wait for it before freeing.
void grow(void** p, size_t* size, size_t bytes) {
  if (bytes <= *size) return;
  DT_CHECK_CUDA(cudaDeviceSynchronize());
  if (*p != nullptr) DT_CHECK_CUDA(cudaFree(*p));
  *p = nullptr;
  *size = 0;
  DT_CHECK_CUDA(cudaMalloc(p, bytes));
  *size = bytes;
}

}  // namespace

Context::Context(const CudaOptions& o) : opt_(o) {
  activate();
  cudaDeviceProp prop{};
  DT_CHECK_CUDA(cudaGetDeviceProperties(&prop, o.device));
  device_name_ = prop.name;
  cc_major_ = prop.major;
  cc_minor_ = prop.minor;
  DT_CHECK_CUDNN(cudnnCreate(&cudnn_));
  DT_CHECK_CUBLAS(cublasCreate(&cublas_));
  DT_CHECK_CUDNN(cudnnSetStream(cudnn_, nullptr));
  DT_CHECK_CUBLAS(cublasSetStream(cublas_, nullptr));
  DT_CHECK_CUBLAS(cublasSetMathMode(cublas_, o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                    : CUBLAS_DEFAULT_MATH));
}

Context::~Context() {
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (ws_ != nullptr) cudaFree(ws_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
}

void Context::activate() const { DT_CHECK_CUDA(cudaSetDevice(opt_.device)); }

void* Context::workspace(size_t bytes) {
  grow(&ws_, &ws_size_, bytes);
  return ws_;
}

Context::Bf16Parts Context::bf16_scratch(std::initializer_list<size_t> counts) {
  DT_CHECK(counts.size() <= 4, "bf16_scratch: at most 4 parts, asked for ", counts.size());
  auto aligned = [](size_t count) { return (count * sizeof(uint16_t) + 255) / 256 * 256; };
  size_t total = 0;
  for (size_t c : counts) total += aligned(c);
  grow(&scratch_, &scratch_size_, total);
  Bf16Parts parts;
  size_t at = 0, i = 0;
  for (size_t c : counts) {
    if (c > 0) parts.p[i] = reinterpret_cast<uint16_t*>(static_cast<char*>(scratch_) + at);
    at += aligned(c);
    ++i;
  }
  return parts;
}

size_t Context::add_report(const ConvLayerReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  reports_.push_back(r);
  return reports_.size() - 1;
}

void Context::set_report(size_t row, const ConvLayerReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  reports_.at(row) = r;
}

std::vector<ConvLayerReport> Context::reports() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reports_;
}

std::shared_ptr<float> device_alloc(size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    DT_FAIL("out of GPU memory allocating ", bytes, " bytes (", cudaGetErrorString(rc), ")");
  }
  DT_CHECK_CUDA(cudaMemset(p, 0, bytes));
  return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { cudaFree(q); });
}

Bf16Weights::Bf16Weights(size_t count) : count_(count), store_(device_alloc(count * sizeof(uint16_t))) {}

const uint16_t* Bf16Weights::cast(const float* w) {
  to_bf16(w, reinterpret_cast<uint16_t*>(store_.get()), count_);
  of_ = w;
  return data();
}

TensorDesc::TensorDesc(int n, int c, int h, int w, cudnnDataType_t t) {
  DT_CHECK_CUDNN(cudnnCreateTensorDescriptor(&d));
  DT_CHECK_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, t, n, c, h, w));
}

TensorDesc::~TensorDesc() {
  if (d != nullptr) cudnnDestroyTensorDescriptor(d);
}

namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& o) : ctx_(std::make_shared<Context>(o)) {}

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::cuda; }
  const ContextPtr& context() const { return ctx_; }

  std::shared_ptr<float> allocate(size_t count) override {
    DT_CHECK(count <= (size_t(1) << 62) / sizeof(float), "allocate: ", count, " floats overflow");
    return device_alloc(count * sizeof(float));
  }

  // device → device, ordered with the kernels on the default stream
  void copy(const float* src, float* dst, size_t count) override {
    if (count > 0 && src != dst)
      DT_CHECK_CUDA(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice,
                                    nullptr));
  }

  // Transfers may come from the exchange's communication thread: each sets the
  // backend's device on the calling thread first (cudaSetDevice is per thread).
  void upload(const void* host, void* dst, size_t bytes) override {
    if (bytes == 0) return;
    ctx_->activate();
    DT_CHECK_CUDA(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice));
  }

  void download(const void* src, void* host, size_t bytes) override {
    if (bytes == 0) return;
    ctx_->activate();
    DT_CHECK_CUDA(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost));
  }

  void synchronize() override {
    ctx_->activate();
    DT_CHECK_CUDA(cudaDeviceSynchronize());
  }

  bool discrete_memory() const override { return true; }

  // Pinned host memory (portable: usable by every thread and context).
  void* host_alloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t rc = cudaHostAlloc(&p, std::max<size_t>(bytes, 64), cudaHostAllocPortable);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      DT_FAIL("cannot allocate ", bytes, " bytes of pinned host memory (", cudaGetErrorString(rc), ")");
    }
    return p;
  }
  void host_free(void* p) override {
    if (p != nullptr) cudaFreeHost(p);
  }

  void fill(float* dst, size_t count, float value) override { cuda::fill(dst, count, value); }

  // bf16 (mixed precision): the convolutions and GEMMs compute on bf16 copies
  // of their inputs with f32 accumulation (cuda_backend.hpp); it needs bf16
  // tensor cores.
  std::string precision_unsupported(DType t) const override {
    if (t == DType::f32 || ctx_->cc_major() >= 8) return "";
    return detail::concat("bf16 on the cuda backend needs bf16 tensor cores (compute capability 8.0 or later: "
                          "A100, H100 and newer); device ", ctx_->options().device, " (", ctx_->device_name(),
                          ") has compute capability ", ctx_->cc_major(), ".", ctx_->cc_minor(),
                          " (use --precision fp32)");
  }

  // Every kernel reads and writes f32 NCHW (blocked_formats() and fuses_relu()
  // stay false, so a Net never asks for more); exec.precision is the compute
  // type of conv and linear, and pooling, LRN and batch norm compute in f32
  // whatever it says.
  std::unique_ptr<ConvKernel> conv(const ConvDesc& d) override { return plain(d, "conv", make_conv); }
  std::unique_ptr<PoolKernel> pool(const PoolDesc& d) override { return plain(d, "pool", make_pool); }
  std::unique_ptr<LrnKernel> lrn(const LrnDesc& d) override { return plain(d, "lrn", make_lrn); }
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormDesc& d) override {
    return plain(d, "batch_norm", make_batch_norm);
  }
  std::unique_ptr<LinearKernel> linear(const LinearDesc& d) override { return plain(d, "linear", make_linear); }

  void relu_forward(const float* x, float* y, size_t count) override {
    cuda::relu_forward(x, y, count);
  }
  void relu_backward(const float* y, const float* dy, float* dx, size_t count) override {
    cuda::relu_backward(y, dy, dx, count);
  }
  void add(const float* a, const float* b, float* y, size_t count) override {
    cuda::add(a, b, y, count);
  }
  void accumulate(const float* x, float* y, size_t count) override {
    cuda::accumulate(x, y, count);
  }
  void dropout_forward(const float* x, float* y, float* mask, size_t count, float p,
                       uint64_t seed) override {
    DT_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1), got ", p);
    cuda::dropout_forward(x, y, mask, count, p, seed);
  }
  void dropout_backward(const float* mask, const float* dy, float* dx, size_t count) override {
    cuda::dropout_backward(mask, dy, dx, count);
  }

  // Per-sample losses and hits come back to the host and are summed there in
  // sample order (deterministic); the copy also waits for the step's forward.
  double softmax_xent_forward(const float* logits, const int32_t* labels, int n, int k,
                              float* probs, int64_t* correct) override {
    DT_CHECK(n >= 0 && k > 0, "softmax_xent: bad shape n=", n, " k=", k);
    if (n == 0) {
      if (correct != nullptr) *correct = 0;
      return 0.0;
    }
    const size_t need = size_t(n) * (sizeof(double) + sizeof(int32_t)) + sizeof(int32_t);
    if (need > xent_bytes_) {
      xent_ = device_alloc(need);
      xent_bytes_ = need;
    }
    auto* loss = reinterpret_cast<double*>(xent_.get());
    auto* hit = reinterpret_cast<int32_t*>(loss + n);
    int32_t* bad = hit + n;
    DT_CHECK_CUDA(cudaMemsetAsync(bad, 0, sizeof(int32_t), nullptr));
    cuda::softmax_xent_forward(logits, labels, n, k, probs, loss, hit, bad);
    host_.resize(need);
    DT_CHECK_CUDA(cudaMemcpy(host_.data(), xent_.get(), need, cudaMemcpyDeviceToHost));
    std::vector<double> l(static_cast<size_t>(n));
    std::vector<int32_t> h(static_cast<size_t>(n) + 1);
    std::memcpy(l.data(), host_.data(), size_t(n) * sizeof(double));
    std::memcpy(h.data(), host_.data() + size_t(n) * sizeof(double), (size_t(n) + 1) * sizeof(int32_t));
    DT_CHECK(h[size_t(n)] == 0, "softmax_xent: a label is outside [0, ", k, ")");
    double sum = 0.0;
    int64_t hits = 0;
    for (int i = 0; i < n; ++i) {
      sum += l[size_t(i)];
      hits += h[size_t(i)];
    }
    if (correct != nullptr) *correct = hits;
    return sum;
  }

  void softmax_xent_backward(const float* probs, const int32_t* labels, int n, int k, float scale,
                             float* dlogits) override {
    cuda::softmax_xent_backward(probs, labels, n, k, scale, dlogits);
  }

  void sgd_update(float* param, const float* grad, float* mom, size_t count, float lr,
                  float momentum, float weight_decay) override {
    DT_CHECK(mom != nullptr || momentum == 0.0f, "sgd_update: momentum ", momentum,
             " needs a momentum buffer");
    cuda::sgd_update(param, grad, mom, count, lr, momentum, weight_decay);
  }

 private:
  // A kernel on f32 nchw computing in f32, or in bf16 where this device can.
  // The return type is spelled out: `auto` is not deduced yet where the
  // overrides above call it.
  template <class D, class Make>
  std::invoke_result_t<Make&, const ContextPtr&, const D&> plain(const D& d, const char* kernel, Make make) {
    require_plain_exec(d.exec, "cuda", kernel, /*allow_bf16=*/true);
    const std::string why = precision_unsupported(d.exec.precision);
    DT_CHECK(why.empty(), "the cuda backend's ", kernel, " kernel: ", why);
    return make(ctx_, d);
  }

  ContextPtr ctx_;
  std::shared_ptr<float> xent_;  // per-sample loss (double), hit (int32), bad-label flag
  size_t xent_bytes_ = 0;
  std::vector<unsigned char> host_;
};

const CudaBackend& as_cuda(const Backend& b) {
  const auto* c = dynamic_cast<const CudaBackend*>(&b);
  DT_CHECK(c != nullptr, "backend '", b.name(), "' is not the cuda backend");
  return *c;
}

}  // namespace
}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  const int n = cuda_device_count();
  if (n == 0) DT_USAGE("backend cuda: no CUDA device is visible (cudaGetDeviceCount reports none)");
  if (options.device < 0 || options.device >= n)
    DT_USAGE("backend cuda: device ", options.device, " does not exist (", n, " visible)");
  return std::make_unique<cuda::CudaBackend>(options);
}

std::vector<ConvLayerReport> cuda_conv_report(const Backend& backend) {
  return cuda::as_cuda(backend).context()->reports();
}

size_t cuda_workspace_bytes(const Backend& backend) {
  return cuda::as_cuda(backend).context()->workspace_size();
}

size_t cuda_bf16_scratch_bytes(const Backend& backend) {
  return cuda::as_cuda(backend).context()->bf16_scratch_size();
}

}  // namespace dtrain::layers
