// tests/test_prefetcher.cpp — io::Prefetcher: reads hidden under compute (from
// the loader's own counters), exact samples over 10,000 shuffled batches with
// 4 threads, augmentation independent of the thread count, shutdown while
// threads block, worker exceptions rethrown by next().
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "io/hdf5_dataset.hpp"
#include "io/prefetcher.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::io::Hdf5Dataset;
using dtrain::io::PrefetchOptions;
using dtrain::io::Prefetcher;
using dtrain::io::Sampler;
using dtrain::test::TempDir;

namespace {

constexpr int kClasses = 10;

// Pixel p (HWC order) of sample i: known without the file (the test's checksum).
uint8_t pixel_of(int64_t i, int64_t p) { return uint8_t((i * 131 + p * 7 + (i >> 8) * 13) & 0xFF); }
int32_t label_of(int64_t i) { return int32_t((i * 7 + i / 3) % kClasses); }

// Writes n samples [h, w, c] whose bytes are pixel_of / label_of.
void write_known(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c,
                 int compression = 0, int64_t chunk_samples = 0) {
  std::vector<uint8_t> img(size_t(n * h * w * c));
  std::vector<int32_t> lab(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    lab[size_t(i)] = label_of(i);
    for (int64_t p = 0; p < h * w * c; ++p) img[size_t(i * h * w * c + p)] = pixel_of(i, p);
  }
  dtrain::io::write_dataset(path, img, n, h, w, c, lab, kClasses, compression, chunk_samples);
}

// Checks every value of batch `b` against the generator, and its indices
// against the Sampler; returns the number of mismatching samples.
int64_t check_batch(const dtrain::io::Batch& b, Sampler& ref, const Hdf5Dataset& ds,
                    const std::vector<float>& mean, const std::vector<float>& sd) {
  const int64_t h = ds.height(), w = ds.width(), c = ds.channels();
  if (b.indices != ref.batch(b.epoch, b.step)) return b.size;
  int64_t bad = 0;
  for (int64_t k = 0; k < b.size; ++k) {
    const int64_t i = b.indices[size_t(k)];
    bool ok = b.labels[k] == label_of(i);
    for (int64_t ch = 0; ch < c && ok; ++ch)
      for (int64_t y = 0; y < h && ok; ++y)
        for (int64_t x = 0; x < w && ok; ++x) {
          const float expect =
              (float(pixel_of(i, (y * w + x) * c + ch)) / 255.0f - mean[size_t(ch)]) / sd[size_t(ch)];
          const float got = b.x[((k * c + ch) * h + y) * w + x];
          ok = std::fabs(got - expect) <= 1e-5f * (1.0f + std::fabs(expect));
        }
    bad += ok ? 0 : 1;
  }
  return bad;
}

}  // namespace

TEST_CASE("prefetching hides a 40 ms read under 50 ms of compute (loader counters)",
          "[prefetcher]") {
  TempDir dir;
  const std::string path = dir.file("hide.h5");
  write_known(path, 640, 8, 8, 3);
  Hdf5Dataset ds(path);
  PrefetchOptions o;
  o.threads = 2;
  o.depth = 2;
  o.injected_read_delay_s = 0.040;
  Prefetcher pf(ds, Sampler(ds.n(), 1, 0, 32, 5), o);

  const int steps = 25, warmup = 3;
  double steady_wait = 0;
  for (int s = 0; s < steps; ++s) {
    const dtrain::io::Batch& b = pf.next();
    REQUIRE(b.step == s % pf.steps_per_epoch());
    if (s == 0) CHECK(b.wait_s >= 0.030);  // the first batch cannot be hidden: waits are measured
    if (s >= warmup) steady_wait += b.wait_s;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // "compute"
  }
  const auto st = pf.stats();
  const double mean_wait = steady_wait / (steps - warmup);
  INFO("steady-state mean I/O wait " << mean_wait * 1e3 << " ms/step, mean read "
                                     << st.read_s / double(st.produced) * 1e3 << " ms/batch");
  CHECK(st.batches == steps);
  CHECK(st.read_s / double(st.produced) >= 0.040);  // the read cost was really paid…
  CHECK(mean_wait <= 0.005);                         // …and hidden: step ≤ 50 + 5 ms
}

