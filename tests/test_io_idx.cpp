// tests/test_io_idx.cpp — gzipped IDX reading and the Fashion-MNIST converter:
// tiny hand-made IDX files (good, bad magic, truncated, trailing bytes, count
// mismatch, label ≥ 10) and the real data from Debian's dataset-fashion-mnist
// (60000/10000 samples, 28×28×1, 6000/1000 per class): a dependency of the
// project (scripts/setup-deps.sh, the integration tests), so its absence fails
// the test instead of skipping it. Also the converters' output lock and the
// clean-up of a stopped conversion's temporaries (io/output_lock.hpp), here
// for fashion-mnist and synth.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "core/settings.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/idx.hpp"
#include "io/synth.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::test::TempDir;
using dtrain::test::usage_error_message;

namespace {

// Writes a gzipped IDX file: magic, dims, then `payload` bytes (value = index mod
// `modulo`), regardless of what the dims advertise.
void write_idx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
               size_t payload, unsigned modulo = 256) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  auto put32 = [&](uint32_t v) {
    unsigned char b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
    REQUIRE(gzwrite(f, b, 4) == 4);
  };
  put32(magic);
  for (uint32_t d : dims) put32(d);
  std::vector<uint8_t> data(payload);
  for (size_t i = 0; i < payload; ++i) data[i] = uint8_t(i % modulo);
  if (payload) REQUIRE(gzwrite(f, data.data(), unsigned(payload)) == int(payload));
  gzclose(f);
}

// A complete tiny Fashion-MNIST folder: n_train/n_test images of 4×3.
void write_fashion(const TempDir& src, uint32_t n_train, uint32_t n_test) {
  write_idx(src.file("train-images-idx3-ubyte.gz"), 0x803, {n_train, 4, 3}, n_train * 12);
  write_idx(src.file("train-labels-idx1-ubyte.gz"), 0x801, {n_train}, n_train, 10);
  write_idx(src.file("t10k-images-idx3-ubyte.gz"), 0x803, {n_test, 4, 3}, n_test * 12);
  write_idx(src.file("t10k-labels-idx1-ubyte.gz"), 0x801, {n_test}, n_test, 10);
}

}  // namespace

TEST_CASE("IDX files read back exactly", "[io]") {
  TempDir dir;
  const std::string img = dir.file("img.gz"), lab = dir.file("lab.gz");
  write_idx(img, 0x803, {5, 4, 3}, 60);
  write_idx(lab, 0x801, {5}, 5, 10);
  auto images = dtrain::io::read_idx_images(img);
  CHECK((images.n == 5 && images.rows == 4 && images.cols == 3));
  REQUIRE(images.pixels.size() == 60);
  for (size_t i = 0; i < 60; ++i) REQUIRE(images.pixels[i] == i);
  auto labels = dtrain::io::read_idx_labels(lab);
  CHECK(labels == std::vector<uint8_t>{0, 1, 2, 3, 4});
}

