// engine/bench_io.cpp — `dtrain bench io` (see bench_io.hpp for the modes and
// what each number means).
#include "engine/bench_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "engine/config.hpp"   // kMaxMinibatch, kMaxLoaderThreads, kMaxLoaderDepth
#include "engine/options.hpp"
#include "engine/report.hpp"  // median
#include "core/log.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/jpeg_dataset.hpp"
#include "io/prefetcher.hpp"
#include "io/synth.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "Compute" for `ms` milliseconds: sleep, or keep one core busy.
void compute_for(double ms, bool spin) {
  const auto end = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  if (!spin) {
    std::this_thread::sleep_until(end);
    return;
  }
  volatile uint64_t x = 0;
  while (Clock::now() < end)
    for (int i = 0; i < 1000; ++i) x = x + uint64_t(i);
}

// Drops `path` from the page cache (best effort: clean pages of a file we can open).
void drop_page_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

struct LoaderArgs {
  std::string data, augment = "none", input;
  int minibatch = 256, threads = 0, depth = 2, pad = 0;
  int64_t steps = 50, eval_resize = 0;
  double compute_ms = 0;
  bool flip = false, spin = false, dct_scaling = true;
};

// "HxW" or "HxWxC" → shape (C defaults to `c`).
io::ImageShape parse_input(const std::string& text, int64_t c) {
  long long h = 0, w = 0, cc = c;
  char x1 = 0, x2 = 0;
  std::istringstream is(text);
  bool ok = bool(is >> h >> x1 >> w) && x1 == 'x';
  if (ok && !is.eof()) ok = bool(is >> x2 >> cc) && x2 == 'x' && is.eof();
  if (!ok || h <= 0 || w <= 0 || cc <= 0)
    DT_USAGE("dtrain bench io: option 'input': '", text, "' is not HxW or HxWxC (e.g. 224x224)");
  return {h, w, cc};
}

