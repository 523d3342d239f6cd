// layers/net.cpp — the DAG: arenas, deterministic initialisation, forward and
// backward with fan-out accumulation.
#include "layers/net.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

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

void Net::finalize(Backend& backend, uint64_t seed, NetOptions o) {
  DT_CHECK(!finalized(), "Net::finalize called twice");
  const std::string why = backend.precision_unsupported(o.precision);
  if (!why.empty()) DT_USAGE("option 'precision' = ", precision_name(o.precision), ": ", why);
  backend_ = &backend;
  opts_ = o;
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

bool Net::keeps_weight_mirror() const {
  DT_CHECK(finalized(), "Net::weight_mirror before finalize");
  return opts_.precision == DType::bf16 && opts_.weight_mirror && backend_->reads_weight_mirror();
}

uint16_t* Net::weight_mirror() {
  if (!keeps_weight_mirror()) return nullptr;
  if (mirror_.empty()) mirror_.resize(std::max<size_t>(num_params(), 1));
  return mirror_.data();
}

Tensor Net::alloc(const Shape& s, const Format& f) {
  auto store = backend_->allocate((f.bytes(s) + sizeof(float) - 1) / sizeof(float));
  act_store_.push_back(store);
  return Tensor::view(store.get(), s, f, backend_->device());
}

// The plan for minibatch n (net.hpp): fusions, formats, conversions, buffers.
void Net::plan(int64_t n) {
  if (n == act_n_) return;
  const size_t count = nodes_.size();
  const bool fuse = opts_.fuse && backend_->fuses_relu();
  const bool any = opts_.any_format && backend_->blocked_formats();
  fused_into_.assign(count, -1);
  relu_fused_.assign(count, 0);
  masks_relu_.assign(count, 0);
  in_edge_.assign(count, {});
  out_edges_.assign(count, {});
  edges_.clear();
  out_edge_ = -1;
  acts_.assign(count, Tensor());
  dacts_.assign(count, Tensor());
  act_store_.clear();
  if (fuse)
    for (size_t r = 1; r < count; ++r) {
      const Node& node = nodes_[r];
      if (!node.layer->is_relu()) continue;
      const int i = node.inputs[0];
      if (i != kInput && nodes_[i].consumers.size() == 1 && nodes_[i].layer->fuses_relu()) {
        fused_into_[r] = i;
        relu_fused_[i] = 1;
      }
    }
  // The output node, or the producer whose fused ReLU it is, writes the net's output.
  const int last = static_cast<int>(count) - 1;
  const int writer = fused_into_[last] >= 0 ? fused_into_[last] : last;

  std::vector<Format> fmt(count);
  fmt[kInput] = Format{};
  auto shape_n = [&](int i) {
    Shape s = nodes_[i].shape;
    s.d[0] = n;
    return s;
  };
  for (size_t i = 1; i < count; ++i) {
    Node& node = nodes_[i];
    if (fused_into_[i] >= 0) {
      fmt[i] = fmt[fused_into_[i]];
      continue;
    }
    PlanIn in;
    in.n = static_cast<int>(n);
    for (int j : node.inputs) in.inputs.push_back(fmt[j]);
    in.precision = opts_.precision;
    in.any_format = any;
    in.channels_last = any && opts_.channels_last;
    in.relu = relu_fused_[i];
    in.float_out = static_cast<int>(i) == writer;
    const PlanOut out = node.layer->plan(in);
    DT_CHECK(out.inputs.size() == node.inputs.size(), node.layer->name(), ": plan gave ", out.inputs.size(),
             " input formats for ", node.inputs.size(), " inputs");
    fmt[i] = out.output;
    masks_relu_[i] = relu_fused_[i] && out.masks_relu_grad;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int j = node.inputs[k];
      int e = -1;
      if (out.inputs[k] != fmt[j]) {
        for (int x : out_edges_[j])
          if (edges_[x].fmt == out.inputs[k]) e = x;
        if (e < 0) {
          e = static_cast<int>(edges_.size());
          edges_.push_back({j, out.inputs[k], {}, {}, 0, 0});
          out_edges_[j].push_back(e);
        }
      }
      in_edge_[i].push_back(e);
    }
  }
  if (fmt[last] != Format{}) {
    out_edge_ = static_cast<int>(edges_.size());
    edges_.push_back({last, Format{}, {}, {}, 0, 0});
  }

  // Buffers: a fused ReLU shares its producer's.
  size_t largest = 0;
  for (size_t i = 1; i < count; ++i) {
    if (fused_into_[i] >= 0) {
      acts_[i] = acts_[fused_into_[i]];
      dacts_[i] = dacts_[fused_into_[i]];
      continue;
    }
    acts_[i] = alloc(shape_n(static_cast<int>(i)), fmt[i]);
    dacts_[i] = alloc(shape_n(static_cast<int>(i)), fmt[i]);
    largest = std::max(largest, acts_[i].bytes());
  }
  for (size_t k = 0; k < edges_.size(); ++k) {  // no gradient into the input, none through the output's
    Edge& e = edges_[k];
    e.act = alloc(shape_n(e.from), e.fmt);
    if (e.from != kInput && static_cast<int>(k) != out_edge_) e.grad = alloc(shape_n(e.from), e.fmt);
    largest = std::max(largest, e.act.bytes());
  }
  largest = std::max(largest, static_cast<size_t>(nodes_[0].shape.per_sample() * n) * sizeof(float));
  scratch_store_ = backend_->allocate((largest + sizeof(float) - 1) / sizeof(float));
  grad_written_.assign(count, 0);
  act_n_ = n;
  if (profiling_) {
    for (size_t i = 1; i < count; ++i)
      times_[i - 1].format = fused_into_[i] >= 0 ? "fused" : fmt[i].str();
  }
}

