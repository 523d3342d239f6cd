// layers/tensor.hpp — a tensor: shape [N, C, H, W] (or [N, F]), a Format
// (element type and layout, format.hpp), a device tag, and either owned
// storage or a view into someone else's (the parameter arena, a batch buffer).
//
// The default format is float32 plain NCHW, and owning tensors, parameters,
// gradients and everything outside a Net are always that; a 2-D tensor [N, F]
// is stored as [N, F, 1, 1] with rank() == 2. Inside a Net activations may be
// bf16 or channel-blocked (net.hpp): data() then addresses that storage
// (2-byte elements for bf16) and bytes() counts the padding channels. Owned
// host storage is 64-byte aligned and zero-filled. Copying a Tensor copies the
// handle (shared storage), like a shared_ptr; clone() copies the data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "layers/format.hpp"

namespace dtrain::layers {

enum class Device { cpu, cuda };
const char* device_name(Device d);

struct Shape {
  std::array<int64_t, 4> d{0, 0, 0, 0};  // N, C, H, W
  int rank = 4;

  Shape() = default;
  Shape(int64_t n, int64_t c, int64_t h, int64_t w) : d{n, c, h, w}, rank(4) {}
  static Shape flat(int64_t n, int64_t f) {  // [N, F]
    Shape s(n, f, 1, 1);
    s.rank = 2;
    return s;
  }
  static Shape vec(int64_t n) {  // [N] (biases, BN parameters)
    Shape s(n, 1, 1, 1);
    s.rank = 1;
    return s;
  }
  int64_t n() const { return d[0]; }
  int64_t c() const { return d[1]; }
  int64_t h() const { return d[2]; }
  int64_t w() const { return d[3]; }
  int64_t numel() const { return d[0] * d[1] * d[2] * d[3]; }
  int64_t per_sample() const { return d[1] * d[2] * d[3]; }  // C·H·W
  bool operator==(const Shape& o) const { return d == o.d; }  // rank is a printing hint
  std::string str() const;  // "[3, 5, 7, 7]" / "[3, 10]"
};

class Tensor {
 public:
  Tensor() = default;
  // Owning, zero-filled. Only Device::cpu allocates here; CUDA storage is made
  // by the CUDA backend and handed in as a view.
  explicit Tensor(Shape shape, Device device = Device::cpu);
  // A non-owning view of `numel(shape)` floats at `data`.
  static Tensor view(float* data, Shape shape, Device device = Device::cpu);
  // A view of storage in format `f` (f.bytes(shape) bytes at `data`).
  static Tensor view(void* data, Shape shape, Format f, Device device = Device::cpu);

  float* data() { return data_; }
  const float* data() const { return data_; }
  void* raw() { return data_; }
  const void* raw() const { return data_; }
  const Shape& shape() const { return shape_; }
  const Format& format() const { return format_; }
  int64_t numel() const { return shape_.numel(); }           // logical elements
  size_t stored() const { return format_.elements(shape_); }  // elements in storage (padding included)
  size_t bytes() const { return format_.bytes(shape_); }
  Device device() const { return device_; }
  bool owning() const { return storage_ != nullptr; }
  bool empty() const { return data_ == nullptr; }

  // Same data, another shape of equal numel (flatten; plain formats only). Throws Error otherwise.
  Tensor reshaped(Shape shape) const;
  Tensor clone() const;  // deep copy, owning (host, plain float32 only)
  void zero();           // host, plain float32 only
  void fill(float v);    // host, plain float32 only

 private:
  std::shared_ptr<float> storage_;
  float* data_ = nullptr;
  Shape shape_;
  Format format_;
  Device device_ = Device::cpu;
};

}  // namespace dtrain::layers