// Mode 1 and 2: the prefetcher on a real file (raw or jpeg).
int bench_loader(const LoaderArgs& a) {
  std::unique_ptr<io::Dataset> dsp = io::open_dataset(a.data);
  io::Dataset& ds = *dsp;
  io::PrefetchOptions o;
  o.threads = a.threads;
  o.depth = a.depth;
  o.augment.pad = a.pad;
  o.augment.flip = a.flip;
  if (a.augment == "crop") o.augment.mode = io::CropMode::crop;
  else if (a.augment == "rrc") o.augment.mode = io::CropMode::rrc;
  else if (a.augment != "none") DT_USAGE("dtrain bench io: option 'augment': '", a.augment, "' is not none, crop or rrc");
  const auto fixed = ds.fixed_shape();
  o.input = !a.input.empty() ? parse_input(a.input, ds.channels())
            : fixed          ? *fixed
                             : io::ImageShape{224, 224, ds.channels()};
  o.resize = a.eval_resize;
  o.dct_scaling = a.dct_scaling;
  o.fit_raw = o.augment.mode != io::CropMode::none || a.eval_resize > 0;  // as dtrain train
  const int warmup = 3;
  o.total_batches = warmup + a.steps;
  auto plan = [&] { return io::Sampler(ds.n(), 1, 0, a.minibatch, 1); };
  const auto* raw = dynamic_cast<const io::Hdf5Dataset*>(&ds);
  const auto* jpeg = dynamic_cast<const io::JpegDataset*>(&ds);
  nlohmann::json j = {{"data", a.data},       {"n", ds.n()}, {"layout", io::layout_name(ds.layout())},
                      {"input", {o.input.h, o.input.w, o.input.c}},
                      {"minibatch", a.minibatch}, {"depth", a.depth}, {"augment", a.augment},
                      {"pad", a.pad},         {"flip", a.flip}, {"dct_scaling", a.dct_scaling}};
  std::string what;
  if (raw) {
    j["shape"] = {raw->height(), raw->width(), raw->channels()};
    j["chunk_samples"] = raw->chunk_samples();
    what = detail::concat(raw->height(), "x", raw->width(), "x", raw->channels(), ", ", raw->chunk_samples(),
                          " per chunk");
  } else if (jpeg) {
    const double mean_bytes = double(jpeg->total_bytes()) / double(ds.n());
    j["stored_size"] = jpeg->stored_size();
    j["mean_jpeg_bytes"] = mean_bytes;
    what = detail::concat("JPEG, shorter side ", jpeg->stored_size(), ", ", int64_t(mean_bytes), " bytes each");
  }

  // 1. Loader alone.
  {
    io::Prefetcher pf(ds, plan(), o);
    j["threads"] = pf.threads();
    log::info("bench io: ", a.data, ": ", ds.n(), " samples (", what, ") → ", o.input.h, "x", o.input.w, "x",
              o.input.c, "; minibatch ", a.minibatch, ", threads ", pf.threads(), ", depth ", a.depth,
              ", augment ", a.augment, a.pad > 0 ? " + pad" : "", a.flip ? " + flip" : "");
    for (int i = 0; i < warmup; ++i) pf.next();
    const auto s0 = pf.stats();
    ds.reset_read_stats();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < a.steps; ++i) pf.next();
    const double secs = since(t0);
    const auto s1 = pf.stats();
    const auto rs = ds.read_stats();
    const double produced = double(s1.produced - s0.produced);
    const double ips = double(a.steps) * a.minibatch / secs;
    const double read_ms = 1e3 * (s1.read_s - s0.read_s) / produced;
    const double produce_ms = 1e3 * (s1.produce_s - s0.produce_s) / produced;
    const double decoded = double(s1.decoded - s0.decoded);
    const double decode_ips = decoded / std::max(1e-9, s1.decode_s - s0.decode_s);
    const double decode_cpu_ms = 1e3 * (s1.decode_cpu_s - s0.decode_cpu_s) / std::max(1.0, decoded);
    const double stored_mbs = double(rs.bytes_delivered) / std::max(1e-9, secs) / 1e6;
    log::info("loader alone: ", int64_t(ips), " images/s (", stored_mbs, " MB/s stored), read ", read_ms,
              " ms/batch (serialised), produce ", produce_ms, " ms/batch, decode ", int64_t(decode_ips),
              " images/s per thread (", 1e3 / decode_ips, " ms/image wall, ", decode_cpu_ms, " ms CPU), ",
              double(rs.requests) / double(std::max<int64_t>(1, rs.calls)),
              " hyperslab reads/batch, read amplification ", rs.amplification());
    j["images_per_s"] = ips;
    j["decode_images_per_s_per_thread"] = decode_ips;
    j["decode_cpu_ms_per_image"] = decode_cpu_ms;
    j["stored_mb_per_s"] = stored_mbs;
    j["read_ms_per_batch"] = read_ms;
    j["produce_ms_per_batch"] = produce_ms;
    j["read_amplification"] = rs.amplification();
  }

  // 2. With compute.
  if (a.compute_ms > 0) {
    io::Prefetcher pf(ds, plan(), o);
    double wait = 0;
    std::vector<double> waits;  // ms, measured steps
    double max_read_ms = 0, max_produce_ms = 0;  // the slowest batch's read and read-to-ready, measured steps
    int64_t stalled = 0;                         // steps that waited more than 1 ms
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < warmup + a.steps; ++i) {
      if (i == warmup) wait = 0;
      const io::Batch& b = pf.next();
      wait += b.wait_s;
      if (i >= warmup) {
        waits.push_back(1e3 * b.wait_s);
        max_read_ms = std::max(max_read_ms, 1e3 * b.read_s);
        max_produce_ms = std::max(max_produce_ms, 1e3 * b.produce_s);
        stalled += b.wait_s > 1e-3;
      }
      compute_for(a.compute_ms, a.spin);
    }
    const double median_ms = median(waits), max_ms = *std::max_element(waits.begin(), waits.end());
    const double total = since(t0);
    const double wait_ms = 1e3 * wait / double(a.steps);
    const double step_ms = 1e3 * total / double(warmup + a.steps);
    log::info("with ", a.compute_ms, " ms of ", a.spin ? "spinning" : "sleeping",
              " compute per step: step ", step_ms, " ms, exposed I/O wait ", wait_ms,
              " ms/step (", 100.0 * wait_ms / (a.compute_ms + wait_ms), "% of the step; median ",
              median_ms, " ms, max ", max_ms, " ms; ", stalled, " of ", a.steps,
              " steps waited > 1 ms; slowest batch: read ", max_read_ms, " ms, produced in ", max_produce_ms, " ms)");
    j["compute_ms"] = a.compute_ms;
    j["io_wait_ms_per_step"] = wait_ms;
    j["io_wait_fraction"] = wait_ms / (a.compute_ms + wait_ms);
    j["io_wait_ms_median"] = median_ms;
    j["io_wait_ms_max"] = max_ms;
    j["steps_waiting_over_1ms"] = stalled;
    j["max_read_ms"] = max_read_ms;
    j["max_produce_ms"] = max_produce_ms;
    j["step_ms"] = step_ms;
  }
  std::cout << "json: " << j.dump() << std::endl;
  return kExitOk;
}

