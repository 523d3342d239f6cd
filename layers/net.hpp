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
// The arenas are always float32 in the torch layouts, whatever the formats
// the kernels compute in.
//
// Execution plan (made on the first forward of each minibatch size): in node
// order, each layer is told the formats its inputs are stored in and chooses
// the formats it reads and writes (Layer::plan; on the "cpu" backend blocked
// nChw16c activations, and bf16 with NetOptions::precision; format.hpp). The
// Net converts only where a producer's format and a consumer's differ (an
// edge with a buffer of its own, shared by the consumers that want the same
// format, whose gradient is converted back in backward); the net's input is
// the caller's float32 NCHW and its output is converted to float32 NCHW when
// the last layer writes another format. A ReLU whose producer can apply it
// (Layer::fuses_relu: convolution, linear, batch norm, the residual add) and
// feeds nothing else is fused into it when the backend fuses (Backend::
// fuses_relu): the ReLU node then shares the producer's buffers and costs no
// pass of its own. An activation's gradient has the activation's format.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
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

// How a Net runs on its backend (finalize()).
struct NetOptions {
  DType precision = DType::f32;  // activations and weight copies (bf16: mixed precision)
  bool fuse = true;              // fuse ReLUs where the backend can (Backend::fuses_relu)
  bool any_format = true;        // let kernels choose blocked formats where the backend can
  bool channels_last = false;    // with any_format: convolutions prefer nhwc where a JIT kernel
                                 // takes it (oneDNN picks nhwc itself where that is fastest, e.g.
                                 // bf16 on AMX; this asks for it elsewhere: tests, comparisons)
  bool weight_mirror = true;     // bf16: keep the weight mirror where the backend reads it (weight_mirror())
};

// Time spent per node since profiling was switched on (Net::set_profiling):
// seconds in the layer's forward and backward, and in the conversions of its
// inputs (forward) and of their gradients (backward); calls counts forwards.
struct LayerTime {
  std::string name, kind;
  std::string format;  // the output's format; "fused" for a ReLU its producer applies
  double forward_s = 0, backward_s = 0, convert_s = 0;
  double flops = 0;  // forward FLOPs per minibatch of the build size
  int64_t calls = 0;
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

  // Allocates and initialises the arenas (deterministic in `seed`). Throws
  // UsageError naming option 'precision' when the backend cannot compute in
  // o.precision.
  void finalize(Backend& backend, uint64_t seed, NetOptions o = {});
  const NetOptions& options() const { return opts_; }
  bool finalized() const { return backend_ != nullptr; }

  // x: [n, C, H, W], any n ≥ 1; returns the output node's activations [n, …].
  const Tensor& forward(const Tensor& x, bool train);
  // dout: gradient of the loss w.r.t. the output of the last forward(train=true).
  // Overwrites the gradient arena; calls on_ready for each layer's range.
  void backward(const Tensor& dout, const GradReadyFn& on_ready = {});
  // The arena ranges [begin, end) (floats, merged, in arena order) whose
  // gradients the last backward() did not prove finite (Layer::grads_bound
  // not below kGradBoundLimit): all a non-finite check of that backward's
  // gradients has to read. The whole arena before the first backward().
  // Whoever writes the gradient arena other than backward() must check it all.
  std::vector<std::pair<size_t, size_t>> unproven_grad_ranges() const;
  // Each layer that bounds its gradients (Layer::grads_bound has a value), in
  // arena order: its range and the last backward()'s bound (+Inf before one);
  // and the ranges of the layers that never do, merged. Which layers bound is
  // fixed by the net's kinds: the same on every rank of a job.
  struct GradBound {
    size_t begin = 0, end = 0;
    double bound = 0;
  };
  std::vector<GradBound> grad_bounds() const;
  std::vector<std::pair<size_t, size_t>> unbounded_grad_ranges() const;
  // Off: backward() does not work the bounds out (each a read of a layer's x
  // and dy) and they are +Inf; for a caller whose check would not use them.
  void set_grad_bounds(bool on);
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
  // The bf16 weight mirror: bf16_bits (format.hpp) of every parameter, in the
  // arena's order, for the bf16 kernels to read instead of converting the f32
  // master weights on each forward (2 bytes read per weight instead of 4 read
  // and 2 written). The optimizer writes it in the pass that updates the
  // parameters (Sgd::step(Net&, lr)) and then calls weight_mirror_written();
  // the next forward(train=true) and its backward read it, as do forwards
  // with train=false before that one, and that forward uses it up: later
  // forwards convert again until it is written anew. So a step whose update
  // is skipped, or a worker whose parameters come from elsewhere (parameter
  // servers, a checkpoint loaded before the first update), converts; whatever
  // writes the parameters after the optimizer and before the next forward must
  // call weight_mirror_stale() (nothing in dtrain does today).
  // nullptr (and no memory) unless keeps_weight_mirror(): the precision is
  // bf16, the backend reads a mirror (Backend::reads_weight_mirror) and
  // NetOptions::weight_mirror.
  uint16_t* weight_mirror();
  bool keeps_weight_mirror() const;
  void weight_mirror_written() { mirror_current_ = !mirror_.empty(); }
  void weight_mirror_stale() { mirror_current_ = false; }
  bool weight_mirror_current() const { return mirror_current_; }
  const std::vector<ParamRange>& param_ranges() const { return param_ranges_; }
  const std::vector<ParamRange>& buffer_ranges() const { return buffer_ranges_; }
  size_t num_params() const { return static_cast<size_t>(params_.numel()); }

