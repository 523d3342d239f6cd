// tests/test_io_jpeg.cpp — the jpeg layout (docs/data-formats.md) from the
// loader's side: a store of real Fashion-MNIST pictures written by the test
// itself (tests/jpeg_store.hpp), its bytes read back exactly, its images
// decoded bitwise as a direct TurboJPEG decode with the same flags decodes
// them (full size and DCT-scaled, RGB and gray, through the Prefetcher too),
// and every validation error naming the file and the object.
#include <hdf5.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

#include "io/dataset.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/jpeg_codec.hpp"
#include "io/jpeg_dataset.hpp"
#include "io/prefetcher.hpp"
#include "io/sample_decoder.hpp"
#include "tests/jpeg_store.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::io::ImageShape;
using dtrain::io::JpegDataset;
using dtrain::test::StoreImage;
using dtrain::test::TempDir;
using dtrain::test::error_message;
using dtrain::test::usage_error_message;

namespace {

// Sizes of the fixture's pictures: small, odd, portrait, landscape, large.
const std::vector<std::pair<int, int>> kSizes = {{28, 28}, {37, 53}, {53, 37}, {64, 48}, {300, 200}, {96, 128}};

// n pictures cycling through kSizes (quality 90), labels from Fashion-MNIST.
std::vector<StoreImage> make_images(int n, bool gray = false) {
  static const dtrain::test::FashionImages f = dtrain::test::fashion_images(64);
  std::vector<StoreImage> v;
  for (int k = 0; k < n; ++k) {
    const auto [h, w] = kSizes[size_t(k) % kSizes.size()];
    const auto rgb = dtrain::test::fashion_rgb(f, k % f.n, h, w, gray);
    StoreImage im;
    im.jpeg = dtrain::io::encode_jpeg(rgb.data(), h, w, 3, 90);
    im.h = h;
    im.w = w;
    im.label = f.labels[size_t(k % f.n)];
    v.push_back(std::move(im));
  }
  return v;
}

// The reference decode: TurboJPEG called directly, flags 0, at w × h (a scaled size selects DCT scaling).
std::vector<uint8_t> direct_decode(const std::vector<uint8_t>& jpeg, int w, int h, int pf) {
  tjhandle t = tjInitDecompress();
  std::vector<uint8_t> out(size_t(w * h * tjPixelSize[pf]));
  const int rc = tjDecompress2(t, jpeg.data(), jpeg.size(), out.data(), w, 0, h, pf, 0);
  tjDestroy(t);
  REQUIRE(rc == 0);
  return out;
}

// Replaces dataset `name` of `path` by one of type `type` with `dims` and the given bytes.
void replace_dataset(const std::string& path, const char* name, hid_t type, const std::vector<hsize_t>& dims,
                     const void* data) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  if (H5Lexists(f, name, H5P_DEFAULT) > 0) H5Ldelete(f, name, H5P_DEFAULT);
  if (!dims.empty()) {
    hid_t s = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
    hid_t d = H5Dcreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(d >= 0);
    if (data) REQUIRE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(s);
  }
  H5Fclose(f);
}

void set_int_attr(const std::string& path, const char* name, int64_t v, bool remove = false) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  if (!remove) {
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(s);
  }
  H5Fclose(f);
}

void set_layout(const std::string& path, const char* value) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (H5Aexists(f, "layout") > 0) H5Adelete(f, "layout");
  if (value) {
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, std::max<size_t>(1, std::strlen(value)));
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "layout", type, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, value);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(type);
  }
  H5Fclose(f);
}

}  // namespace

TEST_CASE("a jpeg store: open_dataset finds the layout and read_stored returns the JPEG bytes exactly", "[jpeg]") {
  TempDir dir;
  const auto images = make_images(40);
  const std::string path = dir.file("store.h5");
  dtrain::test::StoreOptions so;
  so.chunk_bytes = 4096;  // many chunks: reads cross chunk boundaries
  so.variable_length_layout = GENERATE(false, true);
  dtrain::test::write_jpeg_store(path, images, so);

  REQUIRE(dtrain::io::file_layout(path) == dtrain::io::Layout::jpeg);
  auto ds = dtrain::io::open_dataset(path);
  REQUIRE(ds->layout() == dtrain::io::Layout::jpeg);
  CHECK(ds->n() == 40);
  CHECK(ds->classes() == 10);
  CHECK_FALSE(ds->fixed_shape().has_value());
  CHECK(ds->channels() == 3);
  CHECK(dynamic_cast<JpegDataset&>(*ds).stored_size() == 28);
  for (int i = 0; i < 40; ++i) {
    CHECK(ds->shape(i) == ImageShape{images[size_t(i)].h, images[size_t(i)].w, 3});
    CHECK(ds->labels()[size_t(i)] == images[size_t(i)].label);
  }
  // Random sorted subsets (runs of consecutive samples and gaps): exact bytes, one request per run.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < 40; ++i)
      if (rng() % 3 == 0) idx.push_back(i);
    if (idx.empty()) idx.push_back(int64_t(rng() % 40));
    ds->reset_read_stats();
    dtrain::io::StoredSamples st;
    ds->read_stored(idx, st);
    int64_t runs = 1;
    for (size_t k = 1; k < idx.size(); ++k) runs += idx[k] != idx[k - 1] + 1;
    CHECK(ds->read_stats().requests == runs);
    for (size_t k = 0; k < idx.size(); ++k) {
      const auto& want = images[size_t(idx[k])].jpeg;
      REQUIRE(st.size(k) == want.size());
      CHECK(std::equal(want.begin(), want.end(), st.data(k)));
    }
  }
}

