// tests/image_tree.cpp — the Fashion-MNIST image tree fixture (see image_tree.hpp).
#include "tests/image_tree.hpp"

#include <libexif/exif-data.h>
#include <png.h>
#include <turbojpeg.h>
#include <vips/vips.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "io/idx.hpp"
#include "io/image_codec.hpp"

namespace dtrain::test {

namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("image_tree: " + what); }

void write_bytes(const fs::path& p, const Bytes& b) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  if (!f) fail("cannot write " + p.string());
}

// 28×28 gray → tinted RGB [28, 28, 3].
io::RgbImage tint(const uint8_t* gray, int cls) {
  io::RgbImage img;
  img.width = img.height = 28;
  img.pixels.resize(28 * 28 * 3);
  for (int i = 0; i < 28 * 28; ++i) {
    const int v = gray[i];
    img.pixels[3 * i] = uint8_t(v);
    img.pixels[3 * i + 1] = uint8_t(v / 2 + 20 * (cls % 5));
    img.pixels[3 * i + 2] = uint8_t(255 - v);
  }
  return img;
}

// vips_resize to exactly w×h (any aspect), 1 or 3 bands.
Bytes upscale(const Bytes& src, int sw, int sh, int bands, int w, int h) {
  VipsImage* in = vips_image_new_from_memory(src.data(), src.size(), sw, sh, bands, VIPS_FORMAT_UCHAR);
  VipsImage* out = nullptr;
  if (!in || vips_resize(in, &out, double(w) / sw, "vscale", double(h) / sh, nullptr) != 0)
    fail(std::string("vips_resize: ") + vips_error_buffer());
  size_t n = 0;
  void* mem = vips_image_write_to_memory(out, &n);
  Bytes b(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + n);
  g_free(mem);
  g_object_unref(out);
  g_object_unref(in);
  if (out == nullptr || b.size() != size_t(w) * size_t(h) * size_t(bands)) fail("vips_resize: size");
  return b;
}

Bytes jpeg_of(const Bytes& px, int w, int h, int pf, int subsamp) {
  tjhandle c = tjInitCompress();
  unsigned char* jb = nullptr;
  unsigned long n = 0;
  if (tjCompress2(c, px.data(), w, 0, h, pf, &jb, &n, subsamp, 92, 0) != 0) fail(tjGetErrorStr2(c));
  Bytes b(jb, jb + n);
  tjFree(jb);
  tjDestroy(c);
  return b;
}

Bytes png_of(const Bytes& px, int w, int h, png_uint_32 format, const Bytes* colormap = nullptr) {
  png_image im;
  std::memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = png_uint_32(w);
  im.height = png_uint_32(h);
  im.format = format;
  if (colormap) im.colormap_entries = png_uint_32(colormap->size() / 3);
  png_alloc_size_t n = 0;
  const void* cm = colormap ? colormap->data() : nullptr;
  if (!png_image_write_to_memory(&im, nullptr, &n, 0, px.data(), 0, cm)) fail(im.message);
  Bytes b(n);
  if (!png_image_write_to_memory(&im, b.data(), &n, 0, px.data(), 0, cm)) fail(im.message);
  b.resize(n);
  return b;
}

// A JPEG with an EXIF APP1 segment holding `orientation`, right after SOI.
Bytes with_orientation(const Bytes& jpeg, int orientation) {
  ExifData* ed = exif_data_new();
  exif_data_set_byte_order(ed, EXIF_BYTE_ORDER_INTEL);
  ExifEntry* e = exif_entry_new();
  exif_content_add_entry(ed->ifd[EXIF_IFD_0], e);
  exif_entry_initialize(e, EXIF_TAG_ORIENTATION);
  exif_set_short(e->data, EXIF_BYTE_ORDER_INTEL, ExifShort(orientation));
  exif_entry_unref(e);
  unsigned char* d = nullptr;
  unsigned int n = 0;
  exif_data_save_data(ed, &d, &n);  // "Exif\0\0" + TIFF
  exif_data_unref(ed);
  Bytes app1 = {0xFF, 0xE1, uint8_t((n + 2) >> 8), uint8_t((n + 2) & 0xFF)};
  app1.insert(app1.end(), d, d + n);
  free(d);
  Bytes out(jpeg.size() + app1.size());  // SOI, APP1, the rest
  std::copy(jpeg.begin(), jpeg.begin() + 2, out.begin());
  std::copy(app1.begin(), app1.end(), out.begin() + 2);
  std::copy(jpeg.begin() + 2, jpeg.end(), out.begin() + 2 + long(app1.size()));
  return out;
}

