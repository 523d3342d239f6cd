// tests/test_imagefolder.cpp — `dtrain data imagefolder` (io/imagefolder.hpp) on a
// tree of Fashion-MNIST's real images (tests/image_tree.hpp): every stored
// pixel against a direct decode + resize of the same file, written out here
// with the same libraries (TurboJPEG, libpng, libexif, libvips); the odd files
// become RGB, the bad ones are skipped and listed; labels and class tables;
// the errors that must stop a conversion before it writes anything. The kill
// and resume checks run the binary: tests/integration/imagefolder.sh.
#include <libexif/exif-data.h>
#include <png.h>
#include <turbojpeg.h>
#include <vips/vips.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/settings.hpp"
#include "io/h5_util.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/image_codec.hpp"
#include "io/imagefolder.hpp"
#include "tests/image_tree.hpp"
#include "tests/test_io_util.hpp"

using namespace dtrain;
using dtrain::io::RgbImage;
using dtrain::test::TempDir;
using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

namespace {

Bytes read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// ---- the reference: a direct decode + resize, independent of io/image_codec ----

RgbImage vips_out(VipsImage* img) {
  size_t n = 0;
  void* mem = vips_image_write_to_memory(img, &n);
  REQUIRE(mem != nullptr);
  RgbImage out;
  out.width = img->Xsize;
  out.height = img->Ysize;
  out.pixels.assign(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + n);
  g_free(mem);
  return out;
}

// The file decoded (JPEG: DCT-scaled by the largest 1/d, d ≤ 8, that keeps the
// shorter side ≥ S), oriented (vips_rot by the EXIF tag), its shorter side
// resized to S by vips_resize (Lanczos-3), centre-cropped when `crop`.
RgbImage reference(const Bytes& file, int S, bool crop) {
  RgbImage img;
  int orientation = 1;
  if (file.size() > 3 && file[0] == 0xFF && file[1] == 0xD8) {
    tjhandle d = tjInitDecompress();
    int w = 0, h = 0, ss = 0, cs = 0;
    REQUIRE(tjDecompressHeader3(d, file.data(), file.size(), &w, &h, &ss, &cs) == 0);
    int den = 1;
    while (den < 8 && TJSCALED(std::min(w, h), (tjscalingfactor{1, 2 * den})) >= S) den *= 2;
    const tjscalingfactor sf{1, den};
    img.width = TJSCALED(w, sf);
    img.height = TJSCALED(h, sf);
    const bool cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    Bytes buf(size_t(img.width) * img.height * (cmyk ? 4 : 3));
    REQUIRE(tjDecompress2(d, file.data(), file.size(), buf.data(), img.width, 0, img.height,
                          cmyk ? TJPF_CMYK : TJPF_RGB, 0) == 0);
    tjDestroy(d);
    if (cmyk) {  // libjpeg-turbo's cmyk_to_rgb (cmyk.h)
      img.pixels.resize(size_t(img.width) * img.height * 3);
      for (size_t i = 0; i < size_t(img.width) * img.height; ++i)
        for (int c = 0; c < 3; ++c) img.pixels[3 * i + c] = uint8_t(buf[4 * i + c] * double(buf[4 * i + 3]) / 255.0 + 0.5);
    } else {
      img.pixels = std::move(buf);
    }
    if (ExifData* ed = exif_data_new_from_data(file.data(), unsigned(file.size()))) {
      if (ExifEntry* e = exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION))
        orientation = exif_get_short(e->data, exif_data_get_byte_order(ed));
      exif_data_unref(ed);
    }
  } else {
    png_image p;
    std::memset(&p, 0, sizeof p);
    p.version = PNG_IMAGE_VERSION;
    REQUIRE(png_image_begin_read_from_memory(&p, file.data(), file.size()));
    p.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
    const bool alpha = p.format & PNG_FORMAT_FLAG_ALPHA;
    p.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    img.width = int(p.width);
    img.height = int(p.height);
    Bytes buf(PNG_IMAGE_SIZE(p));
    REQUIRE(png_image_finish_read(&p, nullptr, buf.data(), 0, nullptr));
    for (size_t i = 0; i < size_t(img.width) * img.height; ++i)
      img.pixels.insert(img.pixels.end(), buf.begin() + long(i) * (alpha ? 4 : 3), buf.begin() + long(i) * (alpha ? 4 : 3) + 3);
  }
  VipsImage* v = vips_image_new_from_memory(img.pixels.data(), img.pixels.size(), img.width, img.height, 3,
                                            VIPS_FORMAT_UCHAR);
  REQUIRE(v != nullptr);
  if (orientation != 1) {  // only 3, 6 and 8 occur in the fixture
    REQUIRE((orientation == 3 || orientation == 6 || orientation == 8));
    VipsImage* r = nullptr;
    REQUIRE(vips_rot(v, &r, orientation == 3 ? VIPS_ANGLE_D180 : orientation == 6 ? VIPS_ANGLE_D90 : VIPS_ANGLE_D270,
                     nullptr) == 0);
    g_object_unref(v);
    v = r;
  }
  const int w = v->Xsize, h = v->Ysize, shorter = std::min(w, h);
  auto scale = [&](int side) { return int(std::lround(double(side) * S / shorter)); };
  const int tw = w <= h ? S : scale(w), th = w <= h ? scale(h) : S;
  VipsImage* r = nullptr;
  REQUIRE(vips_resize(v, &r, double(tw) / w, "vscale", double(th) / h, "kernel", VIPS_KERNEL_LANCZOS3, nullptr) == 0);
  g_object_unref(v);
  if (crop) {
    VipsImage* c = nullptr;
    REQUIRE(vips_extract_area(r, &c, (tw - S) / 2, (th - S) / 2, S, S, nullptr) == 0);
    g_object_unref(r);
    r = c;
  }
  RgbImage out = vips_out(r);
  g_object_unref(r);
  return out;
}

