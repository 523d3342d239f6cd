// tests/test_prefetcher_data.cpp — the loader's building blocks: crop/flip on a
// hand-made image, the augmentation's random choices, Hdf5Dataset's chunk
// layout (writer's chunk_samples, warnings, unavailable filters) and its read
// amplification counters.
#include <hdf5.h>
#include <stdlib.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "core/settings.hpp"
#include "io/augment.hpp"
#include "io/batch.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/prefetcher.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::io::CropFlip;
using dtrain::io::Hdf5Dataset;
using dtrain::test::TempDir;

namespace {

// n samples [h, w, c] of random bytes, labels i % 10.
void write_random(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c,
                  int compression = 0, int64_t chunk_samples = 0) {
  std::mt19937 rng(7);
  std::vector<uint8_t> img(size_t(n * h * w * c));
  for (auto& v : img) v = uint8_t(rng() % 7);  // compressible
  std::vector<int32_t> lab(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) lab[size_t(i)] = int32_t(i % 10);
  dtrain::io::write_dataset(path, img, n, h, w, c, lab, 10, compression, chunk_samples);
}

// A no-op HDF5 filter, registered only while a test file is written.
constexpr H5Z_filter_t kTestFilter = 32100;
size_t noop_filter(unsigned, size_t, const unsigned[], size_t nbytes, size_t*, void**) {
  return nbytes;
}

void write_with_filter(const std::string& path, unsigned flags) {
  const H5Z_class2_t cls = {H5Z_CLASS_T_VERS, kTestFilter, 1, 1, "dtrain-test-noop", nullptr,
                            nullptr, noop_filter};
  REQUIRE(H5Zregister(&cls) >= 0);
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[4] = {128, 8, 8, 1}, chunk[4] = {64, 8, 8, 1}, ldims[1] = {128};
  hid_t sp = H5Screate_simple(4, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 4, chunk);
  REQUIRE(H5Pset_filter(dcpl, kTestFilter, flags, 0, nullptr) >= 0);
  hid_t d = H5Dcreate2(f, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(d >= 0);
  std::vector<uint8_t> img(128 * 64, 3);
  REQUIRE(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, img.data()) >= 0);
  hid_t lsp = H5Screate_simple(1, ldims, nullptr);
  hid_t l = H5Dcreate2(f, "labels", H5T_STD_I32LE, lsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<int32_t> lab(128, 1);
  H5Dwrite(l, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, lab.data());
  hid_t asp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, "classes", H5T_STD_I32LE, asp, H5P_DEFAULT, H5P_DEFAULT);
  int classes = 10;
  H5Awrite(a, H5T_NATIVE_INT, &classes);
  for (hid_t id : {a}) H5Aclose(id);
  for (hid_t id : {d, l}) H5Dclose(id);
  for (hid_t id : {sp, lsp, asp}) H5Sclose(id);
  H5Pclose(dcpl);
  H5Fclose(f);
  REQUIRE(H5Zunregister(kTestFilter) >= 0);
}

}  // namespace

