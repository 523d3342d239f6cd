// tests/test_io.cpp — io::Hdf5Dataset and io::DatasetWriter (DESIGN.md §5 layout):
// exact roundtrips of random data through index sets and ranges, and one bad
// file per validation rule, each checked for the exception type and a message
// naming the file and the object.
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/hdf5_dataset.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::io::Hdf5Dataset;
using dtrain::test::TempDir;
using dtrain::test::error_message;
using dtrain::test::usage_error_message;

namespace {

struct Data {
  int64_t n, h, w, c;
  int classes;
  std::vector<uint8_t> images;  // [n, h, w, c]
  std::vector<int32_t> labels;  // [n]
};

Data make_random_data(int64_t n, int64_t h, int64_t w, int64_t c, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  Data d{n, h, w, c, classes, std::vector<uint8_t>(size_t(n * h * w * c)),
         std::vector<int32_t>(size_t(n))};
  for (auto& v : d.images) v = uint8_t(rng());
  for (auto& v : d.labels) v = int32_t(rng() % uint32_t(classes));
  return d;
}

// A file built with the HDF5 C API, each part optional or of a chosen type and shape.
struct Spec {
  bool images = true, labels = true, classes_attr = true;
  hid_t images_type = H5T_STD_U8LE;
  std::vector<hsize_t> images_dims = {8, 4, 3, 2};
  hid_t labels_type = H5T_STD_I32LE;
  std::vector<hsize_t> labels_dims = {8};
  std::vector<int64_t> label_values = {0, 1, 2, 3, 4, 5, 6, 7};  // one per element
  int classes = 10;
};

void write_spec(const std::string& path, const Spec& s) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(f >= 0);
  if (s.images) {
    hid_t sp = H5Screate_simple(int(s.images_dims.size()), s.images_dims.data(), nullptr);
    hid_t d = H5Dcreate2(f, "images", s.images_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(d >= 0);
    H5Dclose(d);
    H5Sclose(sp);
  }
  if (s.labels) {
    hid_t sp = H5Screate_simple(int(s.labels_dims.size()), s.labels_dims.data(), nullptr);
    hid_t d = H5Dcreate2(f, "labels", s.labels_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(d >= 0);
    REQUIRE(H5Sget_simple_extent_npoints(sp) == hssize_t(s.label_values.size()));
    REQUIRE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                     s.label_values.data()) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
  }
  if (s.classes_attr) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "classes", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, &s.classes);
    H5Aclose(a);
    H5Sclose(sp);
  }
  H5Fclose(f);
}

// Opening `s` must fail with a UsageError naming the file and `object`.
void expect_bad(const Spec& s, const std::string& object, const std::string& detail) {
  TempDir dir;
  const std::string path = dir.file("bad.h5");
  write_spec(path, s);
  std::string msg = usage_error_message([&] { Hdf5Dataset ds(path); });
  INFO(msg);
  CHECK_THAT(msg, Contains(path) && Contains(object) && Contains(detail));
}

}  // namespace