std::string Net::plan_report() const {
  std::string s;
  if (act_n_ < 0) return s;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    s += node.layer->name() + " (" + node.layer->kind() + "): ";
    if (fused_into_[i] >= 0) {
      s += "fused into " + nodes_[fused_into_[i]].layer->name() + "\n";
      continue;
    }
    s += acts_[i].format().str();
    if (relu_fused_[i]) s += std::string(", applies the ReLU after it") + (masks_relu_[i] ? " (masks its gradient)" : "");
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (in_edge_[i][k] >= 0)
        s += ", reads " + (node.inputs[k] == kInput ? std::string("the input") : nodes_[node.inputs[k]].layer->name()) +
             " converted to " + edges_[in_edge_[i][k]].fmt.str();
    s += "\n";
  }
  if (out_edge_ >= 0) s += "output converted from " + acts_.back().format().str() + " to f32 nchw\n";
  return s;
}

std::vector<Net::NodePlan> Net::node_plans() const {
  std::vector<NodePlan> plans;
  if (act_n_ < 0) return plans;
  plans.resize(nodes_.size());
  for (size_t i = 1; i < nodes_.size(); ++i) {
    NodePlan& p = plans[i];
    p.format = acts_[i].format();
    p.fused_into = fused_into_[i];
    p.applies_relu = relu_fused_[i];
    for (int e : in_edge_[i])
      if (e >= 0) p.converted.push_back(edges_[e].fmt);
  }
  return plans;
}

void Net::set_step_seed(uint64_t seed) {
  DT_CHECK(finalized(), "Net::set_step_seed before finalize");
  for (size_t i = 1; i < nodes_.size(); ++i) nodes_[i].layer->set_seed(seed * 0x100000001B3ull + i);
}

void Net::set_profiling(bool on) {
  profiling_ = on;
  if (!on) return;
  times_.assign(nodes_.size() - 1, LayerTime{});
  for (size_t i = 1; i < nodes_.size(); ++i) {
    LayerTime& t = times_[i - 1];
    t.name = nodes_[i].layer->name();
    t.kind = nodes_[i].layer->kind();
    t.flops = nodes_[i].layer->forward_flops();
    if (act_n_ > 0) t.format = fused_into_[i] >= 0 ? "fused" : acts_[i].format().str();
  }
}

