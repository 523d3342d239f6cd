// engine/bench_compute.cpp — `dtrain bench compute`: one worker's training
// step alone (no data loading, no exchange), timed as a whole and per layer,
// with the machine's GEMM peak next to it.
//
//   dtrain bench compute --model resnet50 --minibatch 16 --threads 2 [--precision bf16]
//                        [--steps 10] [--warmup 2] [--profile] [--plan] [--no-peak] [--json F]
//   dtrain bench compute --peak-only [--precision bf16] [--threads 2]
//
// A step is what the trainer's worker computes: forward (training mode) of a
// random minibatch x [B, C, H, W] ~ N(0, 1) with random labels, softmax
// cross-entropy, backward, and the SGD update of the whole arena (momentum
// 0.9, lr 0.01). Figures:
//   step ms        median (min … max) over --steps timed steps after --warmup
//   images/s       B / median step
//   GFLOP/s        training FLOPs per step / median step, with training FLOPs
//                  = 3 × the forward FLOPs of the model's layers (forward,
//                  backward-data and backward-weights each cost one forward:
//                  the usual count; multiply-add = 2 FLOPs)
//   GEMM peak      layers::gemm_gflops (oneDNN matmul 2048³) in the step's
//                  precision and thread count; "of peak" = GFLOP/s / peak
// --profile adds the per-layer table of the timed steps (Net::set_profiling:
// a host clock around each layer, so the sum is slightly more than the step),
// and the SGD update's share. --plan prints the Net's execution plan
// (formats, fused ReLUs, conversions). --json appends one JSON object.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <tuple>

