// layers/net.cpp — the DAG: arenas, deterministic initialisation, forward and
// backward with fan-out accumulation.
#include "layers/net.hpp"

#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

// splitmix64: a tiny, well-mixed, portable generator (same numbers everywhere).
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0,1)
};

}  // namespace

void init_values(float* out, size_t count, Init init, int64_t fan_in, int64_t fan_out,
                 uint64_t seed, uint64_t stream) {
  SplitMix rng{seed * 0x2545F4914F6CDD1Dull + stream * 0x9E3779B97F4A7C15ull + 1};
  switch (init) {
    case Init::zeros:
      std::memset(out, 0, count * sizeof(float));
      break;
    case Init::ones:
      for (size_t i = 0; i < count; ++i) out[i] = 1.0f;
      break;
    case Init::uniform_fan_in: {
      double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
      break;
    }
    case Init::kaiming_normal:
    case Init::normal_001: {
      double stddev = init == Init::normal_001 ? 0.01 : std::sqrt(2.0 / static_cast<double>(fan_out));
      for (size_t i = 0; i < count; i += 2) {  // Box–Muller, two values per draw
        double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
        double r = std::sqrt(-2.0 * std::log(u1)) * stddev;
        out[i] = static_cast<float>(r * std::cos(2.0 * M_PI * u2));
        if (i + 1 < count) out[i + 1] = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
      }
      break;
    }
  }
}

Net::Net(Shape input) {
  DT_CHECK(input.numel() > 0, "net input shape ", input.str(), " is empty");
  Node in;
  in.shape = input;
  nodes_.push_back(std::move(in));
}

int Net::add(std::unique_ptr<Layer> layer, std::vector<int> inputs) {
  DT_CHECK(!finalized(), "Net::add after finalize");
  DT_CHECK(static_cast<int>(inputs.size()) == layer->num_inputs(), layer->name(), " takes ",
           layer->num_inputs(), " input(s), got ", inputs.size());
  std::vector<Shape> shapes;
  int id = static_cast<int>(nodes_.size());
  for (int i : inputs) {
    DT_CHECK(i >= 0 && i < id, layer->name(), ": input node ", i, " does not exist yet");
    shapes.push_back(nodes_[i].shape);
  }
  Node node;
  node.shape = layer->setup(shapes);
  node.layer = std::move(layer);
  node.inputs = std::move(inputs);
  for (int i : node.inputs) nodes_[i].consumers.push_back(id);
  nodes_.push_back(std::move(node));
  return id;
}

void Net::finalize(Backend& backend, uint64_t seed) {
  DT_CHECK(!finalized(), "Net::finalize called twice");
  backend_ = &backend;
  // Lay out the arenas in layer order.
  size_t np = 0, nb = 0;
  for (auto& node : nodes_) {
    if (!node.layer) continue;
    node.param_begin = np;
    for (auto& s : node.layer->param_specs()) {
      param_ranges_.push_back({node.layer->name() + "." + s.name, np, static_cast<size_t>(s.shape.numel()), s.no_decay});
      np += static_cast<size_t>(s.shape.numel());
    }
    node.param_end = np;
    for (auto& s : node.layer->buffer_specs()) {
      buffer_ranges_.push_back({node.layer->name() + "." + s.name, nb, static_cast<size_t>(s.shape.numel()), true});
      nb += static_cast<size_t>(s.shape.numel());
    }
  }
  const Device dev = backend.device();
  params_store_ = backend.allocate(std::max<size_t>(np, 1));
  grads_store_ = backend.allocate(std::max<size_t>(np, 1));
  buffers_store_ = backend.allocate(std::max<size_t>(nb, 1));
  params_ = Tensor::view(params_store_.get(), Shape::vec(static_cast<int64_t>(np)), dev);
  grads_ = Tensor::view(grads_store_.get(), Shape::vec(static_cast<int64_t>(np)), dev);
  buffers_ = Tensor::view(buffers_store_.get(), Shape::vec(static_cast<int64_t>(nb)), dev);

  // Initialise on the host, then upload to the device (a plain copy on the CPU).
  std::vector<float> host;
  uint64_t stream = 0;
  size_t po = 0, bo = 0;
  for (auto& node : nodes_) {
    if (!node.layer) continue;
    std::vector<Tensor> p, g, b;
    for (auto& s : node.layer->param_specs()) {
      size_t c = static_cast<size_t>(s.shape.numel());
      host.resize(c);
      init_values(host.data(), c, s.init, s.fan_in, s.fan_out, seed, stream++);
      backend.upload(host.data(), params_.data() + po, c * sizeof(float));
      p.push_back(Tensor::view(params_.data() + po, s.shape, dev));
      g.push_back(Tensor::view(grads_.data() + po, s.shape, dev));
      po += c;
    }
    for (auto& s : node.layer->buffer_specs()) {
      size_t c = static_cast<size_t>(s.shape.numel());
      host.resize(c);
      init_values(host.data(), c, s.init, 1, 1, seed, stream++);
      backend.upload(host.data(), buffers_.data() + bo, c * sizeof(float));
      b.push_back(Tensor::view(buffers_.data() + bo, s.shape, dev));
      bo += c;
    }
    node.layer->bind(&backend, std::move(p), std::move(g), std::move(b));
  }
}