struct Source {
  io::IdxImages images;
  std::vector<uint8_t> labels;
  std::vector<size_t> next;  // per class: the next unused image
  explicit Source(const std::string& dir)
      : images(io::read_idx_images(dir + "/t10k-images-idx3-ubyte.gz")),
        labels(io::read_idx_labels(dir + "/t10k-labels-idx1-ubyte.gz")),
        next(10, 0) {}
  const uint8_t* take(int cls) {  // the next image of class cls
    for (size_t& i = next[size_t(cls)]; i < labels.size(); ++i)
      if (labels[i] == cls) return images.pixels.data() + 28 * 28 * i++;
    fail("out of Fashion-MNIST images of class " + std::to_string(cls));
  }
};

// One image file of class cls in `kind` (the ordinary kinds cycle with j).
Bytes make_image(Source& src, int cls, const std::string& kind) {
  const uint8_t* gray = src.take(cls);
  const io::RgbImage rgb = tint(gray, cls);
  auto sized = [&](int w, int h) { return upscale(rgb.pixels, 28, 28, 3, w, h); };
  if (kind == "jpeg 300x200") return jpeg_of(sized(300, 200), 300, 200, TJPF_RGB, TJSAMP_420);
  if (kind == "jpeg 200x300") return jpeg_of(sized(200, 300), 200, 300, TJPF_RGB, TJSAMP_444);
  if (kind == "jpeg 37x53") return jpeg_of(sized(37, 53), 37, 53, TJPF_RGB, TJSAMP_420);
  if (kind == "png 53x37") return png_of(sized(53, 37), 53, 37, PNG_FORMAT_RGB);
  if (kind == "png 300x200") return png_of(sized(300, 200), 300, 200, PNG_FORMAT_RGB);
  if (kind == "gray jpeg") {
    Bytes g(gray, gray + 28 * 28);
    return jpeg_of(upscale(g, 28, 28, 1, 300, 200), 300, 200, TJPF_GRAY, TJSAMP_GRAY);
  }
  if (kind == "cmyk jpeg") {  // libjpeg-turbo's rgb_to_cmyk (its cmyk.h), then a YCCK JPEG
    Bytes p = sized(300, 200), cmyk(size_t(300) * 200 * 4);
    for (size_t i = 0; i < size_t(300) * 200; ++i) {
      double c = 1 - p[3 * i] / 255.0, m = 1 - p[3 * i + 1] / 255.0, y = 1 - p[3 * i + 2] / 255.0;
      const double k = std::min({c, m, y});
      if (k == 1.0) c = m = y = 0;
      else c = (c - k) / (1 - k), m = (m - k) / (1 - k), y = (y - k) / (1 - k);
      cmyk[4 * i] = uint8_t(255 - c * 255 + 0.5);
      cmyk[4 * i + 1] = uint8_t(255 - m * 255 + 0.5);
      cmyk[4 * i + 2] = uint8_t(255 - y * 255 + 0.5);
      cmyk[4 * i + 3] = uint8_t(255 - k * 255 + 0.5);
    }
    return jpeg_of(cmyk, 300, 200, TJPF_CMYK, TJSAMP_420);
  }
  if (kind == "16-bit png") {  // sRGB-encoded 16-bit samples, no gAMA chunk (libvips' pngsave)
    Bytes p = sized(53, 37);
    std::vector<uint16_t> p16(p.size());
    for (size_t i = 0; i < p.size(); ++i) p16[i] = uint16_t(std::min<size_t>(65535, p[i] * 257u + (i % 7) * 20));
    VipsImage* in = vips_image_new_from_memory(p16.data(), p16.size() * 2, 53, 37, 3, VIPS_FORMAT_USHORT);
    void* buf = nullptr;
    size_t n = 0;
    if (!in || vips_pngsave_buffer(in, &buf, &n, "bitdepth", 16, nullptr) != 0)
      fail(std::string("vips_pngsave_buffer: ") + vips_error_buffer());
    Bytes b(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + n);
    g_free(buf);
    g_object_unref(in);
    return b;
  }
  if (kind == "palette png") {  // the gray value is the index; the colormap is the tint
    Bytes idx = upscale(Bytes(gray, gray + 28 * 28), 28, 28, 1, 300, 200), cmap(256 * 3);
    for (int v = 0; v < 256; ++v) {
      cmap[3 * v] = uint8_t(v);
      cmap[3 * v + 1] = uint8_t(v / 2 + 20 * (cls % 5));
      cmap[3 * v + 2] = uint8_t(255 - v);
    }
    return png_of(idx, 300, 200, PNG_FORMAT_RGB_COLORMAP, &cmap);
  }
  if (kind == "rgba png") {
    Bytes p = sized(53, 37), rgba;
    for (size_t i = 0; i < p.size() / 3; ++i) rgba.insert(rgba.end(), {p[3 * i], p[3 * i + 1], p[3 * i + 2], uint8_t(i * 5)});
    return png_of(rgba, 53, 37, PNG_FORMAT_RGBA);
  }
  if (kind == "exif 6 jpeg") return with_orientation(jpeg_of(sized(200, 300), 200, 300, TJPF_RGB, TJSAMP_420), 6);
  if (kind == "exif 3 jpeg") return with_orientation(jpeg_of(sized(300, 200), 300, 200, TJPF_RGB, TJSAMP_420), 3);
  if (kind == "exif 8 jpeg") return with_orientation(jpeg_of(sized(53, 37), 53, 37, TJPF_RGB, TJSAMP_420), 8);
  if (kind == "png named JPEG") return png_of(sized(300, 200), 300, 200, PNG_FORMAT_RGB);
  if (kind == "truncated jpeg") {
    Bytes b = jpeg_of(sized(300, 200), 300, 200, TJPF_RGB, TJSAMP_420);
    b.resize(b.size() * 3 / 5);
    return b;
  }
  if (kind == "truncated png") {
    Bytes b = png_of(sized(300, 200), 300, 200, PNG_FORMAT_RGB);
    b.resize(b.size() / 2);
    return b;
  }
  if (kind == "text named JPEG") {
    const std::string t = "this is not an image\n";
    return Bytes(t.begin(), t.end());
  }
  if (kind == "empty JPEG") return {};
  fail("unknown kind " + kind);
}