namespace {
// The profile's stopwatch over one pass: lap(slot) adds the time since the
// previous lap (after the backend's queued work) to slot. Off: does nothing.
class Laps {
 public:
  Laps(Backend& be, bool on) : be_(be), on_(on) {
    if (on_) t0_ = now();
  }
  void lap(double& slot) {
    if (!on_) return;
    const double t = now();
    slot += t - t0_;
    t0_ = t;
  }

 private:
  double now() {
    be_.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  Backend& be_;
  bool on_;
  double t0_ = 0;
};
}  // namespace

const Tensor& Net::forward(const Tensor& x, bool train) {
  DT_CHECK(finalized(), "Net::forward before finalize");
  const Shape& want = nodes_[0].shape;
  DT_CHECK(x.shape().n() >= 1 && x.shape().per_sample() == want.per_sample() &&
               x.shape().c() == want.c() && x.format() == Format{},
           "net input ", x.shape().str(), " (", x.format().str(), ") does not match [N, ", want.c(), ", ", want.h(),
           ", ", want.w(), "] f32 nchw");
  plan(x.shape().n());
  ++pass_;
  const uint16_t* mirror = mirror_current_ ? mirror_.data() : nullptr;
  if (train) mirror_current_ = false;  // used up (weight_mirror())
  Shape s = want;
  s.d[0] = x.shape().n();
  acts_[0] = Tensor::view(const_cast<float*>(x.data()), s, x.device());
  std::vector<const Tensor*> in;
  Laps laps(*backend_, profiling_);
  for (size_t i = 1; i < nodes_.size(); ++i) {
    if (fused_into_[i] >= 0) continue;
    Node& node = nodes_[i];
    in.clear();
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int e = in_edge_[i][k];
      if (e < 0) {
        in.push_back(&acts_[node.inputs[k]]);
        continue;
      }
      Edge& edge = edges_[e];
      if (edge.pass != pass_) {
        backend_->convert(acts_[edge.from], edge.act);
        edge.pass = pass_;
      }
      in.push_back(&edge.act);
    }
    laps.lap(times_[i - 1].convert_s);
    node.layer->set_params_bf16(mirror != nullptr && node.param_end > node.param_begin ? mirror + node.param_begin
                                                                                      : nullptr);
    node.layer->forward(in, acts_[i], train);
    if (profiling_) {
      laps.lap(times_[i - 1].forward_s);
      ++times_[i - 1].calls;
    }
  }
  if (out_edge_ < 0) return acts_.back();
  backend_->convert(acts_.back(), edges_[out_edge_].act);
  laps.lap(times_.back().convert_s);
  return edges_[out_edge_].act;
}

void Net::contribute(Tensor& target, char& written, const std::function<void(Tensor&)>& write) {
  if (!written) {
    write(target);
    written = 1;
    return;
  }
  Tensor s = Tensor::view(scratch_store_.get(), target.shape(), target.format(), target.device());
  write(s);
  backend_->accumulate_into(s, target);
}