TEST_CASE("a dataset file written by write_dataset reads back exactly", "[io]") {
  TempDir dir;
  const std::string path = dir.file("good.h5");
  // 300-byte samples: chunks of ceil(512 KiB / 300) = 1748 samples, so 3000 span two chunks.
  Data d = make_random_data(3000, 10, 10, 3, 7, 42);
  int compression = GENERATE(0, 4);
  dtrain::io::write_dataset(path, d.images, d.n, d.h, d.w, d.c, d.labels, d.classes, compression);
  CHECK(dtrain::test::count_temp_files(dir.path()) == 0);

  Hdf5Dataset ds(path);
  REQUIRE(ds.n() == d.n);
  CHECK(ds.height() == 10);
  CHECK(ds.width() == 10);
  CHECK(ds.channels() == 3);
  CHECK(ds.classes() == 7);
  CHECK(ds.labels() == d.labels);
  const size_t sb = size_t(ds.sample_bytes());

  SECTION("chunks run along N") {
    // Opened twice in one process: HDF5 requires the same locking flag both times.
    auto fapl = dtrain::io::make_fapl_no_locking();
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
    hid_t img = H5Dopen2(f, "images", H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(img);
    hsize_t chunk[4] = {};
    REQUIRE(H5Pget_chunk(dcpl, 4, chunk) == 4);
    CHECK(chunk[0] == hsize_t(dtrain::io::images_chunk_samples(300, 3000)));
    CHECK(chunk[0] == 1748);
    CHECK((chunk[1] == 10 && chunk[2] == 10 && chunk[3] == 3));
    H5Pclose(dcpl);
    H5Dclose(img);
    H5Fclose(f);
  }
  SECTION("random index sets, unsorted with repeats") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<int64_t> idx(1 + rng() % 300);
      for (auto& i : idx) i = int64_t(rng() % 3000);
      if (trial % 3 == 0) idx.push_back(idx.front());  // a guaranteed repeat
      if (trial % 5 == 0) {                             // long consecutive runs
        int64_t s = rng() % 2500;
        for (int64_t k = 0; k < 200; ++k) idx.push_back(s + k);
      }
      std::vector<uint8_t> out(idx.size() * sb, 0xAB);
      ds.read_images(idx, out.data());
      for (size_t k = 0; k < idx.size(); ++k)
        REQUIRE(std::equal(out.begin() + k * sb, out.begin() + (k + 1) * sb,
                           d.images.begin() + idx[k] * sb));
    }
  }
  SECTION("sorted distinct indices (read without staging)") {
    std::vector<int64_t> idx = {0, 1, 2, 5, 1747, 1748, 2999};
    std::vector<uint8_t> out(idx.size() * sb);
    ds.read_images(idx, out.data());
    for (size_t k = 0; k < idx.size(); ++k)
      REQUIRE(std::equal(out.begin() + k * sb, out.begin() + (k + 1) * sb,
                         d.images.begin() + idx[k] * sb));
  }
  SECTION("ranges, across chunk borders, and the whole file") {
    for (auto [begin, count] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 1}, {1700, 100}, {2999, 1}, {0, 3000}, {1748, 0}}) {
      std::vector<uint8_t> out(size_t(count) * sb);
      ds.read_range(begin, count, out.data());
      REQUIRE(std::equal(out.begin(), out.end(), d.images.begin() + begin * sb));
    }
  }
  SECTION("out-of-range requests are errors") {
    std::vector<uint8_t> out(2 * sb);
    CHECK_THROWS_AS(ds.read_images({0, 3000}, out.data()), dtrain::Error);
    CHECK_THROWS_AS(ds.read_images({-1}, out.data()), dtrain::Error);
    CHECK_THROWS_AS(ds.read_range(2999, 2, out.data()), dtrain::Error);
  }
}