// Mode 3: one sample per chunk vs the default layout, random batches.
int bench_chunking(int64_t n, const std::string& shape, int minibatch, const std::string& dir) {
  long long h = 0, w = 0, c = 0;
  char x1 = 0, x2 = 0;
  std::istringstream is(shape);
  if (!(is >> h >> x1 >> w >> x2 >> c) || x1 != 'x' || x2 != 'x' || !is.eof() || h <= 0 ||
      w <= 0 || c <= 0)
    DT_USAGE("dtrain bench io: option 'shape': '", shape, "' is not HxWxC (e.g. 64x64x3)");
  if (n < minibatch) DT_USAGE("dtrain bench io: option 'n' must be >= minibatch (", minibatch, ")");
  nlohmann::json j = {{"n", n}, {"shape", {h, w, c}}, {"minibatch", minibatch}};
  double rate[2][3] = {};  // [layout][random cold, random warm, sequential warm] samples/s
  const int64_t batches = std::min<int64_t>(n / minibatch, 64);
  for (int layout = 0; layout < 2; ++layout) {
    const int64_t chunk = layout == 0 ? 1 : 0;
    const std::string path = (std::filesystem::path(dir) /
                              ("dtrain-bench-chunk" + std::to_string(layout) + "-" +
                               std::to_string(::getpid()) + ".h5"))
                                 .string();
    io::synthesize_dataset(path, n, h, w, c, 10, 1, chunk);
    {
      io::Hdf5Dataset ds(path);
      io::Sampler plan(n, 1, 0, minibatch, 2);
      std::vector<uint8_t> buf(size_t(minibatch * ds.sample_bytes()));
      // Random batches: one cold pass, then the best of three warm passes.
      for (int pass = 0; pass < 4; ++pass) {
        if (pass == 0) drop_page_cache(path);
        const auto t0 = Clock::now();
        for (int64_t s = 0; s < batches; ++s) ds.read_images(plan.batch(pass, s), buf.data());
        const double r = double(batches * minibatch) / since(t0);
        double& slot = rate[layout][pass == 0 ? 0 : 1];
        slot = std::max(slot, r);
      }
      // Sequential batches (the evaluation path), warm.
      const auto t0 = Clock::now();
      for (int64_t s = 0; s < batches; ++s) ds.read_range(s * minibatch, minibatch, buf.data());
      rate[layout][2] = double(batches * minibatch) / since(t0);
      log::info("chunking: ", ds.chunk_samples(), " sample(s) per chunk (", ds.chunk_bytes() / 1024,
                " KiB), batches of ", minibatch, ": random cold ", int64_t(rate[layout][0]),
                " samples/s, random warm ", int64_t(rate[layout][1]), " samples/s, sequential ",
                int64_t(rate[layout][2]), " samples/s");
      j[layout == 0 ? "one_per_chunk" : "default"] = {{"chunk_samples", ds.chunk_samples()},
                                                       {"random_cold_samples_per_s", rate[layout][0]},
                                                       {"random_warm_samples_per_s", rate[layout][1]},
                                                       {"sequential_samples_per_s", rate[layout][2]}};
    }
    std::filesystem::remove(path);
  }
  log::info("chunking: default layout / one sample per chunk: random cold ", rate[1][0] / rate[0][0],
            "x, random warm ", rate[1][1] / rate[0][1], "x, sequential ", rate[1][2] / rate[0][2], "x");
  std::cout << "json: " << j.dump() << std::endl;
  return kExitOk;
}

}  // namespace