void Net::backward(const Tensor& dout, const GradReadyFn& on_ready) {
  DT_CHECK(act_n_ > 0, "Net::backward before forward");
  DT_CHECK(dout.numel() == acts_.back().numel() && dout.format() == Format{}, "backward: gradient ",
           dout.shape().str(), " (", dout.format().str(), ") does not match the output ", acts_.back().shape().str(),
           " f32 nchw");
  std::fill(grad_written_.begin(), grad_written_.end(), 0);
  for (Edge& e : edges_) e.grad_written = 0;
  grad_bound_.assign(nodes_.size(), std::numeric_limits<double>::infinity());
  const size_t last = nodes_.size() - 1;
  Laps laps(*backend_, profiling_);
  {
    const Tensor d = dout.reshaped(acts_.back().shape());
    backend_->convert(d, dacts_[last]);
    grad_written_[last] = 1;
  }
  std::vector<const Tensor*> in;
  std::vector<float*> din;
  std::vector<std::pair<Tensor*, Tensor>> accumulate;  // (target, scratch view) after the layer
  for (size_t i = last; i >= 1; --i) {
    Node& node = nodes_[i];
    // Gradients that consumers wrote in converted formats come back first.
    for (int e : out_edges_[i]) {
      Edge& edge = edges_[e];
      if (!edge.grad_written) continue;
      contribute(dacts_[i], grad_written_[i], [&](Tensor& t) { backend_->convert(edge.grad, t); });
    }
    if (fused_into_[i] >= 0) {  // its gradient is its producer's buffer
      grad_written_[fused_into_[i]] |= grad_written_[i];
      laps.lap(times_[i - 1].convert_s);
      continue;
    }
    DT_CHECK(grad_written_[i], "node ", node.layer->name(), " is not connected to the output");
    if (relu_fused_[i] && !masks_relu_[i]) backend_->relu_grad(acts_[i], dacts_[i], dacts_[i]);
    laps.lap(times_[i - 1].convert_s);
    in.clear();
    din.clear();
    accumulate.clear();
    // Fan-out: the first consumer to reach an input overwrites its gradient,
    // later ones write to scratch and accumulate. (Inputs repeated within one
    // layer are not supported; no model needs them.)
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int j = node.inputs[k];
      const int e = in_edge_[i][k];
      in.push_back(e < 0 ? &acts_[j] : &edges_[e].act);
      if (j == kInput) {
        din.push_back(nullptr);
        continue;
      }
      Tensor& target = e < 0 ? dacts_[j] : edges_[e].grad;
      char& written = e < 0 ? grad_written_[j] : edges_[e].grad_written;
      if (!written) {
        din.push_back(target.data());
        written = 1;
      } else {
        DT_CHECK(accumulate.empty(), node.layer->name(), ": two fan-in gradients to accumulate at once");
        Tensor s = Tensor::view(scratch_store_.get(), target.shape(), target.format(), target.device());
        din.push_back(s.data());
        accumulate.emplace_back(&target, s);
      }
    }
    node.layer->backward(in, acts_[i], dacts_[i], din);
    grad_bound_[i] = node.layer->grads_bound().value_or(std::numeric_limits<double>::quiet_NaN());
    for (auto& [target, s] : accumulate) backend_->accumulate_into(s, *target);
    laps.lap(times_[i - 1].backward_s);
    if (on_ready && node.param_end > node.param_begin) on_ready(node.param_begin, node.param_end);
  }
}

namespace {

// The complement in [0, total) of `skip`'s ranges (disjoint, in order), merged.
std::vector<std::pair<size_t, size_t>> complement(const std::vector<std::pair<size_t, size_t>>& skip, size_t total) {
  std::vector<std::pair<size_t, size_t>> r;
  size_t pos = 0;
  for (const auto& [lo, hi] : skip) {
    if (pos < lo) r.emplace_back(pos, lo);
    pos = hi;
  }
  if (pos < total) r.emplace_back(pos, total);
  return r;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> Net::unproven_grad_ranges() const {
  std::vector<std::pair<size_t, size_t>> proven;
  for (const GradBound& b : grad_bounds())
    if (b.bound < kGradBoundLimit) proven.emplace_back(b.begin, b.end);
  return complement(proven, num_params());
}

void Net::set_grad_bounds(bool on) {
  for (Node& node : nodes_)
    if (node.layer) node.layer->set_bound_grads(on);
}

std::vector<Net::GradBound> Net::grad_bounds() const {
  std::vector<GradBound> r;
  for (size_t i = 1; i < nodes_.size(); ++i) {  // nodes lie in the arena in node order
    const Node& node = nodes_[i];
    if (node.param_end == node.param_begin) continue;
    const double b = i < grad_bound_.size() ? grad_bound_[i] : (node.layer->grads_bound() ? std::numeric_limits<double>::infinity()
                                                                                          : std::numeric_limits<double>::quiet_NaN());
    if (!std::isnan(b)) r.push_back({node.param_begin, node.param_end, b});
  }
  return r;
}

std::vector<std::pair<size_t, size_t>> Net::unbounded_grad_ranges() const {
  std::vector<std::pair<size_t, size_t>> bounded;
  for (const GradBound& b : grad_bounds()) bounded.emplace_back(b.begin, b.end);
  return complement(bounded, num_params());
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
