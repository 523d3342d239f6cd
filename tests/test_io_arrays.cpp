// tests/test_io_arrays.cpp — io::save_float_arrays / load_float_array: exact
// roundtrip (nested names, empty arrays, NaN bit patterns), atomic replace, and
// usage errors naming the file and the dataset.
#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/float_arrays.hpp"
#include "io/h5_util.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::test::TempDir;
using dtrain::test::usage_error_message;

TEST_CASE("float arrays roundtrip bit-exactly", "[io]") {
  TempDir dir;
  const std::string path = dir.file("params.h5");
  std::vector<float> a = {1.0f, -2.5f, 3.25e-8f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(), -0.0f};
  std::vector<float> b(10000);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::sin(float(i)) * 1e3f;
  std::vector<float> empty;
  dtrain::io::save_float_arrays(path, {{"params", a}, {"net/fc1/w", b}, {"empty", empty}});
  CHECK(dtrain::test::count_temp_files(dir.path()) == 0);

  auto a2 = dtrain::io::load_float_array(path, "params");
  REQUIRE(a2.size() == a.size());
  CHECK(std::memcmp(a2.data(), a.data(), a.size() * sizeof(float)) == 0);
  CHECK(dtrain::io::load_float_array(path, "net/fc1/w") == b);
  CHECK(dtrain::io::load_float_array(path, "empty").empty());

  // Saving again replaces the file as a whole.
  dtrain::io::save_float_arrays(path, {{"other", a}});
  CHECK_THROWS_AS(dtrain::io::load_float_array(path, "params"), dtrain::UsageError);
  CHECK(dtrain::io::load_float_array(path, "other").size() == a.size());
  CHECK(dtrain::test::count_temp_files(dir.path()) == 0);
}

TEST_CASE("bad float-array requests are usage errors naming file and dataset", "[io]") {
  TempDir dir;
  const std::string path = dir.file("params.h5");
  std::vector<float> a = {1, 2, 3};
  dtrain::io::save_float_arrays(path, {{"w", a}});
  SECTION("missing dataset") {
    CHECK_THAT(usage_error_message([&] { dtrain::io::load_float_array(path, "nope"); }),
               Contains(path) && Contains("/nope") && Contains("missing"));
    CHECK_THAT(usage_error_message([&] { dtrain::io::load_float_array(path, "a/b"); }),
               Contains(path) && Contains("/a/b"));
  }
  SECTION("missing file") {
    const std::string absent = dir.file("absent.h5");
    CHECK_THAT(usage_error_message([&] { dtrain::io::load_float_array(absent, "w"); }),
               Contains(absent));
  }
  SECTION("wrong dtype and rank") {
    const std::string other = dir.file("other.h5");
    hid_t f = H5Fcreate(other.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t d1[1] = {3}, d2[2] = {3, 1};
    hid_t s1 = H5Screate_simple(1, d1, nullptr), s2 = H5Screate_simple(2, d2, nullptr);
    H5Dclose(H5Dcreate2(f, "f64", H5T_IEEE_F64LE, s1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Dclose(H5Dcreate2(f, "rank2", H5T_IEEE_F32LE, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(s1);
    H5Sclose(s2);
    H5Fclose(f);
    CHECK_THAT(usage_error_message([&] { dtrain::io::load_float_array(other, "f64"); }),
               Contains(other) && Contains("/f64") && Contains("float64"));
    CHECK_THAT(usage_error_message([&] { dtrain::io::load_float_array(other, "rank2"); }),
               Contains(other) && Contains("/rank2") && Contains("rank is 2"));
  }
  SECTION("duplicate names are refused and leave no file") {
    const std::string dup = dir.file("dup.h5");
    CHECK_THROWS_AS(dtrain::io::save_float_arrays(dup, {{"x", a}, {"x", a}}), dtrain::Error);
    CHECK_FALSE(std::filesystem::exists(dup));
    CHECK(dtrain::test::count_temp_files(dir.path()) == 0);
  }
}

TEST_CASE("float arrays: root attributes say what the file is", "[io]") {
  TempDir dir;
  const std::string path = dir.file("params.h5");
  std::vector<float> a = {1.0f, 2.0f};
  dtrain::io::save_float_arrays(path, {{"params", a}}, {{"compute_stand_in", "50 ms per step: an emulation"}});
  dtrain::io::H5Id f = dtrain::io::open_h5_read_only(path);
  CHECK(dtrain::io::read_string_attribute(f.get(), path, "compute_stand_in") == "50 ms per step: an emulation");
  CHECK(dtrain::io::load_float_array(path, "params") == a);
}