  std::vector<LayerSummary> summary() const;
  double forward_flops() const;  // per minibatch of the build size

  // Per-layer timing of forward() and backward(), a host clock around each
  // layer after Backend::synchronize(): true clears the times and starts,
  // false stops.
  void set_profiling(bool on);
  const std::vector<LayerTime>& profile() const { return times_; }
  // The plan of the last forward(): a line per node (its format, a fused
  // ReLU, the conversions it reads); empty before the first forward().
  std::string plan_report() const;
  struct NodePlan {
    Format format;             // of its output (and gradient)
    int fused_into = -1;       // a ReLU its producer applies: that node
    bool applies_relu = false;  // it applies the ReLU after it
    std::vector<Format> converted;  // the formats its inputs are converted to (one per conversion)
  };
  // Per node of the last forward()'s plan (node 0, the input: f32 nchw);
  // empty before the first forward().
  std::vector<NodePlan> node_plans() const;

 private:
  struct Node {
    std::unique_ptr<Layer> layer;  // null for the input
    std::vector<int> inputs;
    std::vector<int> consumers;
    Shape shape;
    size_t param_begin = 0, param_end = 0;  // range of this layer in the arena
  };
  // Node `from`'s activation converted into format `fmt`, for the consumers
  // that read it so; its gradient is converted back in backward.
  struct Edge {
    int from = 0;
    Format fmt;
    Tensor act, grad;
    char grad_written = 0;
    uint64_t pass = 0;  // the forward pass that last converted it
  };
  void plan(int64_t n);
  Tensor alloc(const Shape& s, const Format& f);
  // A gradient contribution to `target`: write() fills the tensor it is given
  // (target itself for the first contribution, else scratch that is then
  // accumulated into target).
  void contribute(Tensor& target, char& written, const std::function<void(Tensor&)>& write);

  std::vector<Node> nodes_;
  Backend* backend_ = nullptr;
  NetOptions opts_;
  Tensor params_, grads_, buffers_;
  std::shared_ptr<float> params_store_, grads_store_, buffers_store_;
  std::vector<ParamRange> param_ranges_, buffer_ranges_;
  // The plan, the activations and their gradients for the current minibatch size.
  int64_t act_n_ = -1;
  std::vector<Tensor> acts_, dacts_;
  std::vector<int> fused_into_;              // a fused ReLU node → its producer, else −1
  std::vector<char> relu_fused_;             // the node applies the ReLU after it
  std::vector<char> masks_relu_;             // … and masks that ReLU's gradient itself
  std::vector<std::vector<int>> in_edge_;    // per node and input: the edge it reads, or −1
  std::vector<std::vector<int>> out_edges_;  // per node: the edges converted from it
  std::vector<Edge> edges_;
  int out_edge_ = -1;                        // the output's conversion to float32 NCHW
  std::vector<std::shared_ptr<float>> act_store_;
  std::shared_ptr<float> scratch_store_;
  std::vector<char> grad_written_;
  std::vector<double> grad_bound_;  // per node: Layer::grads_bound() after the last backward (NaN: none; empty before one)
  uint64_t pass_ = 0;
  std::vector<uint16_t> mirror_;  // weight_mirror(), allocated on the first call
  bool mirror_current_ = false;
  bool profiling_ = false;
  std::vector<LayerTime> times_;
};

// Fills `out` (count floats, host) by `init` with a stream determined by (seed, stream).
void init_values(float* out, size_t count, Init init, int64_t fan_in, int64_t fan_out,
                 uint64_t seed, uint64_t stream);

}  // namespace dtrain::layers
