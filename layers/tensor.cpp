// layers/tensor.cpp — Tensor storage.
#include "layers/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::layers {

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

Tensor::Tensor(Shape shape, Device device) : shape_(shape), device_(device) {
  DT_CHECK(device == Device::cpu, "owning tensors are host tensors; CUDA storage comes from the CUDA backend");
  DT_CHECK(shape.numel() >= 0, "negative shape ", shape.str());
  size_t bytes = std::max<size_t>(64, (static_cast<size_t>(shape.numel()) * sizeof(float) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) DT_FAIL("out of host memory allocating ", bytes, " bytes for tensor ", shape.str());
  std::memset(p, 0, bytes);
  storage_ = std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { std::free(q); });
  data_ = storage_.get();
}

Tensor Tensor::view(float* data, Shape shape, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.device_ = device;
  return t;
}

Tensor Tensor::view(void* data, Shape shape, Format f, Device device) {
  Tensor t;
  t.data_ = static_cast<float*>(data);
  t.shape_ = shape;
  t.format_ = f;
  t.device_ = device;
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  DT_CHECK(shape.numel() == numel(), "cannot reshape ", shape_.str(), " to ", shape.str());
  DT_CHECK(format_.is_plain(), "cannot reshape a ", format_.str(), " tensor");
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  DT_CHECK(device_ == Device::cpu, "clone() of a device tensor");
  DT_CHECK(format_.is_plain_f32(), "clone() of a ", format_.str(), " tensor");
  Tensor t(shape_);
  if (numel() > 0) std::memcpy(t.data_, data_, bytes());
  return t;
}

void Tensor::zero() { fill(0.0f); }

void Tensor::fill(float v) {
  DT_CHECK(device_ == Device::cpu, "fill() of a device tensor");
  DT_CHECK(format_.is_plain_f32(), "fill() of a ", format_.str(), " tensor");
  std::fill(data_, data_ + numel(), v);
}

}  // namespace dtrain::layers