TEST_CASE("bad IDX files are usage errors naming the file", "[io]") {
  TempDir dir;
  const std::string path = dir.file("bad.gz");
  SECTION("bad magic") {
    write_idx(path, 0x801, {5, 4, 3}, 60);
    CHECK_THAT(usage_error_message([&] { dtrain::io::read_idx_images(path); }),
               Contains(path) && Contains("magic") && Contains("0x801"));
  }
  SECTION("truncated data") {
    write_idx(path, 0x803, {5, 4, 3}, 59);
    CHECK_THAT(usage_error_message([&] { dtrain::io::read_idx_images(path); }),
               Contains(path) && Contains("truncated") && Contains("60"));
  }
  SECTION("truncated header") {
    write_idx(path, 0x803, {5}, 0);
    CHECK_THAT(usage_error_message([&] { dtrain::io::read_idx_images(path); }),
               Contains(path) && Contains("truncated"));
  }
  SECTION("gzip stream cut off") {
    write_idx(path, 0x803, {50, 28, 28}, 50 * 784);
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
    CHECK_THAT(usage_error_message([&] { dtrain::io::read_idx_images(path); }),
               Contains(path));
  }
  SECTION("gzip trailer cut off: the payload is whole, its CRC never checked") {
    // A changed byte in such a file was converted silently (a break report).
    for (const uintmax_t cut : {1u, 4u, 8u}) {
      write_idx(path, 0x801, {5}, 5);
      std::filesystem::resize_file(path, std::filesystem::file_size(path) - cut);
      CHECK_THAT(usage_error_message([&] { dtrain::io::read_idx_labels(path); }),
                 Contains(path) && Contains("gzip stream is cut off before its end"));
    }
  }
  SECTION("trailing bytes") {
    write_idx(path, 0x801, {5}, 6);
    CHECK_THAT(usage_error_message([&] { dtrain::io::read_idx_labels(path); }),
               Contains(path) && Contains("more bytes"));
  }
  SECTION("missing file") {
    CHECK_THAT(usage_error_message([&] { dtrain::io::read_idx_labels(dir.file("none.gz")); }),
               Contains("none.gz"));
  }
}

TEST_CASE("convert_fashion_mnist writes both splits from tiny IDX files", "[io]") {
  TempDir src, out_parent;
  write_fashion(src, 25, 12);
  const std::string out = out_parent.file("nested/data");  // created by the converter
  auto s = dtrain::io::convert_fashion_mnist(src.path().string(), out);
  CHECK((s.n_train == 25 && s.n_test == 12));
  CHECK((s.height == 4 && s.width == 3 && s.channels == 1 && s.classes == 10));
  CHECK_THAT(s.describe(), Contains("fashion-mnist-train.h5") && Contains("25 images"));
  CHECK(dtrain::test::count_temp_files(out) == 0);

  dtrain::io::Hdf5Dataset train(s.train_path);
  CHECK((train.n() == 25 && train.height() == 4 && train.width() == 3 && train.channels() == 1));
  CHECK(train.classes() == 10);
  for (int64_t i = 0; i < 25; ++i) CHECK(train.labels()[size_t(i)] == i % 10);
  std::vector<uint8_t> px(25 * 12);
  train.read_range(0, 25, px.data());
  for (size_t i = 0; i < px.size(); ++i) REQUIRE(px[i] == uint8_t(i % 256));
  dtrain::io::Hdf5Dataset test(s.test_path);
  CHECK(test.n() == 12);
}

namespace {
// Holds "<out>.lock" as another converter would (flock locks of two open
// files conflict within one process too), naming itself in it.
struct HeldLock {
  int fd;
  explicit HeldLock(const std::string& out) : fd(::open((out + ".lock").c_str(), O_RDWR | O_CREAT, 0644)) {
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    REQUIRE(::write(fd, "a test, pid 1 on here\n", 22) == 22);
  }
  ~HeldLock() { ::close(fd); }
};
void touch(const std::string& path) { std::ofstream(path) << "partial"; }
}  // namespace