TEST_CASE("crop with padding and flip on a hand-made 3x4 image", "[prefetcher]") {
  const std::vector<uint8_t> img{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // [3, 4, 1]
  const dtrain::io::NormalizeTable norm(1, {}, {});
  std::vector<float> out(12);
  auto as_pixels = [&] {
    std::vector<int> v;
    for (float x : out) v.push_back(int(std::lround(x * 255.0f)));
    return v;
  };
  SECTION("identity: offset (P, P), no flip") {
    dtrain::io::decode_sample(img.data(), 3, 4, 1, norm, 1, CropFlip{1, 1, false}, out.data());
    CHECK(as_pixels() == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  }
  SECTION("crop at (0, 2) of the padded image: shifted down, left") {
    dtrain::io::decode_sample(img.data(), 3, 4, 1, norm, 1, CropFlip{0, 2, false}, out.data());
    CHECK(as_pixels() == std::vector<int>{0, 0, 0, 0, 2, 3, 4, 0, 6, 7, 8, 0});
  }
  SECTION("crop at (2, 1) and flip") {
    dtrain::io::decode_sample(img.data(), 3, 4, 1, norm, 1, CropFlip{2, 1, true}, out.data());
    CHECK(as_pixels() == std::vector<int>{8, 7, 6, 5, 12, 11, 10, 9, 0, 0, 0, 0});
  }
  SECTION("padding is raw black, normalised like any pixel") {
    const dtrain::io::NormalizeTable n2(1, {0.5f}, {0.25f});
    dtrain::io::decode_sample(img.data(), 3, 4, 1, n2, 1, CropFlip{0, 1, false}, out.data());
    CHECK(out[0] == (0.0f - 0.5f) / 0.25f);
    CHECK(out[4] == Approx((1.0f / 255.0f - 0.5f) / 0.25f));
  }
  SECTION("without augmentation, identical to normalize_to_nchw") {
    const std::vector<float> mean{0.1f, 0.2f, 0.3f}, sd{0.3f, 0.2f, 0.1f};
    std::vector<uint8_t> rgb(5 * 7 * 3);
    std::iota(rgb.begin(), rgb.end(), uint8_t(0));
    std::vector<float> a(rgb.size()), b(rgb.size());
    dtrain::io::normalize_to_nchw(rgb.data(), 1, 5, 7, 3, mean, sd, a.data());
    dtrain::io::decode_sample(rgb.data(), 5, 7, 3, dtrain::io::NormalizeTable(3, mean, sd), 0,
                              CropFlip{}, b.data());
    CHECK(a == b);
  }
}

TEST_CASE("augmentation choices are a pure function of (seed, epoch, index)", "[prefetcher]") {
  dtrain::io::AugmentOptions aug{4, true};
  std::set<int> dys, dxs;
  int flips = 0, other_seed = 0, other_epoch = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    const CropFlip cf = dtrain::io::crop_flip_for(aug, 1, 3, i);
    CHECK(cf == dtrain::io::crop_flip_for(aug, 1, 3, i));  // the same arguments, the same choice
    // …and each argument matters: another seed or epoch gives another choice for
    // almost every index (the same one by chance with probability 1/162).
    other_seed += !(cf == dtrain::io::crop_flip_for(aug, 2, 3, i));
    other_epoch += !(cf == dtrain::io::crop_flip_for(aug, 1, 4, i));
    dys.insert(cf.dy);
    dxs.insert(cf.dx);
    flips += cf.flip;
  }
  CHECK(dys.size() == 9);  // every offset in [0, 2P] occurs
  CHECK(*dys.rbegin() == 8);
  CHECK(dxs.size() == 9);
  CHECK(flips > 850);
  CHECK(flips < 1150);
  CHECK(other_seed > 1900);
  CHECK(other_epoch > 1900);
  CHECK_FALSE(dtrain::io::crop_flip_for(aug, 1, 3, 5) == dtrain::io::crop_flip_for(aug, 1, 4, 5));
  CHECK(dtrain::io::crop_flip_for({}, 1, 3, 5) == CropFlip{0, 0, false});
}

TEST_CASE("Hdf5Dataset reports read amplification and its chunk layout", "[prefetcher]") {
  TempDir dir;
  std::vector<int64_t> idx(64);
  std::mt19937 rng(1);
  for (auto& i : idx) i = int64_t(rng() % 2048);
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::shuffle(idx.begin(), idx.end(), rng);
  std::vector<uint8_t> out(idx.size() * 1024);

  SECTION("uncompressed: no cache, only the selected bytes are read") {
    const std::string path = dir.file("plain.h5");
    write_random(path, 2048, 16, 16, 4, 0, 128);  // 128 KiB chunks
    Hdf5Dataset ds(path);
    CHECK(ds.chunk_samples() == 128);
    CHECK(ds.chunk_cache_bytes() == 0);
    CHECK(ds.warnings().empty());
    ds.read_images(idx, out.data());
    const auto s = ds.read_stats();
    CHECK(s.samples == int64_t(idx.size()));
    CHECK(s.amplification() == 1.0);
    CHECK(s.requests <= int64_t(idx.size()));
    ds.reset_read_stats();
    CHECK(ds.read_stats().calls == 0);
  }
  SECTION("gzip, cache forced off: every request decodes whole chunks") {
    const std::string path = dir.file("gz.h5");
    write_random(path, 2048, 16, 16, 4, 1, 128);
    Hdf5Dataset ds(path, dtrain::io::Hdf5Options{0});
    CHECK(ds.filtered());
    ds.read_images(idx, out.data());
    CHECK(ds.read_stats().amplification() > 20.0);  // ~128 samples decoded per sample
  }
  SECTION("gzip, automatic cache: the whole set fits, each chunk is decoded once") {
    const std::string path = dir.file("gz-auto.h5");
    write_random(path, 2048, 16, 16, 4, 1, 128);
    Hdf5Dataset ds(path);
    CHECK(ds.chunk_cache_bytes() >= 2048 * 1024);
    for (int rep = 0; rep < 3; ++rep) ds.read_images(idx, out.data());
    const auto s = ds.read_stats();
    CHECK(s.chunk_loads <= 16);
    CHECK(s.amplification() < double(16 * 128) / double(idx.size()) + 1e-9);
  }
}

TEST_CASE("layout warnings and unavailable filters", "[prefetcher]") {
  TempDir dir;
  SECTION("one sample per chunk warns about tiny chunks") {
    const std::string path = dir.file("tiny.h5");
    write_random(path, 256, 28, 28, 1, 0, 1);
    Hdf5Dataset ds(path);
    REQUIRE(ds.warnings().size() == 1);
    CHECK_THAT(ds.warnings()[0], Contains("64 KiB"));
  }
  SECTION("a small set in one chunk does not warn") {
    const std::string path = dir.file("small.h5");
    write_random(path, 20, 28, 28, 1);
    CHECK(Hdf5Dataset(path).warnings().empty());
  }
  SECTION("the writer's default layout does not warn and holds >= 64 samples per chunk") {
    const std::string path = dir.file("default.h5");
    write_random(path, 3000, 28, 28, 1);
    Hdf5Dataset ds(path);
    CHECK(ds.warnings().empty());
    CHECK(ds.chunk_samples() >= dtrain::io::kMinChunkSamples);
    CHECK(ds.chunk_bytes() >= dtrain::io::kTinyChunkBytes);
  }
  SECTION("a mandatory filter this HDF5 lacks is a usage error naming it") {
    const std::string path = dir.file("filter.h5");
    write_with_filter(path, H5Z_FLAG_MANDATORY);
    auto msg = dtrain::test::usage_error_message([&] { Hdf5Dataset ds(path); });
    CHECK_THAT(msg, Contains(path) && Contains("/images") && Contains("filter 32100") &&
                        Contains("not available"));
  }
  SECTION("an optional filter this HDF5 lacks is a warning") {
    const std::string path = dir.file("optional.h5");
    write_with_filter(path, H5Z_FLAG_OPTIONAL);
    Hdf5Dataset ds(path);
    bool named = false;
    for (const auto& w : ds.warnings()) named |= w.find("filter 32100") != std::string::npos;
    CHECK(named);
  }
}

TEST_CASE("a task's CPUs shared by compute and loader threads", "[prefetcher]") {
  using dtrain::io::split_task_cpus;
  auto both = [](dtrain::io::TaskCpuSplit s) { return std::make_pair(s.compute, s.loaders); };
  CHECK(both(split_task_cpus(1, false)) == std::make_pair(1, 1));  // one CPU: one of each
  CHECK(both(split_task_cpus(1, true)) == std::make_pair(1, 1));
  CHECK(both(split_task_cpus(2, false)) == std::make_pair(1, 1));
  CHECK(both(split_task_cpus(8, false)) == std::make_pair(6, 2));  // a quarter loads
  CHECK(both(split_task_cpus(64, false)) == std::make_pair(56, dtrain::io::kMaxDefaultLoaderThreads));
  CHECK(both(split_task_cpus(8, true)) == std::make_pair(1, 7));   // a GPU rank: all but one load
  CHECK(both(split_task_cpus(32, true)) == std::make_pair(1, dtrain::io::kMaxDefaultLoaderThreads));
  for (long c = 2; c <= 16; ++c) {  // never more threads than the task's CPUs
    CHECK(split_task_cpus(c, false).compute + split_task_cpus(c, false).loaders <= c);
    CHECK(split_task_cpus(c, true).compute + split_task_cpus(c, true).loaders <= c);
  }
  CHECK_THROWS_AS(split_task_cpus(0, false), dtrain::Error);
}

TEST_CASE("default loader threads", "[prefetcher]") {
  const auto saved = dtrain::settings::get("SLURM_CPUS_PER_TASK");
  ::setenv("SLURM_CPUS_PER_TASK", "3", 1);
  CHECK(dtrain::io::default_loader_threads(4) == 3);  // Slurm's per-task CPUs win
  ::setenv("SLURM_CPUS_PER_TASK", "64", 1);
  CHECK(dtrain::io::default_loader_threads(1) == dtrain::io::kMaxDefaultLoaderThreads);
  // Without Slurm: the host's hardware threads over the ranks on it, clamped to
  // [1, kMax]. Expected values from hardware_concurrency, so that the check is
  // the same on any machine (and unset even when the test runs inside a Slurm job).
  ::unsetenv("SLURM_CPUS_PER_TASK");
  const int hw = int(std::thread::hardware_concurrency());
  REQUIRE(hw >= 1);
  auto expect = [&](int ranks) { return std::clamp(hw / ranks, 1, dtrain::io::kMaxDefaultLoaderThreads); };
  INFO("hardware threads " << hw);
  CHECK(dtrain::io::default_loader_threads(1) == expect(1));
  CHECK(dtrain::io::default_loader_threads(2) == expect(2));
  CHECK(dtrain::io::default_loader_threads(1 << 20) == 1);
  if (saved) ::setenv("SLURM_CPUS_PER_TASK", saved->c_str(), 1);
}