int cmd_bench_io(const std::vector<std::string>& args) {
  LoaderArgs a;
  int64_t n = 20000;
  std::string shape = "64x64x3", dir;
  po::options_description desc(
      "dtrain bench io --data F [--minibatch B] [--threads T] [--depth D] [--compute-ms X] [--steps N]\n"
      "                [--augment none|crop|rrc] [--flip] [--pad P] [--input HxW] [--eval-resize R]\n"
      "dtrain bench io --chunking [--n N] [--shape HxWxC] [--minibatch B] [--dir D]");
  desc.add_options()("help,h", "this help")("data", po::value(&a.data), "dataset HDF5 file")(
      "minibatch", po::value(&a.minibatch)->default_value(256), "samples per batch")(
      "threads", po::value(&a.threads)->default_value(0), "loader threads (0 = default_loader_threads)")(
      "depth", po::value(&a.depth)->default_value(2), "batches prefetched ahead")(
      "compute-ms", po::value(&a.compute_ms)->default_value(0), "simulated compute per step, ms")(
      "spin", po::bool_switch(&a.spin), "compute by spinning a core instead of sleeping")(
      "steps", po::value(&a.steps)->default_value(50), "measured steps (after 3 warm-up steps)")(
      "pad", po::value(&a.pad)->default_value(0), "augmentation: crop padding, pixels (augment none)")(
      "flip", po::bool_switch(&a.flip), "augmentation: horizontal flip")(
      "augment", po::value(&a.augment)->default_value("none"), "augmentation: none | crop | rrc (as dtrain train)")(
      "input", po::value(&a.input), "the network input HxW[xC] (default: a raw file's shape; 224x224 for jpeg)")(
      "eval-resize", po::value(&a.eval_resize)->default_value(0), "shorter side before a fixed crop (0: input·256/224)")(
      "dct-scaling", po::value(&a.dct_scaling)->default_value(true), "jpeg: DCT-scaled decode when the crop allows")(
      "chunking", "layout benchmark: one sample per chunk vs the default")(
      "n", po::value(&n)->default_value(20000), "chunking: samples per file")(
      "shape", po::value(&shape)->default_value("64x64x3"), "chunking: sample shape HxWxC")(
      "dir", po::value(&dir)->default_value(std::filesystem::temp_directory_path().string()),
      "chunking: folder for the two temporary files");
  po::variables_map vm = parse_command_line(args, desc, "dtrain bench io: ");
  if (vm.count("help")) {
    std::cout << desc;
    return kExitOk;
  }
  // The bounds of dtrain train's minibatch, loader-threads and loader-depth.
  if (a.minibatch < 1 || a.minibatch > kMaxMinibatch)
    DT_USAGE("dtrain bench io: option 'minibatch' must be in [1, ", kMaxMinibatch, "], got ", a.minibatch);
  if (a.threads < 0 || a.threads > kMaxLoaderThreads)
    DT_USAGE("dtrain bench io: option 'threads' must be in [0, ", kMaxLoaderThreads, "], got ", a.threads);
  if (a.depth < 1 || a.depth > kMaxLoaderDepth)
    DT_USAGE("dtrain bench io: option 'depth' must be in [1, ", kMaxLoaderDepth, "], got ", a.depth);
  if (a.steps < 1) DT_USAGE("dtrain bench io: option 'steps' must be >= 1, got ", a.steps);
  if (!(a.compute_ms >= 0) || !std::isfinite(a.compute_ms) || a.compute_ms > 3.6e6)
    DT_USAGE("dtrain bench io: option 'compute-ms' must be a number of ms in [0, 3.6e6], got ", a.compute_ms);
  if (a.eval_resize < 0) DT_USAGE("dtrain bench io: option 'eval-resize' must be >= 0 (0: input·256/224), got ", a.eval_resize);
  if (a.pad < 0) DT_USAGE("dtrain bench io: option 'pad' must be >= 0, got ", a.pad);
  static const std::vector<std::string> loader_options = {"data",  "threads", "depth", "compute-ms", "spin",
                                                          "steps", "pad",     "flip",  "augment",    "input",
                                                          "eval-resize", "dct-scaling"};
  if (vm.count("chunking")) {
    refuse_unread_options(vm, loader_options, "dtrain bench io: ",
                          "with --chunking (it writes and reads two files of its own: --n, --shape, --minibatch, --dir)");
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      DT_USAGE("dtrain bench io: option 'dir': '", visible(dir), "' is not a folder (the two temporary files go there)");
    return bench_chunking(n, shape, a.minibatch, dir);
  }
  refuse_unread_options(vm, {"n", "shape", "dir"}, "dtrain bench io: ", "without --chunking (the loader reads --data)");
  if (a.data.empty()) DT_USAGE("dtrain bench io: option 'data' (the HDF5 file) is required");
  return bench_loader(a);
}

}  // namespace dtrain::engine