TEST_CASE("a converter removes the temporaries a stopped run left and refuses to run beside another", "[io]") {
  namespace fs = std::filesystem;
  SECTION("fashion-mnist") {
    TempDir src, out;
    write_fashion(src, 25, 12);
    const std::string train = out.file("fashion-mnist-train.h5"), test = out.file("fashion-mnist-test.h5");
    // What Ctrl-C or a killed job leaves, and two names that only look alike.
    for (const std::string& f : {train + ".tmp.4242", test + ".tmp.17", train + ".tmp.x1", out.file("other.h5.tmp.5")})
      touch(f);
    for (const std::string& held : {train, test}) {  // either file being written by another converter (synth, say)
      const HeldLock other(held);
      CHECK_THAT(usage_error_message([&] { dtrain::io::convert_fashion_mnist(src.path().string(), out.path().string()); }),
                 Contains(held + " is being written by another converter (" + held +
                          ".lock is held by: a test, pid 1 on here)"));
      CHECK((!fs::exists(train) && !fs::exists(test)));  // nothing touched
      CHECK((fs::exists(train + ".tmp.4242") && fs::exists(test + ".tmp.17")));
      fs::remove(held + ".lock");
    }
    const auto s = dtrain::io::convert_fashion_mnist(src.path().string(), out.path().string());
    CHECK((s.n_train == 25 && s.n_test == 12));
    CHECK((!fs::exists(train + ".tmp.4242") && !fs::exists(test + ".tmp.17")));
    CHECK((fs::exists(train + ".tmp.x1") && fs::exists(out.file("other.h5.tmp.5"))));  // not theirs
    CHECK(!fs::exists(train + ".lock"));
  }
  SECTION("synth") {
    TempDir out;
    const std::string f = out.file("s.h5");
    touch(f + ".tmp.99");
    {
      const HeldLock other(f);
      CHECK_THAT(usage_error_message([&] { dtrain::io::synthesize_dataset(f, 4, 8, 8, 1, 2); }),
                 Contains(f + " is being written by another converter"));
      CHECK((!fs::exists(f) && fs::exists(f + ".tmp.99")));
    }
    fs::remove(f + ".lock");
    dtrain::io::synthesize_dataset(f, 4, 8, 8, 1, 2);
    CHECK(dtrain::io::Hdf5Dataset(f).n() == 4);
    CHECK((!fs::exists(f + ".tmp.99") && !fs::exists(f + ".lock")));
  }
}

TEST_CASE("convert_fashion_mnist rejects inconsistent inputs", "[io]") {
  TempDir src, out;
  write_fashion(src, 25, 12);
  SECTION("image and label counts differ") {
    write_idx(src.file("t10k-labels-idx1-ubyte.gz"), 0x801, {11}, 11, 10);
    std::string msg = usage_error_message(
        [&] { dtrain::io::convert_fashion_mnist(src.path().string(), out.path().string()); });
    CHECK_THAT(msg, Contains("t10k-images-idx3-ubyte.gz") && Contains("t10k-labels-idx1-ubyte.gz") &&
                        Contains("12 images") && Contains("11 labels"));
    // Nothing written: the test split is checked before the training split is.
    CHECK_FALSE(std::filesystem::exists(out.file("fashion-mnist-test.h5")));
    CHECK_FALSE(std::filesystem::exists(out.file("fashion-mnist-train.h5")));
  }
  SECTION("test images of another size: nothing written") {
    write_idx(src.file("t10k-images-idx3-ubyte.gz"), 0x803, {12, 5, 3}, 12 * 15);
    const std::string dest = out.file("made-only-on-success");
    std::string msg = usage_error_message(
        [&] { dtrain::io::convert_fashion_mnist(src.path().string(), dest); });
    CHECK_THAT(msg, Contains("train images are 4x3 (train-images-idx3-ubyte.gz) but test images are 5x3 "
                             "(t10k-images-idx3-ubyte.gz; nothing written)"));
    CHECK_FALSE(std::filesystem::exists(dest));
  }
  SECTION("the test split cannot be written: no training split left behind") {
    // A full disk or an interrupted write of the test split had left the
    // committed training split, which a plain rerun refused as existing.
    const std::string squat = out.file("fashion-mnist-test.h5.tmp." + std::to_string(::getpid()));
    std::filesystem::create_directories(squat + "/held");  // not empty: the writer cannot take its place
    CHECK(dtrain::test::error_message([&] {
            dtrain::io::convert_fashion_mnist(src.path().string(), out.path().string());
          }) != "no error");
    CHECK_FALSE(std::filesystem::exists(out.file("fashion-mnist-train.h5")));
    CHECK_FALSE(std::filesystem::exists(out.file("fashion-mnist-test.h5")));
    std::filesystem::remove_all(squat);
  }
  SECTION("a source that is a file, an entry that is a folder") {
    CHECK_THAT(usage_error_message([&] {
                 dtrain::io::convert_fashion_mnist(src.file("train-images-idx3-ubyte.gz"), out.path().string());
               }),
               Contains("train-images-idx3-ubyte.gz: is not a directory"));
    std::filesystem::remove(src.file("t10k-labels-idx1-ubyte.gz"));
    std::filesystem::create_directory(src.file("t10k-labels-idx1-ubyte.gz"));
    CHECK_THAT(usage_error_message(
                   [&] { dtrain::io::convert_fashion_mnist(src.path().string(), out.path().string()); }),
               Contains("t10k-labels-idx1-ubyte.gz in this Fashion-MNIST source folder is not a regular file"));
    CHECK_FALSE(std::filesystem::exists(out.file("fashion-mnist-train.h5")));
  }
  SECTION("a label >= 10") {
    write_idx(src.file("train-labels-idx1-ubyte.gz"), 0x801, {25}, 25, 11);
    std::string msg = usage_error_message(
        [&] { dtrain::io::convert_fashion_mnist(src.path().string(), out.path().string()); });
    CHECK_THAT(msg, Contains("train-labels-idx1-ubyte.gz") && Contains("label 10 at index 10"));
    CHECK_FALSE(std::filesystem::exists(out.file("fashion-mnist-train.h5")));
  }
  SECTION("a source folder without the test files: named, nothing written") {
    std::filesystem::remove(src.file("t10k-images-idx3-ubyte.gz"));
    std::filesystem::remove(src.file("t10k-labels-idx1-ubyte.gz"));
    std::string msg = usage_error_message(
        [&] { dtrain::io::convert_fashion_mnist(src.path().string(), out.path().string()); });
    CHECK_THAT(msg, Contains("no t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz") &&
                        Contains("dataset-fashion-mnist") && Contains("--src DIR"));
    CHECK_FALSE(std::filesystem::exists(out.file("fashion-mnist-train.h5")));
  }
  SECTION("a missing source folder") {
    CHECK_THAT(usage_error_message([&] {
                 dtrain::io::convert_fashion_mnist(src.file("absent"), out.path().string());
               }),
               Contains("absent"));
  }
  CHECK(dtrain::test::count_temp_files(out.path()) == 0);
}