const std::vector<std::string> kOrdinary = {"jpeg 300x200", "png 53x37", "jpeg 37x53", "png 300x200", "jpeg 200x300"};

// Odd and bad files: (kind, class index, file name).
struct Special {
  const char* kind;
  int cls;
  const char* name;
  bool bad;
};
const Special kSpecials[] = {
    {"gray jpeg", 0, "gray.JPEG", false},          {"cmyk jpeg", 1, "cmyk.JPEG", false},
    {"16-bit png", 2, "deep.png", false},          {"palette png", 3, "palette.png", false},
    {"rgba png", 4, "rgba.png", false},            {"exif 6 jpeg", 5, "rot6.JPEG", false},
    {"exif 3 jpeg", 6, "rot3.JPEG", false},        {"exif 8 jpeg", 7, "rot8.JPEG", false},
    {"png named JPEG", 8, "n02105855_2933.JPEG", false},
    {"truncated jpeg", 9, "truncated.JPEG", true}, {"truncated png", 0, "truncated.png", true},
    {"text named JPEG", 1, "notes.JPEG", true},    {"empty JPEG", 2, "empty.JPEG", true},
};

}  // namespace

ImageTree write_image_tree(const std::string& dir, const std::string& fashion_dir, int per_class, int val,
                           const std::string& only_kind) {
  io::init_vips();
  Source src(fashion_dir);
  ImageTree t;
  const fs::path root(dir);
  t.train_root = (root / "train").string();
  t.val_root = (root / "val").string();
  t.val_labels = (root / "val_labels.txt").string();
  t.val_index = (root / "val_index.txt").string();
  fs::create_directories(t.train_root);
  fs::create_directories(t.val_root);
  for (int cls = 0; cls < 10; ++cls)
    for (int j = 0; j < per_class; ++j) {
      const std::string& kind = only_kind.empty() ? kOrdinary[size_t((cls + j) % int(kOrdinary.size()))] : only_kind;
      char name[64];
      std::snprintf(name, sizeof name, "img_%02d_%03d.%s", cls, j, kind.rfind("png", 0) == 0 ? "png" : "JPEG");
      const std::string rel = kClassNames[size_t(cls)] + "/" + name;
      write_bytes(root / "train" / rel, make_image(src, cls, kind));
      t.train.push_back({rel, kClassNames[size_t(cls)], kind, false});
    }
  for (const auto& s : kSpecials) {
    const std::string rel = kClassNames[size_t(s.cls)] + "/" + s.name;
    write_bytes(root / "train" / rel, make_image(src, s.cls, s.kind));
    t.train.push_back({rel, kClassNames[size_t(s.cls)], s.kind, s.bad});
  }
  std::vector<std::string> sorted = kClassNames;
  std::sort(sorted.begin(), sorted.end());
  std::ofstream labels(t.val_labels), index(t.val_index);
  labels << "# NAME CLASS, as ImageNet's validation labels\n";
  for (int i = 0; i < val; ++i) {
    const int cls = (i * 7) % 10;
    const std::string kind = i == val - 1 ? "truncated jpeg" : i % 5 == 3 ? "png named JPEG" : kOrdinary[size_t(i % 3)];
    char name[64];
    std::snprintf(name, sizeof name, "ILSVRC2012_val_%08d.JPEG", i + 1);
    write_bytes(root / "val" / name, make_image(src, cls, kind));
    t.val.push_back({name, kClassNames[size_t(cls)], kind, kind == "truncated jpeg"});
    labels << name << " " << kClassNames[size_t(cls)] << "\n";
    index << name << " " << (std::find(sorted.begin(), sorted.end(), kClassNames[size_t(cls)]) - sorted.begin())
          << "\n";
  }
  if (!labels || !index) fail("cannot write the labels files");
  return t;
}