void Net::ensure_activations(int64_t n) {
  if (n == act_n_) return;
  const Device dev = backend_->device();
  acts_.assign(nodes_.size(), Tensor());
  dacts_.assign(nodes_.size(), Tensor());
  act_store_.clear();
  size_t largest = 0;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Shape s = nodes_[i].shape;
    s.d[0] = n;
    size_t c = static_cast<size_t>(s.numel());
    largest = std::max(largest, c);
    auto a = backend_->allocate(c), d = backend_->allocate(c);
    acts_[i] = Tensor::view(a.get(), s, dev);
    dacts_[i] = Tensor::view(d.get(), s, dev);
    act_store_.push_back(std::move(a));
    act_store_.push_back(std::move(d));
  }
  scratch_store_ = backend_->allocate(std::max(largest, static_cast<size_t>(nodes_[0].shape.per_sample() * n)));
  grad_written_.assign(nodes_.size(), 0);
  act_n_ = n;
}

void Net::set_step_seed(uint64_t seed) {
  DT_CHECK(finalized(), "Net::set_step_seed before finalize");
  for (size_t i = 1; i < nodes_.size(); ++i) nodes_[i].layer->set_seed(seed * 0x100000001B3ull + i);
}

const Tensor& Net::forward(const Tensor& x, bool train) {
  DT_CHECK(finalized(), "Net::forward before finalize");
  const Shape& want = nodes_[0].shape;
  DT_CHECK(x.shape().n() >= 1 && x.shape().per_sample() == want.per_sample() &&
               x.shape().c() == want.c(),
           "net input ", x.shape().str(), " does not match [N, ", want.c(), ", ", want.h(), ", ", want.w(), "]");
  ensure_activations(x.shape().n());
  Shape s = want;
  s.d[0] = x.shape().n();
  acts_[0] = Tensor::view(const_cast<float*>(x.data()), s, x.device());
  std::vector<const Tensor*> in;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    in.clear();
    for (int j : nodes_[i].inputs) in.push_back(&acts_[j]);
    nodes_[i].layer->forward(in, acts_[i], train);
  }
  return acts_.back();
}

void Net::backward(const Tensor& dout, const GradReadyFn& on_ready) {
  DT_CHECK(act_n_ > 0, "Net::backward before forward");
  DT_CHECK(dout.numel() == acts_.back().numel(), "backward: gradient ", dout.shape().str(),
           " does not match the output ", acts_.back().shape().str());
  std::fill(grad_written_.begin(), grad_written_.end(), 0);
  const size_t last = nodes_.size() - 1;
  backend_->copy(dout.data(), dacts_[last].data(), static_cast<size_t>(dout.numel()));
  grad_written_[last] = 1;
  std::vector<const Tensor*> in;
  std::vector<float*> din;
  for (size_t i = last; i >= 1; --i) {
    Node& node = nodes_[i];
    DT_CHECK(grad_written_[i], "node ", node.layer->name(), " is not connected to the output");
    in.clear();
    din.clear();
    // Fan-out: the first consumer to reach an input overwrites its gradient,
    // later ones write to scratch and accumulate. (Inputs repeated within one
    // layer are not supported; no model needs them.)
    std::vector<int> accumulate_into;
    for (int j : node.inputs) {
      in.push_back(&acts_[j]);
      if (j == kInput) {
        din.push_back(nullptr);
      } else if (!grad_written_[j]) {
        din.push_back(dacts_[j].data());
        grad_written_[j] = 1;
      } else {
        DT_CHECK(accumulate_into.empty(), node.layer->name(), ": two fan-in gradients to accumulate at once");
        din.push_back(scratch_store_.get());
        accumulate_into.push_back(j);
      }
    }
    node.layer->backward(in, acts_[i], dacts_[i], din);
    for (int j : accumulate_into)
      backend_->accumulate(scratch_store_.get(), dacts_[j].data(), static_cast<size_t>(acts_[j].numel()));
    if (on_ready && node.param_end > node.param_begin) on_ready(node.param_begin, node.param_end);
  }
}

std::vector<GradReadyEvent> Net::grad_ready_events(double* tail_flops) const {
  std::vector<GradReadyEvent> events;
  double flops = 0;
  for (size_t i = nodes_.size() - 1; i >= 1; --i) {  // backward()'s order
    const Node& node = nodes_[i];
    flops += node.layer->forward_flops();
    if (node.param_end > node.param_begin) {
      events.push_back({node.param_begin, node.param_end, flops});
      flops = 0;
    }
  }
  if (tail_flops) *tail_flops = flops;
  return events;
}

std::vector<LayerSummary> Net::summary() const {
  std::vector<LayerSummary> rows;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const auto& l = *nodes_[i].layer;
    LayerSummary r{l.name(), l.kind(), nodes_[i].shape, 0, l.forward_flops()};
    for (auto& s : l.param_specs()) r.params += s.shape.numel();
    rows.push_back(r);
  }
  return rows;
}

double Net::forward_flops() const {
  double f = 0;
  for (size_t i = 1; i < nodes_.size(); ++i) f += nodes_[i].layer->forward_flops();
  return f;
}

}  // namespace dtrain::layers