TEST_CASE("the installed Fashion-MNIST converts to 60000 + 10000 samples", "[io][fashion]") {
  const std::string src = dtrain::settings::fashion_dir();
  INFO("Fashion-MNIST folder " << src << " (DTRAIN_FASHION_DIR; Debian's dataset-fashion-mnist, "
                                         "scripts/setup-deps.sh)");
  REQUIRE(std::filesystem::exists(std::filesystem::path(src) / "train-images-idx3-ubyte.gz"));
  TempDir out;
  auto s = dtrain::io::convert_fashion_mnist(src, out.path().string());
  CHECK((s.n_train == 60000 && s.n_test == 10000));
  for (auto [path, n, per_class] : {std::tuple{s.train_path, 60000, 6000},
                                    std::tuple{s.test_path, 10000, 1000}}) {
    dtrain::io::Hdf5Dataset ds(path);
    CHECK(ds.n() == n);
    CHECK((ds.height() == 28 && ds.width() == 28 && ds.channels() == 1));
    CHECK(ds.classes() == 10);
    std::array<int, 10> hist{};
    for (int32_t l : ds.labels()) ++hist[size_t(l)];
    for (int k = 0; k < 10; ++k) CHECK(hist[size_t(k)] == per_class);
  }
  // The first training image equals the IDX source byte for byte.
  auto idx = dtrain::io::read_idx_images(src + "/train-images-idx3-ubyte.gz");
  dtrain::io::Hdf5Dataset train(s.train_path);
  std::vector<uint8_t> img(784);
  train.read_images({59999}, img.data());
  CHECK(std::equal(img.begin(), img.end(), idx.pixels.end() - 784));
}