namespace {

// Fashion-MNIST image i of a set, as one of the three kinds of write_fashion_tree.
Bytes fashion_file(const uint8_t* gray, size_t i, std::string* kind) {
  const Bytes g(gray, gray + 28 * 28);
  Bytes rgb(28 * 28 * 3);
  for (size_t p = 0; p < 28 * 28; ++p) rgb[3 * p] = rgb[3 * p + 1] = rgb[3 * p + 2] = g[p];
  switch (i % 3) {
    case 0: *kind = "gray png 28x28"; return png_of(g, 28, 28, PNG_FORMAT_GRAY);
    case 1: *kind = "jpeg 28x28"; return jpeg_of(rgb, 28, 28, TJPF_RGB, TJSAMP_444);
    default: *kind = "png 56x56"; return png_of(upscale(rgb, 28, 28, 3, 56, 56), 56, 56, PNG_FORMAT_RGB);
  }
}

}  // namespace

ImageTree write_fashion_tree(const std::string& dir, const std::string& fashion_dir, int n_train, int n_val) {
  io::init_vips();
  const io::IdxImages train = io::read_idx_images(fashion_dir + "/train-images-idx3-ubyte.gz");
  const std::vector<uint8_t> train_labels = io::read_idx_labels(fashion_dir + "/train-labels-idx1-ubyte.gz");
  const io::IdxImages test = io::read_idx_images(fashion_dir + "/t10k-images-idx3-ubyte.gz");
  const std::vector<uint8_t> test_labels = io::read_idx_labels(fashion_dir + "/t10k-labels-idx1-ubyte.gz");
  if (n_train > int(train_labels.size()) || n_val > int(test_labels.size())) fail("not so many Fashion-MNIST images");
  ImageTree t;
  const fs::path root(dir);
  t.train_root = (root / "train").string();
  t.val_root = (root / "val").string();
  t.val_labels = (root / "val_labels.txt").string();
  fs::create_directories(t.train_root);
  fs::create_directories(t.val_root);
  std::string kind;
  for (int i = 0; i < n_train; ++i) {
    const std::string& cls = kClassNames[train_labels[size_t(i)]];
    Bytes b = fashion_file(train.pixels.data() + 28 * 28 * size_t(i), size_t(i), &kind);
    char name[64];
    std::snprintf(name, sizeof name, "train_%05d.%s", i, kind.find("png") != std::string::npos ? "png" : "JPEG");
    const std::string rel = cls + "/" + name;
    write_bytes(root / "train" / rel, b);
    t.train.push_back({rel, cls, kind, false});
  }
  std::ofstream labels(t.val_labels);
  labels << "# NAME CLASS, as ImageNet's validation labels\n";
  for (int i = 0; i < n_val; ++i) {
    const std::string& cls = kClassNames[test_labels[size_t(i)]];
    Bytes b = fashion_file(test.pixels.data() + 28 * 28 * size_t(i), size_t(i), &kind);
    char name[64];
    std::snprintf(name, sizeof name, "val_%05d.%s", i, kind.find("png") != std::string::npos ? "png" : "JPEG");
    write_bytes(root / "val" / name, b);
    t.val.push_back({name, cls, kind, false});
    labels << name << " " << cls << "\n";
  }
  if (!labels) fail("cannot write " + t.val_labels);
  return t;
}

}  // namespace dtrain::test