TEST_CASE("4 threads deliver exactly the right samples over 10,000 shuffled batches",
          "[prefetcher]") {
  TempDir dir;
  const std::vector<float> mean{0.5f, 0.4f, 0.3f}, sd{0.25f, 0.2f, 0.3f};
  SECTION("uncompressed, 16 chunks, one worker of one") {
    const std::string path = dir.file("known.h5");
    write_known(path, 1000, 8, 8, 3, 0, 64);
    Hdf5Dataset ds(path);
    PrefetchOptions o;
    o.threads = 4;
    o.depth = 2;
    o.mean = mean;
    o.std = sd;
    o.total_batches = 10000;
    Prefetcher pf(ds, Sampler(ds.n(), 1, 0, 10, 11), o);
    Sampler ref(ds.n(), 1, 0, 10, 11);
    int64_t bad = 0;
    for (int64_t k = 0; k < 10000; ++k) {
      const auto& b = pf.next();
      REQUIRE(b.epoch == k / 100);
      REQUIRE(b.step == k % 100);
      bad += check_batch(b, ref, ds, mean, sd);
    }
    CHECK(bad == 0);
    CHECK_THROWS_AS(pf.next(), dtrain::Error);  // total_batches delivered
    CHECK(ds.read_stats().samples == 10000 * 10);
  }
  SECTION("gzip chunks, rank 1 of 3, resumed at epoch 2 step 7") {
    const std::string path = dir.file("known-gz.h5");
    write_known(path, 999, 8, 8, 3, 4, 64);
    Hdf5Dataset ds(path);
    PrefetchOptions o;
    o.threads = 4;
    o.mean = mean;
    o.std = sd;
    o.start_epoch = 2;
    o.start_step = 7;
    Prefetcher pf(ds, Sampler(ds.n(), 3, 1, 16, 3), o);
    Sampler ref(ds.n(), 3, 1, 16, 3);
    int64_t bad = 0;
    for (int64_t k = 0; k < 600; ++k) {
      const auto& b = pf.next();
      REQUIRE(b.epoch * 20 + b.step == 2 * 20 + 7 + k);  // 20 steps per epoch
      bad += check_batch(b, ref, ds, mean, sd);
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("augmented batches are bitwise identical with 1 and 4 threads", "[prefetcher]") {
  TempDir dir;
  const std::string path = dir.file("aug.h5");
  write_known(path, 200, 12, 16, 3);
  Hdf5Dataset ds(path);
  auto run = [&](int threads, uint64_t seed, int64_t start_epoch, bool augment) {
    PrefetchOptions o;
    o.threads = threads;
    o.depth = 3;
    o.seed = seed;
    o.start_epoch = start_epoch;
    o.augment.pad = augment ? 4 : 0;
    o.augment.flip = augment;
    Prefetcher pf(ds, Sampler(ds.n(), 1, 0, 20, 9), o);
    std::vector<float> all;
    for (int k = 0; k < 30; ++k) {  // 3 epochs of 10 steps
      const auto& b = pf.next();
      all.insert(all.end(), b.x, b.x + b.size * 3 * 12 * 16);
    }
    return all;
  };
  const auto one = run(1, 42, 0, true), four = run(4, 42, 0, true);
  REQUIRE(one.size() == four.size());
  CHECK(std::memcmp(one.data(), four.data(), one.size() * sizeof(float)) == 0);
  CHECK(one != run(4, 43, 0, true));   // the seed matters
  CHECK(one != run(4, 42, 0, false));  // and augmentation happened
  // Epoch 1 replayed from its start (a resume) equals steps 10..19 of the full run.
  const auto resumed = run(2, 42, 1, true);
  const size_t per_step = 20 * 3 * 12 * 16;
  CHECK(std::equal(resumed.begin(), resumed.begin() + 10 * per_step, one.begin() + 10 * per_step));
}

TEST_CASE("a Prefetcher shuts down while its threads block", "[prefetcher]") {
  TempDir dir;
  const std::string path = dir.file("stop.h5");
  write_known(path, 256, 8, 8, 3);
  Hdf5Dataset ds(path);
  using clock = std::chrono::steady_clock;
  SECTION("every buffer full, workers waiting for a free one") {
    PrefetchOptions o;
    o.threads = 4;
    o.depth = 2;
    auto pf = std::make_unique<Prefetcher>(ds, Sampler(ds.n(), 1, 0, 16, 1), o);
    const auto deadline = clock::now() + std::chrono::seconds(20);
    while (pf->stats().produced < 3 && clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(pf->stats().produced == 3);  // D + 1 buffers, none taken
    pf.reset();                        // must return
  }
  SECTION("a worker inside a long read, the consumer blocked in next()") {
    PrefetchOptions o;
    o.threads = 2;
    o.injected_read_delay_s = 60;
    Prefetcher pf(ds, Sampler(ds.n(), 1, 0, 16, 1), o);
    auto consumer = std::async(std::launch::async, [&] {
      try {
        pf.next();
      } catch (const dtrain::Error& e) {
        return std::string(e.what());
      }
      return std::string("no exception");
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto t0 = clock::now();
    pf.stop();
    CHECK_THAT(consumer.get(), Contains("stopped"));
    CHECK(clock::now() - t0 < std::chrono::seconds(30));  // far below the 60 s read
    CHECK_THROWS_AS(pf.next(), dtrain::Error);
  }
}

TEST_CASE("an exception in a loader thread is rethrown by next()", "[prefetcher]") {
  TempDir dir;
  SECTION("injected failure at step 5") {
    const std::string path = dir.file("fail.h5");
    write_known(path, 256, 8, 8, 3);
    Hdf5Dataset ds(path);
    PrefetchOptions o;
    o.threads = 3;
    o.test_before_read = [](int64_t, int64_t step) {
      if (step == 5) throw dtrain::Error("injected read failure at step 5");
    };
    Prefetcher pf(ds, Sampler(ds.n(), 1, 0, 16, 1), o);
    int delivered = 0;
    std::string msg;
    try {
      for (; delivered < 16; ++delivered) pf.next();
    } catch (const dtrain::Error& e) {
      msg = e.what();
    }
    CHECK_THAT(msg, Contains("injected read failure"));
    CHECK(delivered <= 5);
    CHECK_THROWS_WITH(pf.next(), Contains("injected read failure"));  // again, never a hang
  }
  SECTION("compressed file truncated after open") {
    const std::string path = dir.file("trunc-gz.h5");
    write_known(path, 4096, 16, 16, 3, 1, 64);
    Hdf5Dataset ds(path);
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 3);
    PrefetchOptions o;
    o.threads = 4;
    Prefetcher pf(ds, Sampler(ds.n(), 1, 0, 64, 1), o);
    std::string msg;
    try {
      for (int k = 0; k < 64; ++k) pf.next();
    } catch (const dtrain::Error& e) {
      msg = e.what();
    }
    // The read fails (compressed chunks past the end), and the loader says why:
    // the file changed after it was opened (io/h5_util.hpp FileWatch).
    CHECK_THAT(msg, Contains(path) && Contains("/images") && Contains("changed while this job read it"));
  }
}
