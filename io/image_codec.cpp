// io/image_codec.cpp — TurboJPEG / libpng / libexif / libvips glue (see image_codec.hpp).
#include "io/image_codec.hpp"

#include <libexif/exif-data.h>
#include <png.h>
#include <turbojpeg.h>
#include <vips/vips.h>
#include <vips/vector.h>  // vips_vector_set_enabled (not in vips.h)

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "core/error.hpp"

namespace dtrain::io {

namespace {

// One TurboJPEG handle per thread and kind (a handle is not thread-safe).
struct TjHandle {
  tjhandle h;
  explicit TjHandle(bool compress) : h(compress ? tjInitCompress() : tjInitDecompress()) {
    DT_CHECK(h != nullptr, "TurboJPEG: cannot create a handle: ", tjGetErrorStr2(nullptr));
  }
  ~TjHandle() { tjDestroy(h); }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
};
tjhandle decompressor() {
  thread_local TjHandle t(false);
  return t.h;
}
tjhandle compressor() {
  thread_local TjHandle t(true);
  return t.h;
}

// An owning VipsImage* (g_object_unref on destruction).
struct VipsRef {
  VipsImage* p = nullptr;
  VipsRef() = default;
  explicit VipsRef(VipsImage* q) : p(q) {}
  ~VipsRef() {
    if (p) g_object_unref(p);
  }
  VipsRef(const VipsRef&) = delete;
  VipsRef& operator=(const VipsRef&) = delete;
};

[[noreturn]] void vips_fail(const char* what) {
  std::string msg = vips_error_buffer();
  vips_error_clear();
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  DT_FAIL("libvips: ", what, " failed: ", msg);
}

// The most pixels an image may decode to: Pillow's MAX_IMAGE_PIXELS (its
// "decompression bomb" limit, 89,478,485 = 0.25 GiB of RGBA; ImageNet's largest
// images are ~20 M pixels). A header claiming more is a BadImage before anything
// is allocated: one crafted or damaged file must not take gigabytes, or every
// converter thread at once.
constexpr int64_t kMaxDecodedPixels = 89478485;

void check_pixels(int64_t w, int64_t h, const char* what) {
  if (w * h > kMaxDecodedPixels)
    throw BadImage(std::string(what) + " of " + std::to_string(w) + "x" + std::to_string(h) +
                   " pixels to decode, more than the limit of " + std::to_string(kMaxDecodedPixels) +
                   " (Pillow's MAX_IMAGE_PIXELS)");
}

// Decodes a JPEG; a TurboJPEG warning or error is a BadImage.
DecodedImage decode_jpeg(std::span<const uint8_t> bytes, int min_side) {
  tjhandle d = decompressor();
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(d, bytes.data(), static_cast<unsigned long>(bytes.size()), &w, &h, &subsamp,
                          &colorspace) != 0)
    throw BadImage(std::string("corrupt JPEG header: ") + tjGetErrorStr2(d));
  if (w <= 0 || h <= 0) throw BadImage("JPEG with an empty image");
  DecodedImage out;
  out.orientation = jpeg_exif_orientation(bytes);
  out.dct_denominator = jpeg_scale_denominator(w, h, min_side);
  const tjscalingfactor sf{1, out.dct_denominator};
  const int sw = TJSCALED(w, sf), sh = TJSCALED(h, sf);
  check_pixels(sw, sh, "a JPEG");  // after DCT scaling: a large photograph needed small still decodes
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<uint8_t> buf(size_t(sw) * size_t(sh) * (cmyk ? 4 : 3));
  // STOPONWARNING: a warning (e.g. "Premature end of JPEG file") aborts, and the
  // image is skipped rather than stored with a grey tail.
  if (tjDecompress2(d, bytes.data(), static_cast<unsigned long>(bytes.size()), buf.data(), sw, 0, sh,
                    cmyk ? TJPF_CMYK : TJPF_RGB, TJFLAG_STOPONWARNING) != 0)
    throw BadImage(std::string(tjGetErrorCode(d) == TJERR_WARNING ? "corrupt or truncated JPEG: "
                                                                   : "cannot decode JPEG: ") +
                   tjGetErrorStr2(d));
  out.image.width = sw;
  out.image.height = sh;
  if (cmyk) {
    out.image.pixels.resize(size_t(sw) * size_t(sh) * 3);
    cmyk_to_rgb(buf.data(), out.image.pixels.data(), int64_t(sw) * sh);
  } else {
    out.image.pixels = std::move(buf);
  }
  return out;
}

struct PngImage {
  png_image img;
  PngImage() {
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
  }
  ~PngImage() { png_image_free(&img); }
};

DecodedImage decode_png(std::span<const uint8_t> bytes) {
  PngImage p;
  if (!png_image_begin_read_from_memory(&p.img, bytes.data(), bytes.size()))
    throw BadImage(std::string("corrupt PNG header: ") + p.img.message);
  if (p.img.width == 0 || p.img.height == 0 || p.img.width > (1u << 16) || p.img.height > (1u << 16))
    throw BadImage("PNG of unsupported size " + std::to_string(p.img.width) + "x" + std::to_string(p.img.height));
  check_pixels(p.img.width, p.img.height, "a PNG");
  // zlib's deflate expands at most 1032:1; the decoded rows (filter byte + samples)
  // cannot exceed that many times the file (with 64 KiB of slack for tiny files).
  const double row_bytes = 1.0 + double(p.img.width) * double(PNG_IMAGE_SAMPLE_CHANNELS(p.img.format)) *
                                     double(PNG_IMAGE_SAMPLE_COMPONENT_SIZE(p.img.format));
  if (row_bytes * double(p.img.height) > 1032.0 * double(bytes.size()) + 65536.0)
    throw BadImage("a PNG header claiming " + std::to_string(p.img.width) + "x" + std::to_string(p.img.height) +
                   " pixels in a file of " + std::to_string(bytes.size()) + " bytes (more than deflate can expand to)");
  // 16-bit samples without gAMA/sRGB chunks are sRGB-encoded in practice.
  p.img.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  const bool alpha = (p.img.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  p.img.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  const int w = int(p.img.width), h = int(p.img.height), c = alpha ? 4 : 3;
  std::vector<uint8_t> buf(size_t(w) * size_t(h) * size_t(c));
  if (!png_image_finish_read(&p.img, nullptr, buf.data(), 0, nullptr))
    throw BadImage(std::string("corrupt or truncated PNG: ") + p.img.message);
  DecodedImage out;
  out.image.width = w;
  out.image.height = h;
  if (alpha) {  // drop the alpha channel (the colours are not premultiplied)
    out.image.pixels.resize(size_t(w) * size_t(h) * 3);
    for (size_t i = 0, n = size_t(w) * size_t(h); i < n; ++i)
      std::memcpy(&out.image.pixels[3 * i], &buf[4 * i], 3);
  } else {
    out.image.pixels = std::move(buf);
  }
  return out;
}

}  // namespace

void init_vips() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (vips_init("dtrain") != 0) vips_fail("vips_init");
    vips_concurrency_set(1);  // dtrain's own threads parallelise over images
    vips_cache_set_max(0);    // every image is new: caching operations only costs memory
    // No liborc: with several converter threads, Debian 12's libvips 8.14 + liborc 0.4.33 crash at
    // random in orc_code_free (vips_vector_free, as an operation is unreffed) — seen here once in
    // ~3 conversions of 12,000 images with 2 threads. The C paths give the same images.
    vips_vector_set_enabled(FALSE);
  });
}