Bytes encode_jpeg_ref(const RgbImage& img, int quality) {
  tjhandle c = tjInitCompress();
  unsigned char* jb = nullptr;
  unsigned long n = 0;
  REQUIRE(tjCompress2(c, img.pixels.data(), img.width, 0, img.height, TJPF_RGB, &jb, &n, TJSAMP_420, quality, 0) == 0);
  Bytes b(jb, jb + n);
  tjFree(jb);
  tjDestroy(c);
  return b;
}

Bytes decode_rgb(const Bytes& jpeg) {
  tjhandle d = tjInitDecompress();
  int w = 0, h = 0, ss = 0, cs = 0;
  REQUIRE(tjDecompressHeader3(d, jpeg.data(), jpeg.size(), &w, &h, &ss, &cs) == 0);
  Bytes px(size_t(w) * h * 3);
  REQUIRE(tjDecompress2(d, jpeg.data(), jpeg.size(), px.data(), w, 0, h, TJPF_RGB, 0) == 0);
  tjDestroy(d);
  return px;
}

// ---- reading the outputs ---------------------------------------------------------

struct JpegStore {
  std::vector<uint8_t> jpeg;
  std::vector<uint64_t> offsets;
  std::vector<int32_t> shapes, labels;
  std::vector<std::string> class_names;
  int64_t classes = 0, size = 0, quality = 0;
  std::string layout;
};