TEST_CASE("an uncommitted DatasetWriter leaves no file behind", "[io]") {
  TempDir dir;
  const std::string path = dir.file("partial.h5");
  Data d = make_random_data(100, 4, 4, 1, 3, 1);
  {
    dtrain::io::DatasetWriter w(path, 100, 4, 4, 1, 3);
    w.write(0, 50, std::span(d.images).first(50 * 16), std::span(d.labels).first(50));
    CHECK(dtrain::test::count_temp_files(dir.path()) == 1);
    CHECK_THROWS_AS(w.commit(), dtrain::Error);  // 50 of 100 samples written
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(dtrain::test::count_temp_files(dir.path()) == 0);

  // A writer rejects labels outside [0, classes).
  dtrain::io::DatasetWriter w(path, 1, 4, 4, 1, 3);
  std::vector<int32_t> bad = {3};
  CHECK_THROWS_AS(w.write(0, 1, std::span(d.images).first(16), bad), dtrain::Error);
}

TEST_CASE("dataset files with a bad layout are rejected with file and object named", "[io]") {
  Spec s;
  SECTION("missing /images") {
    s.images = false;
    expect_bad(s, "/images", "missing");
  }
  SECTION("missing /labels") {
    s.labels = false;
    expect_bad(s, "/labels", "missing");
  }
  SECTION("float images") {
    s.images_type = H5T_IEEE_F32LE;
    expect_bad(s, "/images", "float32");
  }
  SECTION("int8 images") {
    s.images_type = H5T_STD_I8LE;
    expect_bad(s, "/images", "int8");
  }
  SECTION("int64 labels (wrong size)") {
    s.labels_type = H5T_STD_I64LE;
    expect_bad(s, "/labels", "int64");
  }
  SECTION("uint32 labels (wrong sign)") {
    s.labels_type = H5T_STD_U32LE;
    expect_bad(s, "/labels", "uint32");
  }
  SECTION("float labels") {
    s.labels_type = H5T_IEEE_F32LE;
    expect_bad(s, "/labels", "float32");
  }
  SECTION("images of rank 3") {
    s.images_dims = {8, 4, 3};
    expect_bad(s, "/images", "rank is 3");
  }
  SECTION("labels of rank 2") {
    s.labels_dims = {8, 1};
    expect_bad(s, "/labels", "rank is 2");
  }
  SECTION("N mismatch") {
    s.labels_dims = {7};
    s.label_values.pop_back();
    expect_bad(s, "/labels", "7 entries");
  }
  SECTION("label >= classes") {
    s.label_values[5] = 12;
    expect_bad(s, "/labels", "label 12 at index 5 is outside [0, 10)");
  }
  SECTION("negative label") {
    s.label_values[3] = -1;
    expect_bad(s, "/labels", "label -1 at index 3");
  }
  SECTION("missing classes attribute") {
    s.classes_attr = false;
    expect_bad(s, "classes", "missing");
  }
  SECTION("classes = 0") {
    s.classes = 0;
    expect_bad(s, "classes", "> 0");
  }
  SECTION("/images is a group") {
    s.images = false;
    TempDir dir;
    const std::string path = dir.file("group.h5");
    write_spec(path, s);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Gclose(H5Gcreate2(f, "images", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Fclose(f);
    std::string msg = usage_error_message([&] { Hdf5Dataset ds(path); });
    CHECK_THAT(msg, Contains(path) && Contains("/images") && Contains("not a dataset"));
  }
}

TEST_CASE("missing, non-HDF5 and truncated dataset files are usage errors", "[io]") {
  TempDir dir;
  SECTION("non-existent path") {
    const std::string path = dir.file("nope.h5");
    CHECK_THAT(usage_error_message([&] { Hdf5Dataset ds(path); }),
               Contains(path) && Contains("no such file"));
  }
  SECTION("not an HDF5 file") {
    const std::string path = dir.file("text.h5");
    std::ofstream(path) << "just some text, no HDF5 signature here\n";
    CHECK_THAT(usage_error_message([&] { Hdf5Dataset ds(path); }),
               Contains(path) && Contains("not an HDF5 file"));
  }
  SECTION("truncated to half") {
    const std::string path = dir.file("trunc.h5");
    Data d = make_random_data(2000, 28, 28, 1, 10, 3);
    dtrain::io::write_dataset(path, d.images, d.n, d.h, d.w, d.c, d.labels, d.classes);
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
    std::string msg = usage_error_message([&] {
      Hdf5Dataset ds(path);
      std::vector<uint8_t> out(size_t(ds.n() * ds.sample_bytes()));
      ds.read_range(0, ds.n(), out.data());  // in case opening did not notice
    });
    INFO(msg);
    CHECK_THAT(msg, Contains(path) && Contains("truncated"));
  }
}

// io/h5_util.hpp FileWatch: HDF5's sec2 driver reads past a shrunken end as
// zeros with no error, so a file truncated under a running job trained on
// blank images (a helper's finding). Each read now compares the open
// descriptor's size and modification time with those at open.
TEST_CASE("a dataset file changed under its reader is an Error naming it, not zeros", "[io]") {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string path = dir.file("live.h5");
  Data d = make_random_data(2000, 28, 28, 1, 10, 5);
  dtrain::io::write_dataset(path, d.images, d.n, d.h, d.w, d.c, d.labels, d.classes);
  Hdf5Dataset ds(path);
  const size_t sb = size_t(ds.sample_bytes());
  std::vector<uint8_t> out(2000 * sb);
  ds.read_range(0, 2000, out.data());  // unchanged: reads
  CHECK(std::equal(out.begin(), out.end(), d.images.begin()));
  SECTION("truncated: the samples past the new end would read as zeros") {
    fs::resize_file(path, fs::file_size(path) / 2);
    const std::string msg = error_message([&] { ds.read_images({1990, 3, 1999}, out.data()); });
    INFO(msg);
    CHECK_THAT(msg, Contains(path) && Contains("/images") && Contains("changed while this job read it") &&
                        Contains(" bytes"));
    CHECK_THAT(error_message([&] { ds.read_range(0, 10, out.data()); }), Contains("changed while this job read it"));
  }
  SECTION("rewritten in place with the same size: the modification time tells") {
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-1, std::ios::end);
      f.put('x');
    }
    fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(5));
    const std::string msg = error_message([&] { ds.read_range(0, 1, out.data()); });
    INFO(msg);
    CHECK_THAT(msg, Contains(path) && Contains("modified since it was opened"));
  }
  SECTION("replaced by a rename: the open file is intact and still reads") {
    Data e = make_random_data(2000, 28, 28, 1, 10, 6);
    dtrain::io::write_dataset(dir.file("new.h5"), e.images, e.n, e.h, e.w, e.c, e.labels, e.classes);
    fs::rename(dir.file("new.h5"), path);
    std::fill(out.begin(), out.end(), 0);
    ds.read_range(0, 2000, out.data());
    CHECK(std::equal(out.begin(), out.end(), d.images.begin()));
  }
}