ImageFormat sniff_image(std::span<const uint8_t> b) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::jpeg;
  if (b.size() >= 8 && std::memcmp(b.data(), png_sig, 8) == 0) return ImageFormat::png;
  return ImageFormat::unknown;
}

int jpeg_scale_denominator(int width, int height, int min_side) {
  if (min_side <= 0) return 1;
  const int shorter = std::min(width, height);
  int d = 1;
  while (d < 8 && (shorter + 2 * d - 1) / (2 * d) >= min_side) d *= 2;
  return d;
}

int jpeg_exif_orientation(std::span<const uint8_t> jpeg) {
  // libexif walks the JPEG markers up to its APP1 segment itself.
  ExifData* ed = exif_data_new_from_data(jpeg.data(), static_cast<unsigned int>(jpeg.size()));
  if (!ed) return 1;
  int o = 1;
  if (ExifEntry* e = exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
      e && e->format == EXIF_FORMAT_SHORT && e->components >= 1 && e->data)
    o = exif_get_short(e->data, exif_data_get_byte_order(ed));
  exif_data_unref(ed);
  return (o >= 1 && o <= 8) ? o : 1;
}

DecodedImage decode_image(std::span<const uint8_t> bytes, int min_side) {
  switch (sniff_image(bytes)) {
    case ImageFormat::jpeg:
      return decode_jpeg(bytes, min_side);
    case ImageFormat::png:
      return decode_png(bytes);
    default:
      break;
  }
  throw BadImage(bytes.empty() ? "empty file" : "not a JPEG or PNG image (unknown signature)");
}