#include "core/error.hpp"
#include "engine/commands.hpp"
#include "engine/config.hpp"  // kMaxThreads, kMaxMinibatch
#include "engine/options.hpp"
#include "engine/report.hpp"  // median
#include "layers/cpu/onednn.hpp"
#include "layers/models.hpp"
#include "layers/sgd.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int cmd_bench_compute(const std::vector<std::string>& args) {
  std::string model = "lenet5", precision = "fp32", backend_name = "cpu", json;
  int minibatch = 64, threads = 1, steps = 10, warmup = 2;
  bool profile = false, show_plan = false, no_peak = false, no_fuse = false, plain = false, peak_only = false,
       no_mirror = false, channels_last = false;
  po::options_description desc(
      "dtrain bench compute --model M [--minibatch B] [--threads T] [--precision fp32|bf16] [--steps S]");
  desc.add_options()("help,h", "this help")("model", po::value(&model)->default_value(model), layers::model_list_text().c_str())(
      "minibatch", po::value(&minibatch)->default_value(minibatch), "images per step")(
      "threads", po::value(&threads)->default_value(threads), "compute threads")(
      "precision", po::value(&precision)->default_value(precision), "fp32 | bf16")(
      "backend", po::value(&backend_name)->default_value(backend_name), "cpu | reference")(
      "steps", po::value(&steps)->default_value(steps), "timed steps")(
      "warmup", po::value(&warmup)->default_value(warmup), "untimed steps first")(
      "profile", po::bool_switch(&profile), "per-layer times")(
      "plan", po::bool_switch(&show_plan), "the Net's execution plan (formats, fusions, conversions)")(
      "no-fuse", po::bool_switch(&no_fuse), "run every ReLU as a layer of its own (for comparison)")(
      "plain", po::bool_switch(&plain), "keep activations in plain NCHW between layers (for comparison)")(
      "channels-last", po::bool_switch(&channels_last),
      "convolutions prefer nhwc where a JIT kernel takes it (for comparison; oneDNN picks it itself where fastest)")(
      "no-weight-mirror", po::bool_switch(&no_mirror),
      "bf16: convert the f32 weights in each forward instead of reading the bf16 copy the SGD pass writes (for comparison)")(
      "no-peak", po::bool_switch(&no_peak), "skip the GEMM peak measurement")(
      "peak-only", po::bool_switch(&peak_only), "only the GEMM peak (with --json: {\"gemm_peak_gflops\": …})")(
      "json", po::value(&json), "append a JSON object with the figures to this file");
  po::variables_map vm = parse_command_line(args, desc, "dtrain bench compute: ");
  if (vm.count("help")) {
    std::cout << desc;
    return kExitOk;
  }
  for (auto [name, value, least] : {std::tuple{"minibatch", minibatch, 1}, std::tuple{"threads", threads, 1},
                                     std::tuple{"steps", steps, 1}, std::tuple{"warmup", warmup, 0}})
    if (value < least) DT_USAGE("dtrain bench compute: option '", name, "' = ", value, ": must be >= ", least);
  for (auto [name, value, most] : {std::tuple{"minibatch", minibatch, kMaxMinibatch}, std::tuple{"threads", threads, kMaxThreads}})
    if (value > most) DT_USAGE("dtrain bench compute: option '", name, "' = ", value, ": must be <= ", most, " (as in dtrain train)");
  if (peak_only && no_peak) DT_USAGE("dtrain bench compute: options 'peak-only' and 'no-peak' exclude each other");
  if (vm.count("json") && json.empty())
    DT_USAGE("dtrain bench compute: option 'json' is empty (leave it out for no JSON file)");
  if (no_mirror && precision != "bf16")
    DT_USAGE("dtrain bench compute: option 'no-weight-mirror' is read with --precision bf16 only (the bf16 weight "
             "copy), got --precision ", precision);
  if (peak_only)
    refuse_unread_options(vm, {"model", "minibatch", "backend", "steps", "warmup", "profile", "plan", "no-fuse",
                               "plain", "channels-last", "no-weight-mirror"},
                          "dtrain bench compute: ", "with --peak-only (it times one oneDNN matmul)");
  if (plain && channels_last) DT_USAGE("dtrain bench compute: options 'plain' and 'channels-last' exclude each other");
  if (channels_last && backend_name != "cpu")
    DT_USAGE("dtrain bench compute: option 'channels-last' needs --backend cpu (", backend_name, " keeps plain NCHW)");
  // The JSON file is opened before any work, so a path that cannot be written is
  // refused at once, not after the run; every record is checked when written.
  std::ofstream json_out;
  if (!json.empty()) {
    json_out.open(json, std::ios::app);
    if (!json_out) DT_USAGE("dtrain bench compute: option 'json': cannot open '", json, "' for appending: ", std::strerror(errno));
  }
  auto write_json = [&](const nlohmann::json& j) {
    json_out << j.dump() << "\n" << std::flush;
    if (!json_out) DT_FAIL("dtrain bench compute: writing to '", json, "' failed: ", std::strerror(errno));
  };
  const layers::DType prec = layers::parse_precision(precision);
  layers::set_cpu_threads(threads);
  // A precision this CPU cannot compute in is refused here, as `dtrain train`
  // refuses it (layers/net.cpp), not by a oneDNN error from inside the peak
  // or the plan. The peak is the cpu backend's (oneDNN matmul) whatever --backend.
  auto backend = layers::make_backend(peak_only ? std::string("cpu") : backend_name);
  if (const std::string why = backend->precision_unsupported(prec); !why.empty())
    DT_USAGE("dtrain bench compute: option 'precision' = ", layers::precision_name(prec), ": ", why);
  if (peak_only) {
    const double peak = layers::gemm_gflops(prec);
    std::printf("GEMM peak: %.1f GFLOP/s (oneDNN matmul 2048³ %s, %d thread(s))\n", peak, layers::dtype_name(prec),
                threads);
    if (!json.empty())
      write_json({{"kind", "gemm_peak"}, {"precision", precision}, {"threads", threads}, {"gemm_peak_gflops", peak}});
    return kExitOk;
  }
  layers::ModelOptions mo;
  mo.minibatch = minibatch;
  layers::Net net = layers::make_model(model, mo);
  layers::NetOptions no;
  no.precision = prec;
  no.fuse = !no_fuse;
  no.any_format = !plain;
  no.channels_last = channels_last;
  no.weight_mirror = !no_mirror;
  net.finalize(*backend, 1, no);
  layers::Sgd sgd(*backend, layers::SgdOptions{}, net.param_ranges(), net.num_params());

  const layers::Shape in = net.input_shape();
  const int k = static_cast<int>(net.output_shape().c());
  layers::Tensor x(layers::Shape(minibatch, in.c(), in.h(), in.w()));
  std::vector<int32_t> labels(static_cast<size_t>(minibatch));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = normal(rng);
  for (auto& l : labels) l = static_cast<int32_t>(rng() % static_cast<unsigned>(k));
  layers::Tensor probs(layers::Shape::flat(minibatch, k)), dlogits(layers::Shape::flat(minibatch, k));

  double sgd_s = 0;
  auto step = [&](bool timed) {
    const layers::Tensor& logits = net.forward(x, true);
    backend->softmax_xent_forward(logits.data(), labels.data(), minibatch, k, probs.data(), nullptr);
    backend->softmax_xent_backward(probs.data(), labels.data(), minibatch, k, 1.0f / minibatch, dlogits.data());
    net.backward(dlogits);
    const double t0 = now_s();
    sgd.step(net, 0.01f);
    backend->synchronize();
    if (timed) sgd_s += now_s() - t0;
  };
  for (int i = 0; i < warmup; ++i) step(false);
  if (profile) net.set_profiling(true);
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    const double t0 = now_s();
    step(true);
    times.push_back(now_s() - t0);
  }
  net.set_profiling(false);
  const auto [fastest, slowest] = std::minmax_element(times.begin(), times.end());
  const double med = median(times);
  const double train_flops = 3.0 * net.forward_flops() * minibatch / net.input_shape().n();
  const double gflops = train_flops / med / 1e9;
  const double peak = no_peak ? 0.0 : layers::gemm_gflops(prec);

  std::printf("dtrain bench compute: model %s, minibatch %d, %d thread(s), %s, backend %s%s%s%s\n", model.c_str(),
              minibatch, threads, layers::precision_name(prec), backend->name().c_str(), no_fuse ? ", no fusion" : "",
              plain ? ", plain formats" : channels_last ? ", channels last" : "",
              prec == layers::DType::bf16 && !net.keeps_weight_mirror() ? ", no weight mirror" : "");
  std::printf("step %.2f ms (median of %d; %.2f … %.2f), %.2f images/s, %.2f GFLOP per step (3 × forward), %.1f GFLOP/s",
              med * 1e3, steps, *fastest * 1e3, *slowest * 1e3, minibatch / med, train_flops / 1e9, gflops);
  if (peak > 0) std::printf(" = %.0f%% of the GEMM peak %.0f GFLOP/s (oneDNN matmul 2048³ %s)", 100 * gflops / peak, peak,
                            layers::dtype_name(prec));
  std::printf("\nSGD update of %zu parameters: %.2f ms per step (%.1f%%)\n", net.num_params(), sgd_s / steps * 1e3,
              100 * sgd_s / steps / med);
  if (profile) {
    std::printf("%-26s %-15s %-13s %9s %9s %10s %9s\n", "layer", "kind", "format", "fwd ms", "bwd ms", "convert ms",
                "GFLOP/s");
    double f = 0, b = 0, c = 0;
    for (const auto& t : net.profile()) {
      const double n = std::max<int64_t>(1, t.calls);
      const double fb = (t.forward_s + t.backward_s) / n;
      std::printf("%-26s %-15s %-13s %9.3f %9.3f %10.3f %9.1f\n", t.name.c_str(), t.kind.c_str(), t.format.c_str(),
                  1e3 * t.forward_s / n, 1e3 * t.backward_s / n, 1e3 * t.convert_s / n,
                  fb > 0 ? 3.0 * t.flops * minibatch / net.input_shape().n() / fb / 1e9 : 0.0);
      f += t.forward_s / n;
      b += t.backward_s / n;
      c += t.convert_s / n;
    }
    std::printf("%-26s %-15s %-13s %9.3f %9.3f %10.3f\n", "total", "", "", 1e3 * f, 1e3 * b, 1e3 * c);
  }
  if (show_plan) std::printf("plan:\n%s", net.plan_report().c_str());
  if (!json.empty()) {
    nlohmann::json j = {{"kind", "bench_compute"}, {"model", model},           {"minibatch", minibatch},
                        {"threads", threads},      {"precision", precision},    {"backend", backend->name()},
                        {"step_ms", med * 1e3},    {"images_per_s", minibatch / med},
                        {"train_gflop", train_flops / 1e9}, {"gflops", gflops}, {"gemm_peak_gflops", peak},
                        {"sgd_ms", sgd_s / steps * 1e3}, {"fuse", !no_fuse}, {"any_format", !plain}, {"channels_last", channels_last},
                        {"weight_mirror", net.keeps_weight_mirror()}};
    write_json(j);
  }
  return kExitOk;
}

}  // namespace dtrain::engine