template <typename T>
std::vector<T> read_all_rows(hid_t f, const char* name, hid_t mtype) {
  io::H5Id d(H5Dopen2(f, name, H5P_DEFAULT), H5Dclose);
  REQUIRE(d.valid());
  io::H5Id s(H5Dget_space(d.get()), H5Sclose);
  std::vector<T> v(size_t(H5Sget_simple_extent_npoints(s.get())));
  REQUIRE(H5Dread(d.get(), mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  return v;
}

JpegStore read_jpeg_store(const std::string& path) {
  io::H5Id f = io::open_h5_read_only(path);
  JpegStore s;
  s.jpeg = read_all_rows<uint8_t>(f.get(), "jpeg", H5T_NATIVE_UINT8);
  s.offsets = read_all_rows<uint64_t>(f.get(), "offsets", H5T_NATIVE_UINT64);
  s.shapes = read_all_rows<int32_t>(f.get(), "shapes", H5T_NATIVE_INT32);
  s.labels = read_all_rows<int32_t>(f.get(), "labels", H5T_NATIVE_INT32);
  s.class_names = io::read_string_list(f.get(), path, "class_names");
  s.classes = io::read_int_attribute(f.get(), path, "classes");
  s.size = io::read_int_attribute(f.get(), path, "size");
  s.quality = io::read_int_attribute(f.get(), path, "quality");
  s.layout = io::read_string_attribute(f.get(), path, "layout");
  return s;
}

std::vector<std::pair<std::string, std::string>> report_lines(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  std::vector<std::pair<std::string, std::string>> out;
  std::string line;
  while (std::getline(f, line)) {
    const auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

// The good files of the fixture in the converter's order (class tree: the
// sorted class folders, then the path; so simply the sorted paths).
std::vector<test::TreeFile> stored_order(std::vector<test::TreeFile> files) {
  std::erase_if(files, [](const test::TreeFile& f) { return f.bad; });
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

std::set<std::string> bad_paths(const std::vector<test::TreeFile>& files) {
  std::set<std::string> s;
  for (const auto& f : files)
    if (f.bad) s.insert(f.path);
  return s;
}

std::vector<std::string> sorted_class_names() {
  auto v = test::kClassNames;
  std::sort(v.begin(), v.end());
  return v;
}

// One fixture tree for every case of this file (written once, ~0.5 s).
const test::ImageTree& tree() {
  static TempDir dir;
  static const test::ImageTree t = test::write_image_tree((dir.path() / "tree").string(), settings::fashion_dir(), 12, 30);
  return t;
}

io::ImageFolderOptions options(const std::string& out, io::StoreLayout store, int size) {
  io::ImageFolderOptions o;
  o.root = tree().train_root;
  o.out = out;
  o.store = store;
  o.size = size;
  o.threads = 2;
  o.progress_seconds = 1e9;
  return o;
}

}  // namespace

TEST_CASE("imagefolder: raw store of a class tree equals a direct decode + resize + centre crop, pixel for pixel",
          "[imagefolder]") {
  TempDir tmp;
  const int S = 48;  // the 300x200 files are DCT-scaled by 1/4 (50 ≥ 48), the 37x53 ones upscaled
  auto s = io::convert_image_folder(options(tmp.file("train.h5"), io::StoreLayout::raw, S));
  const auto want = stored_order(tree().train);
  const auto bad = bad_paths(tree().train);
  CHECK(s.inputs == int64_t(tree().train.size()));
  CHECK(s.stored == int64_t(want.size()));
  CHECK(s.skipped == int64_t(bad.size()));
  CHECK(s.classes == 10);
  CHECK_THAT(s.describe(), Catch::Contains(std::to_string(bad.size()) + " skipped (listed in " + tmp.file("train.h5.skipped.txt")));

  io::Hdf5Dataset data(tmp.file("train.h5"));  // the raw layout of DESIGN.md §5, validated
  REQUIRE(data.n() == int64_t(want.size()));
  CHECK(data.height() == S);
  CHECK(data.width() == S);
  CHECK(data.channels() == 3);
  CHECK(data.classes() == 10);
  const auto names = io::read_class_names(tmp.file("train.h5"));
  CHECK(names == sorted_class_names());
  {
    io::H5Id f = io::open_h5_read_only(tmp.file("train.h5"));
    CHECK(io::read_string_attribute(f.get(), "train.h5", "layout") == "raw");
    CHECK(io::read_int_attribute(f.get(), "train.h5", "size") == S);
    CHECK_FALSE(io::has_attribute(f.get(), "progress"));
  }
  std::vector<uint8_t> px(size_t(data.sample_bytes()));
  std::map<std::string, int> kinds_seen;
  for (int64_t i = 0; i < data.n(); ++i) {
    const auto& file = want[size_t(i)];
    INFO("sample " << i << ": " << file.path << " (" << file.kind << ")");
    CHECK(names[size_t(data.labels()[size_t(i)])] == file.class_name);
    data.read_range(i, 1, px.data());
    const RgbImage ref = reference(read_all(fs::path(tree().train_root) / file.path), S, true);
    REQUIRE(ref.width == S);
    REQUIRE(ref.height == S);
    CHECK(std::memcmp(px.data(), ref.pixels.data(), px.size()) == 0);
    ++kinds_seen[file.kind];
  }
  for (const char* k : {"gray jpeg", "cmyk jpeg", "16-bit png", "palette png", "rgba png", "exif 6 jpeg", "exif 3 jpeg",
                        "exif 8 jpeg", "png named JPEG", "jpeg 300x200", "jpeg 37x53", "png 53x37"})
    CHECK(kinds_seen[k] >= 1);

  // The bad files: listed with a reason, each once, and nothing else.
  const auto lines = report_lines(tmp.file("train.h5.skipped.txt"));
  std::set<std::string> listed;
  for (const auto& [path, reason] : lines) {
    INFO(path << ": " << reason);
    CHECK_FALSE(reason.empty());
    listed.insert(path);
  }
  CHECK(listed == bad);
  CHECK(lines.size() == bad.size());
  std::map<std::string, std::string> why(lines.begin(), lines.end());
  CHECK_THAT(why["tshirt_top/truncated.png"], Catch::Contains("PNG"));
  CHECK_THAT(why["trouser/notes.JPEG"], Catch::Contains("not a JPEG or PNG"));
  CHECK_THAT(why["pullover/empty.JPEG"], Catch::Contains("empty"));
  CHECK_THAT(why["ankle_boot/truncated.JPEG"], Catch::Contains("Premature end of JPEG file"));
  // No partial files are left.
  for (const auto& e : fs::directory_iterator(tmp.path()))
    CHECK(e.path().filename().string().find(".partial") == std::string::npos);
}

TEST_CASE("imagefolder: the raw store does not depend on the number of threads", "[imagefolder]") {
  TempDir tmp;
  auto o = options(tmp.file("t1.h5"), io::StoreLayout::raw, 24);  // DCT scale 1/8 for the 300x200 files
  o.threads = 1;
  io::convert_image_folder(o);
  o.out = tmp.file("t3.h5");
  o.threads = 3;
  o.checkpoint_every = 7;
  io::convert_image_folder(o);
  io::Hdf5Dataset a(tmp.file("t1.h5")), b(tmp.file("t3.h5"));
  REQUIRE(a.n() == b.n());
  std::vector<uint8_t> pa(size_t(a.n() * a.sample_bytes())), pb(pa.size());
  a.read_range(0, a.n(), pa.data());
  b.read_range(0, b.n(), pb.data());
  CHECK(pa == pb);
  CHECK(a.labels() == b.labels());
  CHECK(read_all(tmp.file("t1.h5.skipped.txt")) == read_all(tmp.file("t3.h5.skipped.txt")));
}

TEST_CASE("imagefolder: jpeg store keeps the aspect ratio and decodes to the resized image within JPEG tolerance",
          "[imagefolder]") {
  TempDir tmp;
  const int S = 40, Q = 90;
  auto o = options(tmp.file("train-jpeg.h5"), io::StoreLayout::jpeg, S);
  o.quality = Q;
  auto s = io::convert_image_folder(o);
  const auto want = stored_order(tree().train);
  REQUIRE(s.stored == int64_t(want.size()));
  const JpegStore st = read_jpeg_store(tmp.file("train-jpeg.h5"));
  CHECK(st.layout == "jpeg");
  CHECK(st.size == S);
  CHECK(st.quality == Q);
  CHECK(st.classes == 10);
  CHECK(st.class_names == sorted_class_names());
  REQUIRE(st.labels.size() == want.size());
  REQUIRE(st.offsets.size() == want.size() + 1);
  REQUIRE(st.shapes.size() == 3 * want.size());
  CHECK(st.offsets.front() == 0);
  CHECK(st.offsets.back() == st.jpeg.size());
  double worst_psnr = 1e9, sum_abs = 0, values = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& file = want[i];
    INFO("sample " << i << ": " << file.path << " (" << file.kind << ")");
    CHECK(st.class_names[size_t(st.labels[i])] == file.class_name);
    REQUIRE(st.offsets[i] < st.offsets[i + 1]);
    const std::span<const uint8_t> bytes(st.jpeg.data() + st.offsets[i], st.offsets[i + 1] - st.offsets[i]);
    const RgbImage got = io::decode_jpeg_rgb(bytes);
    const RgbImage ref = reference(read_all(fs::path(tree().train_root) / file.path), S, false);
    CHECK(std::min(ref.width, ref.height) == S);
    REQUIRE(got.height == ref.height);
    REQUIRE(got.width == ref.width);
    CHECK(st.shapes[3 * i] == got.height);
    CHECK(st.shapes[3 * i + 1] == got.width);
    CHECK(st.shapes[3 * i + 2] == 3);
    double se = 0;
    for (size_t k = 0; k < got.pixels.size(); ++k) {
      const double d = double(got.pixels[k]) - double(ref.pixels[k]);
      se += d * d;
      sum_abs += std::abs(d);
    }
    values += double(got.pixels.size());
    const double psnr = 10 * std::log10(255.0 * 255.0 / std::max(1e-9, se / double(got.pixels.size())));
    worst_psnr = std::min(worst_psnr, psnr);
    CHECK(psnr > 20.0);  // JPEG quality 90, 4:2:0, on small images with sharp, saturated edges
    // Exact: the stored JPEG is TurboJPEG's encoding of the reference at Q, 4:2:0.
    CHECK(got.pixels == decode_rgb(encode_jpeg_ref(ref, Q)));
  }
  const double mean_abs = sum_abs / values;
  WARN("jpeg store, S " << S << ", Q " << Q << ": worst PSNR " << worst_psnr << " dB, mean |error| " << mean_abs);
  CHECK(mean_abs < 8.0);
  CHECK(report_lines(tmp.file("train-jpeg.h5.skipped.txt")).size() == bad_paths(tree().train).size());
}

TEST_CASE("imagefolder: a flat validation folder with a labels file takes the train file's class indices",
          "[imagefolder]") {
  TempDir tmp;
  auto train = options(tmp.file("train.h5"), io::StoreLayout::raw, 16);
  io::convert_image_folder(train);
  std::vector<test::TreeFile> want = tree().val;
  std::erase_if(want, [](const auto& f) { return f.bad; });
  std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  const auto names = sorted_class_names();
  for (const std::string& labels : {tree().val_labels, tree().val_index}) {
    for (const bool table : {true, false}) {
      INFO("labels " << labels << ", class table " << table);
      const std::string out = tmp.file(fs::path(labels).stem().string() + (table ? "-t" : "") + ".h5");
      auto o = options(out, io::StoreLayout::raw, 16);
      o.root = tree().val_root;
      o.labels = labels;
      if (table) o.class_table = tmp.file("train.h5");
      auto s = io::convert_image_folder(o);
      CHECK(s.skipped == 1);
      io::Hdf5Dataset data(out);
      REQUIRE(data.n() == int64_t(want.size()));
      const auto stored_names = io::read_class_names(out);
      if (table || labels == tree().val_labels) CHECK(stored_names == names);  // all 10 classes occur in val
      std::vector<uint8_t> px(size_t(data.sample_bytes()));
      for (size_t i = 0; i < want.size(); ++i) {
        INFO(want[i].path);
        CHECK(names[size_t(data.labels()[i])] == want[i].class_name);
        data.read_range(int64_t(i), 1, px.data());
        const RgbImage ref = reference(read_all(fs::path(tree().val_root) / want[i].path), 16, true);
        CHECK(px == ref.pixels);
      }
      const auto lines = report_lines(out + ".skipped.txt");
      REQUIRE(lines.size() == 1);
      CHECK(lines[0].first == tree().val.back().path);
    }
  }
}

TEST_CASE("imagefolder: bad trees, labels files and class tables are usage errors before anything is written",
          "[imagefolder]") {
  TempDir tmp;
  const std::string out = tmp.file("x.h5");
  auto o = options(out, io::StoreLayout::raw, 16);
  auto no_outputs = [&] {
    for (const auto& e : fs::directory_iterator(tmp.path()))
      CHECK(e.path().filename().string().rfind("x.h5", 0) != 0);
  };
  auto err = [&](io::ImageFolderOptions opt) {
    std::string msg = test::usage_error_message([&] { io::convert_image_folder(opt); });
    no_outputs();
    return msg;
  };

  fs::create_directories(tmp.path() / "empty");
  o.root = tmp.file("empty");
  CHECK_THAT(err(o), Catch::Contains(tmp.file("empty")) && Catch::Contains("no class subfolders"));
  fs::create_directories(tmp.path() / "hollow" / "n01440764");
  o.root = tmp.file("hollow");
  CHECK_THAT(err(o), Catch::Contains(tmp.file("hollow")) && Catch::Contains("no images"));
  o.root = tmp.file("missing");
  CHECK_THAT(err(o), Catch::Contains("missing") && Catch::Contains("no such folder"));

  // A labels file that names a missing file, a class the table lacks, a bad line.
  o.root = tree().val_root;
  {
    std::ofstream f(tmp.file("labels.txt"));
    f << "ILSVRC2012_val_00000001.JPEG tshirt_top\nILSVRC2012_val_99999999.JPEG trouser\n";
  }
  o.labels = tmp.file("labels.txt");
  CHECK_THAT(err(o), Catch::Contains("labels.txt:2") && Catch::Contains("ILSVRC2012_val_99999999.JPEG") &&
                         Catch::Contains("does not exist"));
  auto train = options(tmp.file("table.h5"), io::StoreLayout::raw, 8);
  io::convert_image_folder(train);
  {
    std::ofstream f(tmp.file("labels.txt"));
    f << "ILSVRC2012_val_00000001.JPEG n99999999\n";
  }
  o.class_table = tmp.file("table.h5");
  CHECK_THAT(err(o), Catch::Contains("labels.txt:1") && Catch::Contains("'n99999999' is not in the class table"));
  {
    std::ofstream f(tmp.file("labels.txt"));
    f << "ILSVRC2012_val_00000001.JPEG 10\n";
  }
  CHECK_THAT(err(o), Catch::Contains("class index 10 is outside [0, 10)"));
  {
    std::ofstream f(tmp.file("labels.txt"));
    f << "ILSVRC2012_val_00000001.JPEG\n";
  }
  CHECK_THAT(err(o), Catch::Contains("labels.txt:1") && Catch::Contains("expected 'NAME CLASS'"));
  o.labels = tmp.file("nolabels.txt");
  CHECK_THAT(err(o), Catch::Contains("nolabels.txt") && Catch::Contains("no such file"));

  // A class table without /class_names; a tree folder the table lacks.
  o.labels.clear();
  o.root = tree().train_root;
  io::write_dataset(tmp.file("plain.h5"), std::vector<uint8_t>(4), 1, 2, 2, 1, std::vector<int32_t>{0}, 1);
  o.class_table = tmp.file("plain.h5");
  CHECK_THAT(err(o), Catch::Contains("plain.h5: /class_names"));
  fs::create_directories(tmp.path() / "extra" / "zebra");
  fs::copy_file(fs::path(tree().train_root) / tree().train.front().path, tmp.path() / "extra" / "zebra" / "a.img");
  o.root = tmp.file("extra");
  o.class_table = tmp.file("table.h5");
  CHECK_THAT(err(o), Catch::Contains("class folder 'zebra' is not in the class table"));

  // Options.
  o = options(out, io::StoreLayout::jpeg, 0);
  CHECK_THAT(err(o), Catch::Contains("option 'size'"));
  o.size = 8;
  o.quality = 101;
  CHECK_THAT(err(o), Catch::Contains("option 'quality'"));
}

TEST_CASE("imagefolder: a tree whose every file is bad is a usage error naming the report", "[imagefolder]") {
  TempDir tmp;
  fs::create_directories(tmp.path() / "bad" / "a");
  std::ofstream(tmp.file("bad/a/x.JPEG")) << "text";
  auto o = options(tmp.file("x.h5"), io::StoreLayout::jpeg, 8);
  o.root = tmp.file("bad");
  CHECK_THAT(test::usage_error_message([&] { io::convert_image_folder(o); }),
             Catch::Contains("none of the 1 files could be decoded") && Catch::Contains("x.h5.skipped.txt"));
  CHECK_FALSE(fs::exists(tmp.file("x.h5")));
  CHECK_FALSE(fs::exists(tmp.file("x.h5.partial")));
  CHECK(report_lines(tmp.file("x.h5.skipped.txt")).size() == 1);
}

TEST_CASE("imagefolder: DCT scaling and the resize rule", "[imagefolder]") {
  CHECK(io::jpeg_scale_denominator(300, 200, 48) == 4);   // 200/4 = 50 ≥ 48, 200/8 = 25 < 48
  CHECK(io::jpeg_scale_denominator(300, 200, 100) == 2);  // exactly 100
  CHECK(io::jpeg_scale_denominator(300, 200, 101) == 1);
  CHECK(io::jpeg_scale_denominator(4000, 3000, 256) == 8);
  CHECK(io::jpeg_scale_denominator(37, 53, 48) == 1);
  CHECK(io::jpeg_scale_denominator(301, 201, 51) == 4);   // ceil(201/4) = 51, ceil(201/8) = 26
  int w = 0, h = 0;
  io::shorter_side_size(300, 200, 48, w, h);
  CHECK((w == 72 && h == 48));
  io::shorter_side_size(37, 53, 48, w, h);
  CHECK((w == 48 && h == 69));  // 53·48/37 = 68.76
}

TEST_CASE("imagefolder: a labels file gives every class as an index or every class as a name", "[imagefolder]") {
  TempDir tmp;
  auto o = options(tmp.file("v.h5"), io::StoreLayout::raw, 8);
  o.root = tree().val_root;
  o.labels = tmp.file("labels.txt");
  // One typo ("1O") among indices turned every index into a name (sorted as text: 10 before 2).
  std::ofstream(o.labels) << "ILSVRC2012_val_00000001.JPEG 0\nILSVRC2012_val_00000002.JPEG 2\n"
                             "ILSVRC2012_val_00000003.JPEG 1O\n";
  CHECK_THAT(test::usage_error_message([&] { io::list_images(o); }),
             Catch::Contains("labels.txt:3") && Catch::Contains("'1O' is not a 0-based index") &&
                 Catch::Contains("line 1"));
  // A class table whose names are digits in another order: "2" is index 2 and the name of class 1.
  fs::create_directories(tmp.path() / "digits");
  for (const char* c : {"10", "2", "3"}) {
    fs::create_directories(tmp.path() / "digits" / c);
    fs::copy_file(fs::path(tree().train_root) / tree().train.front().path, tmp.path() / "digits" / c / "a.img");
  }
  auto t = options(tmp.file("digits.h5"), io::StoreLayout::raw, 8);
  t.root = tmp.file("digits");
  io::convert_image_folder(t);
  o.class_table = tmp.file("digits.h5");
  std::ofstream(o.labels) << "ILSVRC2012_val_00000001.JPEG 2\n";
  CHECK_THAT(test::usage_error_message([&] { io::list_images(o); }),
             Catch::Contains("labels.txt:1") && Catch::Contains("'2' is ambiguous") &&
                 Catch::Contains("the class table's '3'") && Catch::Contains("name of another class, 1"));
  // Zero-padded digit names in index order (GTSRB's 00000 … 00042): the same class both ways, not ambiguous;
  // a table holding '2' and 'cat': a file naming both reads as names.
  auto table_file = [&](const std::string& file, const std::vector<std::string>& names) {
    io::H5Id f(H5Fcreate(tmp.file(file).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    REQUIRE(f.valid());
    io::write_string_list(f.get(), "class_names", names);
    return tmp.file(file);
  };
  std::vector<std::string> padded;
  for (int k = 0; k < 43; ++k) padded.push_back((k < 10 ? "0000" : "000") + std::to_string(k));
  o.class_table = table_file("padded.h5", padded);
  std::ofstream(o.labels) << "ILSVRC2012_val_00000001.JPEG 00016\n";
  CHECK(io::list_images(o).labels == std::vector<int32_t>{16});
  o.class_table = table_file("mixed.h5", {"10", "2", "cat"});
  std::ofstream(o.labels) << "ILSVRC2012_val_00000001.JPEG 2\nILSVRC2012_val_00000002.JPEG cat\n";
  CHECK(io::list_images(o).labels == std::vector<int32_t>{1, 2});
  // Indices that agree with the names (a table "0".."9" written from indices) are fine.
  o.class_table.clear();
  std::ofstream(o.labels) << "ILSVRC2012_val_00000001.JPEG 0\nILSVRC2012_val_00000002.JPEG 3\n";
  const auto list = io::list_images(o);
  CHECK(list.labels == std::vector<int32_t>{0, 3});
  CHECK(list.empty_classes == std::vector<std::string>{"1", "2"});  // warned about, not refused
  // NAME,CLASS: the name may hold spaces (it was cut at the first space); NAME CLASS with a comma in NAME.
  fs::create_directories(tmp.path() / "flat");
  fs::copy_file(fs::path(tree().train_root) / tree().train.front().path, tmp.path() / "flat" / "with space.jpg");
  fs::copy_file(fs::path(tree().train_root) / tree().train.front().path, tmp.path() / "flat" / "a,b.jpg");
  o.root = tmp.file("flat");
  std::ofstream(o.labels) << "with space.jpg,cat\na,b.jpg dog\n";
  const auto flat = io::list_images(o);
  CHECK(flat.files == std::vector<std::string>{"a,b.jpg", "with space.jpg"});
  CHECK(flat.labels == std::vector<int32_t>{1, 0});
  // "a b,c" reads both ways: the reading whose NAME is a file wins (NAME CLASS with a comma in CLASS).
  fs::copy_file(fs::path(tree().train_root) / tree().train.front().path, tmp.path() / "flat" / "img.jpg");
  std::ofstream(o.labels) << "img.jpg a,b\n";
  const auto comma_class = io::list_images(o);
  CHECK(comma_class.files == std::vector<std::string>{"img.jpg"});
  CHECK(comma_class.class_names == std::vector<std::string>{"a,b"});
}

TEST_CASE("imagefolder: root entries that loop or lead back and empty classes and broken links are listed and not followed",
          "[imagefolder]") {
  TempDir tmp;
  const fs::path r = tmp.path() / "r";
  fs::create_directories(r / "cat");
  fs::create_directories(r / "dog");
  fs::copy_file(fs::path(tree().train_root) / tree().train.front().path, r / "cat" / "a.img");
  fs::create_symlink("l2", r / "l1");
  fs::create_symlink("l1", r / "l2");
  fs::create_directory_symlink(".", r / "self");
  fs::create_symlink("nowhere", r / "cat" / "dangling.jpg");
  auto o = options(tmp.file("x.h5"), io::StoreLayout::raw, 8);
  o.root = r.string();
  const auto list = io::list_images(o);
  CHECK(list.class_names == std::vector<std::string>{"cat", "dog"});
  CHECK(list.files == std::vector<std::string>{"cat/a.img"});
  CHECK(list.ignored == std::vector<std::string>{"l1", "l2", "self"});
  CHECK(list.empty_classes == std::vector<std::string>{"dog"});
  CHECK(list.not_files == std::vector<std::string>{"cat/dangling.jpg"});
  // F inside a class folder: its partial files would become inputs of a resumed run.
  o.out = (r / "cat" / "x.h5").string();
  CHECK_THAT(test::usage_error_message([&] { io::convert_image_folder(o); }),
             Catch::Contains("inside the class folder 'cat'"));
  CHECK_FALSE(fs::exists(r / "cat" / "x.h5.partial"));
  // A class folder whose name is not UTF-8 (Latin-1 "caf\xe9"): /class_names is UTF-8 text.
  fs::create_directories(r / "caf\xe9");
  o.out = tmp.file("x.h5");
  CHECK_THAT(test::usage_error_message([&] { io::list_images(o); }),
             Catch::Contains("class name 'caf\\xe9' is not valid UTF-8"));
}

TEST_CASE("imagefolder: a stopped end whose F was damaged since is a usage error naming F", "[imagefolder]") {
  // finish_file met a `progress` attribute of the wrong length with an internal
  // check (a source location, exit 1); the file is the user's to remove.
  TempDir tmp;
  const std::string out = tmp.file("raw.h5");
  auto o = options(out, io::StoreLayout::raw, 12);
  io::convert_image_folder(o);
  fs::rename(out + ".skipped.txt", out + ".skipped.txt.partial");
  {
    io::H5Id fapl = io::make_fapl_no_locking();
    io::H5Id f(H5Fopen(out.c_str(), H5F_ACC_RDWR, fapl.get()), H5Fclose);
    REQUIRE(f.valid());
    io::write_ints_attribute(f.get(), "progress", {7});
  }
  CHECK_THAT(test::usage_error_message([&] { io::convert_image_folder(o); }),
             Catch::Contains(out + ": attribute 'progress' is damaged (1 values); remove the file"));
}

TEST_CASE("imagefolder: a run stopped after F took its name is finished by the same command", "[imagefolder]") {
  TempDir tmp;
  for (auto store : {io::StoreLayout::raw, io::StoreLayout::jpeg}) {
    const std::string out = tmp.file(store == io::StoreLayout::raw ? "raw.h5" : "jpeg.h5");
    auto o = options(out, store, 12);
    io::convert_image_folder(o);
    const auto lines = report_lines(out + ".skipped.txt");
    const auto labels = [&] {
      auto f = io::open_h5_read_only(out);
      return read_all_rows<int32_t>(f.get(), "labels", H5T_NATIVE_INT32);
    }();
    // The state of a stop between the rename of F and the end: the report not
    // renamed; raw: `progress` still in F; jpeg: a stale temporary of the copy.
    fs::rename(out + ".skipped.txt", out + ".skipped.txt.partial");
    if (store == io::StoreLayout::raw) {
      {
        io::H5Id fapl = io::make_fapl_no_locking();
        io::H5Id f(H5Fopen(out.c_str(), H5F_ACC_RDWR, fapl.get()), H5Fclose);
        REQUIRE(f.valid());
        io::write_ints_attribute(f.get(), "progress", {0, int64_t(labels.size()), 0, 0});
        // Not yet shrunk: all M rows (the skipped inputs' rows at the end, zeros).
        for (const char* name : {"images", "labels"}) {
          io::H5Id d(H5Dopen2(f.get(), name, H5P_DEFAULT), H5Dclose);
          io::H5Id space(H5Dget_space(d.get()), H5Sclose);
          hsize_t dims[4] = {0, 0, 0, 0};
          H5Sget_simple_extent_dims(space.get(), dims, nullptr);
          dims[0] = hsize_t(labels.size() + lines.size());
          REQUIRE(H5Dset_extent(d.get(), dims) >= 0);
        }
      }
      CHECK_THAT(test::usage_error_message([&] { io::Hdf5Dataset d(out); }),
                 Catch::Contains("an unfinished dtrain data imagefolder conversion"));
    } else {
      std::ofstream(out + ".tmp.12345") << "stale";
    }
    const auto s = io::convert_image_folder(o);
    CHECK(s.stored == int64_t(labels.size()));
    CHECK(s.skipped == int64_t(lines.size()));
    CHECK(report_lines(out + ".skipped.txt") == lines);
    CHECK_FALSE(fs::exists(out + ".skipped.txt.partial"));
    CHECK_FALSE(fs::exists(out + ".tmp.12345"));
    auto f = io::open_h5_read_only(out);
    CHECK_FALSE(io::has_attribute(f.get(), "progress"));
    CHECK(read_all_rows<int32_t>(f.get(), "labels", H5T_NATIVE_INT32) == labels);
    if (store == io::StoreLayout::raw) CHECK_NOTHROW(io::Hdf5Dataset(out));
  }
  // Another conversion's F next to a report in progress is not taken for this one's.
  const std::string out = tmp.file("raw.h5");
  fs::rename(out + ".skipped.txt", out + ".skipped.txt.partial");
  auto other = options(out, io::StoreLayout::raw, 10);
  CHECK_THAT(test::usage_error_message([&] { io::convert_image_folder(other); }),
             Catch::Contains(out) && Catch::Contains("exists"));
}

TEST_CASE("imagefolder: --overwrite with every input bad leaves no F from before and report fields are escaped",
          "[imagefolder]") {
  TempDir tmp;
  const std::string out = tmp.file("x.h5");
  auto o = options(out, io::StoreLayout::jpeg, 8);
  io::convert_image_folder(o);
  REQUIRE(fs::exists(out));
  fs::create_directories(tmp.path() / "bad" / "a");
  std::ofstream(tmp.file("bad/a/tab\there.JPEG")) << "text";
  std::ofstream(tmp.file("bad/a/back\\slash.JPEG")) << "text";
  o.root = tmp.file("bad");
  o.overwrite = true;
  CHECK_THAT(test::usage_error_message([&] { io::convert_image_folder(o); }),
             Catch::Contains("none of the 2 files could be decoded") && Catch::Contains("earlier file") &&
                 Catch::Contains("removed"));
  CHECK_FALSE(fs::exists(out));  // the report describes this run, not the earlier F
  const auto lines = report_lines(out + ".skipped.txt");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].first == "a/back\\\\slash.JPEG");
  CHECK(lines[1].first == "a/tab\\there.JPEG");
}