void shorter_side_size(int width, int height, int size, int& out_width, int& out_height) {
  auto scaled = [size](int side, int shorter) {
    return int(std::max<int64_t>(size, (int64_t(side) * size * 2 + shorter) / (2 * int64_t(shorter))));
  };
  if (width <= height) {
    out_width = size;
    out_height = scaled(height, width);
  } else {
    out_height = size;
    out_width = scaled(width, height);
  }
}

RgbImage orient_resize(const RgbImage& img, int orientation, int size, bool crop) {
  init_vips();
  DT_CHECK(img.width > 0 && img.height > 0 && size > 0, "orient_resize: bad sizes");
  DT_CHECK(img.pixels.size() == size_t(img.width) * size_t(img.height) * 3, "orient_resize: pixel count");
  VipsRef in(vips_image_new_from_memory(img.pixels.data(), img.pixels.size(), img.width, img.height, 3,
                                        VIPS_FORMAT_UCHAR));
  if (!in.p) vips_fail("vips_image_new_from_memory");
  VipsRef rot;
  VipsImage* cur = in.p;
  if (orientation != 1) {
    vips_image_set_int(in.p, VIPS_META_ORIENTATION, orientation);
    if (vips_autorot(in.p, &rot.p, nullptr) != 0) vips_fail("vips_autorot");
    cur = rot.p;
  }
  int tw = 0, th = 0;
  shorter_side_size(cur->Xsize, cur->Ysize, size, tw, th);
  VipsRef resized;
  if (vips_resize(cur, &resized.p, double(tw) / cur->Xsize, "vscale", double(th) / cur->Ysize,
                  "kernel", VIPS_KERNEL_LANCZOS3, nullptr) != 0)
    vips_fail("vips_resize");
  DT_CHECK(resized.p->Xsize == tw && resized.p->Ysize == th, "vips_resize gave ", resized.p->Xsize, "x",
           resized.p->Ysize, ", expected ", tw, "x", th);
  VipsRef cropped;
  VipsImage* last = resized.p;
  if (crop) {
    if (vips_extract_area(resized.p, &cropped.p, (tw - size) / 2, (th - size) / 2, size, size, nullptr) != 0)
      vips_fail("vips_extract_area");
    last = cropped.p;
  }
  size_t bytes = 0;
  void* mem = vips_image_write_to_memory(last, &bytes);
  if (!mem) vips_fail("vips_image_write_to_memory");
  RgbImage out;
  out.width = last->Xsize;
  out.height = last->Ysize;
  const auto* p = static_cast<const uint8_t*>(mem);
  out.pixels.assign(p, p + bytes);
  g_free(mem);
  DT_CHECK(out.pixels.size() == size_t(out.width) * size_t(out.height) * 3, "libvips: unexpected output size");
  return out;
}

std::vector<uint8_t> encode_jpeg(const RgbImage& img, int quality) {
  DT_CHECK(quality >= 1 && quality <= 100, "JPEG quality ", quality, " outside [1, 100]");
  tjhandle c = compressor();
  unsigned char* jb = nullptr;
  unsigned long size = 0;
  if (tjCompress2(c, img.pixels.data(), img.width, 0, img.height, TJPF_RGB, &jb, &size, TJSAMP_420, quality, 0) != 0) {
    std::string msg = tjGetErrorStr2(c);
    tjFree(jb);
    DT_FAIL("TurboJPEG: encoding a ", img.width, "x", img.height, " image failed: ", msg);
  }
  std::vector<uint8_t> out(jb, jb + size);
  tjFree(jb);
  return out;
}

RgbImage decode_jpeg_rgb(std::span<const uint8_t> jpeg) {
  if (sniff_image(jpeg) != ImageFormat::jpeg) throw BadImage("not a JPEG");
  DecodedImage d = decode_jpeg(jpeg, 0);
  return std::move(d.image);
}

void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t pixels) {
  for (int64_t i = 0; i < pixels; ++i) {
    const int k = cmyk[4 * i + 3];
    for (int ch = 0; ch < 3; ++ch)  // (c·k + 127) / 255 = round(c·k/255) for c, k in [0, 255]
      rgb[3 * i + ch] = static_cast<uint8_t>((cmyk[4 * i + ch] * k + 127) / 255);
  }
}

}  // namespace dtrain::io
