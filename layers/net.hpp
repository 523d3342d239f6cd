// layers/net.hpp — a small DAG of layers with one parameter arena.
//
// Nodes are added in topological order (node 0 is the input); a node names its
// input nodes, so sequential chains and residual branches are both plain
// add() calls. finalize() allocates three contiguous arenas on the backend's
// device — parameters, gradients (same layout) and buffers (batch-norm running
// statistics) — initialises them deterministically from a seed, and hands each
// layer views into them. Parameters are laid out in the order layers were
// added, so during backward (reverse order) gradients become ready from the end
// of the arena towards its start: a bucket is a suffix range of the arena.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/backend.hpp"
#include "layers/layer.hpp"

namespace dtrain::layers {

// One parameter tensor's place in an arena (offsets and counts in floats).
struct ParamRange {
  std::string name;  // "conv1.weight"
  size_t offset = 0;
  size_t count = 0;
  bool no_decay = false;  // bias or batch-norm parameter
};

struct LayerSummary {
  std::string name, kind;
  Shape out;
  int64_t params = 0;
  double flops = 0;  // forward, per minibatch of the build size
};

// Called during backward when the gradients [begin, end) (floats) of the arena
// are final: the hook for sending buckets while backward continues.
using GradReadyFn = std::function<void(size_t begin, size_t end)>;

// One on_ready call of backward(), in the order backward() makes them: the
// range [begin, end) (floats) and the forward FLOPs (per minibatch of the
// build size) of the layers backward() runs from the previous call to this
// one, this layer's included. tail_flops of grad_ready_events(): the layers
// after the last call (towards the input, without parameters).
struct GradReadyEvent {
  size_t begin = 0, end = 0;
  double flops = 0;
};

class Net {
 public:
  static constexpr int kInput = 0;

  // input: [N, C, H, W] where N is the minibatch the net is set up for.
  explicit Net(Shape input);
  Net(Net&&) = default;
  Net& operator=(Net&&) = default;

  // Adds a layer reading the given nodes; returns its node id. Throws Error on
  // a bad node id or a shape the layer cannot take.
  int add(std::unique_ptr<Layer> layer, std::vector<int> inputs);
  int add(std::unique_ptr<Layer> layer, int input) { return add(std::move(layer), std::vector<int>{input}); }
  int last() const { return static_cast<int>(nodes_.size()) - 1; }
  Shape shape(int node) const { return nodes_.at(node).shape; }
  Shape output_shape() const { return nodes_.back().shape; }
  Shape input_shape() const { return nodes_.front().shape; }

  // Allocates and initialises the arenas (deterministic in `seed`).
  void finalize(Backend& backend, uint64_t seed);
  bool finalized() const { return backend_ != nullptr; }

  // x: [n, C, H, W], any n ≥ 1; returns the output node's activations [n, …].
  const Tensor& forward(const Tensor& x, bool train);
  // dout: gradient of the loss w.r.t. the output of the last forward(train=true).
  // Overwrites the gradient arena; calls on_ready for each layer's range.
  void backward(const Tensor& dout, const GradReadyFn& on_ready = {});
  // The on_ready calls backward() makes, without running it (the compute
  // stand-in of engine/compute_stand_in.hpp replays them); *tail_flops, when
  // given: the FLOPs of the layers after the last call.
  std::vector<GradReadyEvent> grad_ready_events(double* tail_flops = nullptr) const;
  // Seed for stochastic layers in the next forward (dropout); the Net mixes in
  // the layer index so layers draw independent masks.
  void set_step_seed(uint64_t seed);

  Tensor& params() { return params_; }
  Tensor& grads() { return grads_; }
  Tensor& buffers() { return buffers_; }
  const Tensor& params() const { return params_; }
  const Tensor& grads() const { return grads_; }
  const Tensor& buffers() const { return buffers_; }
  const std::vector<ParamRange>& param_ranges() const { return param_ranges_; }
  const std::vector<ParamRange>& buffer_ranges() const { return buffer_ranges_; }
  size_t num_params() const { return static_cast<size_t>(params_.numel()); }

  std::vector<LayerSummary> summary() const;
  double forward_flops() const;  // per minibatch of the build size

 private:
  struct Node {
    std::unique_ptr<Layer> layer;  // null for the input
    std::vector<int> inputs;
    std::vector<int> consumers;
    Shape shape;
    size_t param_begin = 0, param_end = 0;  // range of this layer in the arena
  };
  void ensure_activations(int64_t n);

  std::vector<Node> nodes_;
  Backend* backend_ = nullptr;
  Tensor params_, grads_, buffers_;
  std::shared_ptr<float> params_store_, grads_store_, buffers_store_;
  std::vector<ParamRange> param_ranges_, buffer_ranges_;
  // Activations and their gradients for the current minibatch size.
  int64_t act_n_ = -1;
  std::vector<Tensor> acts_, dacts_;
  std::vector<std::shared_ptr<float>> act_store_;
  std::shared_ptr<float> scratch_store_;
  std::vector<char> grad_written_;
};

// Fills `out` (count floats, host) by `init` with a stream determined by (seed, stream).
void init_values(float* out, size_t count, Init init, int64_t fan_in, int64_t fan_out,
                 uint64_t seed, uint64_t stream);

}  // namespace dtrain::layers