TEST_CASE("jpeg samples decode bitwise as a direct TurboJPEG decode (full size, DCT-scaled, gray)", "[jpeg]") {
  TempDir dir;
  const auto images = make_images(12);
  const std::string path = dir.file("store.h5");
  dtrain::test::write_jpeg_store(path, images);
  JpegDataset ds(path);
  dtrain::io::JpegDecoder dec;
  for (size_t i = 0; i < images.size(); ++i) {
    const auto& im = images[i];
    for (int denom : {1, 2, 4, 8}) {
      for (int channels : {3, 1}) {
        std::vector<uint8_t> got;
        int64_t gh = 0, gw = 0;
        const auto hd = dec.decode(im.jpeg.data(), im.jpeg.size(), channels, denom, got, &gh, &gw, "test");
        CHECK(hd.height == im.h);
        CHECK(hd.width == im.w);
        const int sw = TJSCALED(im.w, (tjscalingfactor{1, denom}));
        const int sh = TJSCALED(im.h, (tjscalingfactor{1, denom}));
        CHECK(gw == sw);
        CHECK(gh == sh);
        CHECK(got == direct_decode(im.jpeg, sw, sh, channels == 3 ? TJPF_RGB : TJPF_GRAY));
      }
    }
  }

  // Through the SampleDecoder (evaluation, input = the image's own size: taken whole) and a
  // unit normalisation: out = pixel/255 of the direct decode, every value.
  for (int channels : {3, 1}) {
    for (size_t i = 0; i < images.size(); ++i) {
      const auto& im = images[i];
      dtrain::io::InputTransform t;
      t.input = ImageShape{im.h, im.w, channels};
      t.train = false;
      const dtrain::io::NormalizeTable norm(channels, {}, {});
      dtrain::io::SampleDecoder sd(ds, t, norm, 1);
      std::vector<float> out(size_t(im.h * im.w * channels));
      sd.decode(int64_t(i), 0, im.jpeg.data(), im.jpeg.size(), out.data());
      const auto ref = direct_decode(im.jpeg, im.w, im.h, channels == 3 ? TJPF_RGB : TJPF_GRAY);
      int64_t bad = 0;
      for (int c = 0; c < channels; ++c)
        for (int64_t p = 0; p < int64_t(im.h) * im.w; ++p)
          bad += out[size_t(c * im.h * im.w + p)] != norm.channel(c)[ref[size_t(p * channels + c)]];
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("the Prefetcher delivers decoded jpeg samples equal to a direct decode, in plan order", "[jpeg]") {
  TempDir dir;
  // All 28 × 28 (the 28-pixel size of kSizes): input = stored size, no augmentation.
  const dtrain::test::FashionImages f = dtrain::test::fashion_images(48);
  std::vector<StoreImage> images;
  for (int k = 0; k < 48; ++k) {
    const auto rgb = dtrain::test::fashion_rgb(f, k, 28, 28);
    images.push_back({dtrain::io::encode_jpeg(rgb.data(), 28, 28, 3, 85), 28, 28, f.labels[size_t(k)]});
  }
  const std::string path = dir.file("store.h5");
  dtrain::test::write_jpeg_store(path, images);
  auto ds = dtrain::io::open_dataset(path);
  dtrain::io::PrefetchOptions o;
  o.threads = 3;
  o.input = ImageShape{28, 28, 3};
  o.total_batches = 12;
  dtrain::io::Sampler plan(48, 1, 0, 8, 5);
  dtrain::io::Prefetcher pf(*ds, plan, o);
  const dtrain::io::NormalizeTable norm(3, {}, {});
  for (int s = 0; s < 12; ++s) {
    const auto& b = pf.next();
    REQUIRE(b.indices == plan.batch(b.epoch, b.step));
    for (int64_t k = 0; k < b.size; ++k) {
      const int64_t i = b.indices[size_t(k)];
      CHECK(b.labels[k] == f.labels[size_t(i)]);
      const auto ref = direct_decode(images[size_t(i)].jpeg, 28, 28, TJPF_RGB);
      int64_t bad = 0;
      for (int c = 0; c < 3; ++c)
        for (int p = 0; p < 28 * 28; ++p) bad += b.x[(k * 3 + c) * 784 + p] != norm.channel(c)[ref[size_t(p * 3 + c)]];
      CHECK(bad == 0);
    }
  }
  CHECK(pf.stats().decoded >= 12 * 8);
  CHECK(pf.stats().decode_s > 0);
}

TEST_CASE("jpeg files with a bad layout are rejected with file and object named", "[jpeg]") {
  TempDir dir;
  const auto images = make_images(6);
  const std::string path = dir.file("bad.h5");
  dtrain::test::write_jpeg_store(path, images);
  uint64_t total = 0;
  for (const auto& im : images) total += im.jpeg.size();
  auto offsets = [&] {
    std::vector<uint64_t> o{0};
    for (const auto& im : images) o.push_back(o.back() + im.jpeg.size());
    return o;
  };
  auto expect = [&](std::initializer_list<const char*> parts) {
    const std::string msg = usage_error_message([&] { dtrain::io::open_dataset(path); });
    CHECK_THAT(msg, Contains(path));
    for (const char* p : parts) CHECK_THAT(msg, Contains(p));
  };

  SECTION("offsets not increasing") {
    auto o = offsets();
    o[3] = o[2];
    replace_dataset(path, "offsets", H5T_NATIVE_UINT64, {o.size()}, o.data());
    expect({"/offsets", "not increasing at index 3"});
  }
  SECTION("offsets[0] not 0") {
    auto o = offsets();
    o[0] = 5;
    replace_dataset(path, "offsets", H5T_NATIVE_UINT64, {o.size()}, o.data());
    expect({"/offsets", "offsets[0] is 5"});
  }
  SECTION("last offset is not the byte count") {
    auto o = offsets();
    o.back() -= 1;
    replace_dataset(path, "offsets", H5T_NATIVE_UINT64, {o.size()}, o.data());
    const std::string want = "offsets[N] = " + std::to_string(total - 1) + " but /jpeg holds " + std::to_string(total);
    expect({"/offsets", want.c_str()});
  }
  SECTION("offsets of the wrong type") {
    auto o = offsets();
    std::vector<int32_t> o32(o.begin(), o.end());
    replace_dataset(path, "offsets", H5T_NATIVE_INT32, {o32.size()}, o32.data());
    expect({"/offsets", "int32", "uint64"});
  }
  SECTION("offsets missing") {
    replace_dataset(path, "offsets", 0, {}, nullptr);
    expect({"/offsets", "missing"});
  }
  SECTION("only one offset: no samples") {
    const uint64_t zero = 0;
    replace_dataset(path, "offsets", H5T_NATIVE_UINT64, {1}, &zero);
    expect({"/offsets", "no samples"});
  }
  SECTION("jpeg of rank 2") {
    std::vector<uint8_t> b(static_cast<size_t>(total));
    replace_dataset(path, "jpeg", H5T_NATIVE_UINT8, {total / 2, 2}, b.data());
    expect({"/jpeg", "rank is 2"});
  }
  SECTION("jpeg bytes never written (an incomplete file)") {
    replace_dataset(path, "jpeg", H5T_NATIVE_UINT8, {total}, nullptr);
    expect({"/jpeg", "bytes are stored"});
  }
  SECTION("shapes with 4 columns") {
    std::vector<int32_t> s(images.size() * 4, 28);
    replace_dataset(path, "shapes", H5T_NATIVE_INT32, {images.size(), 4}, s.data());
    expect({"/shapes", "expected [N, 3]"});
  }
  SECTION("shapes with a row too few") {
    std::vector<int32_t> s((images.size() - 1) * 3, 28);
    replace_dataset(path, "shapes", H5T_NATIVE_INT32, {images.size() - 1, 3}, s.data());
    expect({"/shapes", "5 rows"});
  }
  SECTION("a shape with C = 1") {
    std::vector<int32_t> s;
    for (const auto& im : images) s.insert(s.end(), {im.h, im.w, 3});
    s[3 * 2 + 2] = 1;
    replace_dataset(path, "shapes", H5T_NATIVE_INT32, {images.size(), 3}, s.data());
    expect({"/shapes", "image 2 has C = 1"});
  }
  SECTION("an empty shape") {
    std::vector<int32_t> s;
    for (const auto& im : images) s.insert(s.end(), {im.h, im.w, 3});
    s[3 * 4] = 0;
    replace_dataset(path, "shapes", H5T_NATIVE_INT32, {images.size(), 3}, s.data());
    expect({"/shapes", "image 4 has the empty size"});
  }
  SECTION("a label out of range") {
    std::vector<int32_t> l(images.size(), 1);
    l[5] = 10;
    replace_dataset(path, "labels", H5T_NATIVE_INT32, {l.size()}, l.data());
    expect({"/labels", "label 10 at index 5 is outside [0, 10)"});
  }
  SECTION("labels of another length") {
    std::vector<int32_t> l(images.size() + 1, 1);
    replace_dataset(path, "labels", H5T_NATIVE_INT32, {l.size()}, l.data());
    expect({"/labels", "7 entries", "/offsets has 6"});
  }
  SECTION("no size attribute") {
    set_int_attr(path, "size", 0, /*remove=*/true);
    expect({"attribute 'size'", "missing"});
  }
  SECTION("classes = 0") {
    set_int_attr(path, "classes", 0);
    expect({"attribute 'classes'", "> 0"});
  }
  SECTION("an unknown layout") {
    set_layout(path, "png");
    expect({"attribute 'layout'", "'png'", "raw' or 'jpeg'"});
  }
  SECTION("a raw reader on a jpeg file") {
    const std::string msg = usage_error_message([&] { dtrain::io::Hdf5Dataset raw(path); });
    CHECK_THAT(msg, Contains(path) && Contains("layout") && Contains("jpeg"));
  }
  SECTION("a damaged JPEG is an error at its decode naming the file and the image") {
    std::vector<uint8_t> junk(size_t(total), 0x55);
    replace_dataset(path, "jpeg", H5T_NATIVE_UINT8, {total}, junk.data());
    JpegDataset ds(path);  // opens: bytes are not decoded at open
    dtrain::io::InputTransform t;
    t.input = ImageShape{28, 28, 3};
    t.train = false;
    const dtrain::io::NormalizeTable norm(3, {}, {});
    dtrain::io::SampleDecoder sd(ds, t, norm, 0);
    dtrain::io::StoredSamples st;
    ds.read_stored({2}, st);
    std::vector<float> out(28 * 28 * 3);
    try {
      sd.decode(2, 0, st.data(0), st.size(0), out.data());
      FAIL("no error");
    } catch (const dtrain::Error& e) {
      CHECK_THAT(std::string(e.what()), Contains(path) && Contains("/jpeg: image 2") && Contains("not a JPEG"));
    }
  }
  SECTION("a JPEG whose size differs from /shapes") {
    std::vector<int32_t> s;
    for (const auto& im : images) s.insert(s.end(), {im.h, im.w, 3});
    s[3 * 1] += 1;
    replace_dataset(path, "shapes", H5T_NATIVE_INT32, {images.size(), 3}, s.data());
    JpegDataset ds(path);
    CHECK(ds.warnings().empty() == false);  // 38 × 53 has a shorter side other than size 28
    dtrain::io::InputTransform t;
    t.input = ImageShape{28, 28, 3};
    t.train = false;
    const dtrain::io::NormalizeTable norm(3, {}, {});
    dtrain::io::SampleDecoder sd(ds, t, norm, 0);
    dtrain::io::StoredSamples st;
    ds.read_stored({1}, st);
    std::vector<float> out(28 * 28 * 3);
    try {
      sd.decode(1, 0, st.data(0), st.size(0), out.data());
      FAIL("no error");
    } catch (const dtrain::Error& e) {
      CHECK_THAT(std::string(e.what()), Contains("/jpeg: image 1") && Contains("37x53") && Contains("/shapes says 38x53"));
    }
  }
}

// io/h5_util.hpp FileWatch, as for raw files (tests/test_io.cpp): a store
// truncated under its reader is an Error naming it, not JPEG bytes of zeros.
TEST_CASE("a jpeg store truncated under its reader is an Error naming it", "[jpeg]") {
  TempDir dir;
  const auto images = make_images(40);
  const std::string path = dir.file("store.h5");
  dtrain::test::write_jpeg_store(path, images, dtrain::test::StoreOptions{});
  auto ds = dtrain::io::open_dataset(path);
  dtrain::io::StoredSamples st;
  ds->read_stored({0, 1, 39}, st);  // unchanged: reads
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  const std::string msg = error_message([&] { ds->read_stored({38, 39}, st); });
  INFO(msg);
  CHECK_THAT(msg, Contains(path) && Contains("/jpeg") && Contains("changed while this job read it"));
}
