// layers/layer.hpp — a layer of the Net: shapes, parameters and kernels.
//
// A layer is set up once with its input shapes (N = the minibatch it was built
// for), declares its trainable parameters and non-trainable buffers (batch-norm
// running statistics), and receives views into the Net's arenas. Its kernels
// come from the Backend and are re-created when the minibatch size changes
// (the last, partial evaluation batch).
//
// Gradient semantics follow backend.hpp: backward() OVERWRITES din[i] (nullptr:
// not needed) and the parameter gradients.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/backend.hpp"
#include "layers/tensor.hpp"

namespace dtrain::layers {

// How a parameter is initialised (deterministic from the Net's seed).
enum class Init {
  zeros,
  ones,
  uniform_fan_in,   // U(−1/√fan_in, 1/√fan_in): torch's default for Conv2d/Linear
  kaiming_normal,   // N(0, 2/fan_out): torchvision ResNet convolutions (He et al. 2015)
  normal_001,       // N(0, 0.01²): Caffe's AlexNet weights
};

struct ParamSpec {
  std::string name;  // "weight", "bias", "running_mean", …
  Shape shape;
  Init init = Init::zeros;
  int64_t fan_in = 1, fan_out = 1;
  bool no_decay = false;  // a bias or a batch-norm parameter (weight decay optional)
};

// What the Net tells a layer when it plans a minibatch size (Net's plan, on
// the first forward of each minibatch size), and what the layer answers.
struct PlanIn {
  int n = 1;                     // minibatch
  std::vector<Format> inputs;    // the formats its inputs are stored in
  DType precision = DType::f32;  // the net's compute precision
  bool any_format = false;       // the backend's kernels may choose blocked formats
  bool channels_last = false;    // NetOptions::channels_last
  bool relu = false;             // apply the ReLU that follows (asked only when fuses_relu())
  bool float_out = false;        // the net's output: write float32 if the layer can
};
struct PlanOut {
  std::vector<Format> inputs;    // the formats it reads (the Net converts what differs)
  Format output;                 // the format it writes; its gradient comes in the same one
  bool masks_relu_grad = false;  // with relu: backward() masks dy itself (else the Net does, in place)
};

// A kernel descriptor with the input x [N, C, H, W]'s C, H, W and the
// minibatch n filled in (every descriptor of backend.hpp starts with n, c, h, w).
template <typename Desc>
Desc nchw_desc(const Shape& x, int n) {
  Desc d;
  d.n = n;
  d.c = static_cast<int>(x.c());
  d.h = static_cast<int>(x.h());
  d.w = static_cast<int>(x.w());
  return d;
}

// Layer::grads_bound below this (FLT_MAX/4) proves the gradients finite: the
// factor 4 covers float rounding, at most (1 + 2⁻²⁴)^k < 1.01 for the k ≤ 2¹⁷
// additions of a minibatch ≤ 65536 and of the ranks' sum.
inline constexpr double kGradBoundLimit = static_cast<double>(std::numeric_limits<float>::max()) / 4;

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual std::string kind() const = 0;
  virtual int num_inputs() const { return 1; }

  // in: input shapes (N included) → output shape. Throws Error on a shape the layer cannot take.
  virtual Shape setup(const std::vector<Shape>& in) = 0;
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual std::vector<ParamSpec> buffer_specs() const { return {}; }
  // Views into the arenas, in the order of the specs.
  void bind(Backend* backend, std::vector<Tensor> params, std::vector<Tensor> grads,
            std::vector<Tensor> buffers);

  // Creates the kernels for p.n (and whenever the plan changes). The default
  // (kinds without formats of their own): make_kernels(p.n), every input
  // and the output plain in the precision of the first input.
  virtual PlanOut plan(const PlanIn& p);
  // True when the kind can apply a ReLU to its output in the same pass.
  virtual bool fuses_relu() const { return false; }
  // True for the ReLU kind (which the Net may fuse into its producer).
  virtual bool is_relu() const { return false; }

  // in: the inputs in the formats plan() asked for; out: in plan()'s output format.
  virtual void forward(const std::vector<const Tensor*>& in, Tensor& out, bool train) = 0;
  virtual void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                        const std::vector<float*>& din) = 0;

  // A bound on the magnitude of every partial sum the last backward() formed
  // in the parameter gradients it wrote, from what it read rather than from
  // the gradients (the linear kind: ‖dy‖·‖x‖, kinds/linear.cpp). Below
  // kGradBoundLimit none of them can be Inf or NaN, so a non-finite check may
  // skip them (Net::unproven_grad_ranges); +Inf when the last backward could
  // not bound them (or there was none). std::nullopt, the default: the kind
  // never bounds its gradients, only reading them tells. The bounds of several
  // ranks' gradients add up to a bound of their sum (engine/grad_check.hpp).
  virtual std::optional<double> grads_bound() const { return std::nullopt; }
  // Whether backward() works out grads_bound() (Net::set_grad_bounds; on by
  // default): off, the kinds that bound give +Inf and read nothing for it.
  void set_bound_grads(bool on) { bound_grads_ = on; }

  // Forward floating-point operations for the set-up shapes (multiply-add = 2).
  virtual double forward_flops() const { return 0.0; }
  // Seed for stochastic layers (dropout), set by the Net each step.
  void set_seed(uint64_t seed) { seed_ = seed; }
  // The Net's weight mirror at this layer's first parameter (bf16_bits of its
  // parameters, in the order of param_specs()) for the next forward and its
  // backward, or nullptr (Net::weight_mirror); set by the Net before each forward.
  void set_params_bf16(const uint16_t* p) { params_bf16_ = p; }

  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<Tensor>& grads() const { return grads_; }
  const std::vector<Tensor>& buffers() const { return buffers_; }

 protected:
  // Re-creates the kernels for minibatch n when it differs from the last one.
  void ensure_batch(int n);
  // Creates the kernels for minibatch n with exec_ (what the last plan() asked).
  virtual void make_kernels(int n) { (void)n; }
  // The KernelExec of p for the first input.
  static KernelExec exec_of(const PlanIn& p);
  // plan() of a layer over one kernel: makes it with p's KernelExec, and the
  // kernel's formats are the layer's (Format::for_shape: an nhwc of one channel
  // or one pixel is said as the nchw it is, so the Net converts nothing there).
  template <class K>
  PlanOut plan_kernel(const PlanIn& p, const std::unique_ptr<K>& kernel) {
    exec_ = exec_of(p);
    make_kernels(p.n);
    kernel_n_ = p.n;
    return {{kernel->src_format().for_shape(in_shapes_[0])}, kernel->dst_format().for_shape(out_shape_),
            kernel->masks_relu_grad()};
  }

  std::string name_;
  Backend* backend_ = nullptr;
  std::vector<Tensor> params_, grads_, buffers_;
  const uint16_t* params_bf16_ = nullptr;  // set_params_bf16()
  bool bound_grads_ = true;                 // set_bound_grads()
  std::vector<Shape> in_shapes_;
  Shape out_shape_;
  int kernel_n_ = -1;
  KernelExec exec_;  // what make_kernels() passes to the backend
  uint64_t seed_ = 0;
};

}  // namespace dtrain::layers
