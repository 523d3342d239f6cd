// io/jpeg_codec.cpp — the TurboJPEG calls of the loader (jpeg_codec.hpp).
#include "io/jpeg_codec.hpp"

#include <turbojpeg.h>

#include <climits>

#include "core/error.hpp"

namespace dtrain::io {

namespace {
std::string tj_message(tjhandle h) {
  const char* m = tjGetErrorStr2(h);
  return m ? m : "unknown error";
}
}  // namespace

JpegDecoder::JpegDecoder() = default;

void* JpegDecoder::handle() const {
  if (!handle_) {
    handle_ = tjInitDecompress();
    DT_CHECK(handle_ != nullptr, "TurboJPEG: cannot create a decompressor (", tjGetErrorStr2(nullptr), ")");
  }
  return handle_;
}

JpegDecoder::~JpegDecoder() {
  if (handle_) tjDestroy(static_cast<tjhandle>(handle_));
}

JpegHeader JpegDecoder::header(const uint8_t* data, size_t size, const std::string& what) const {
  tjhandle h = static_cast<tjhandle>(handle());
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  if (size == 0 || size > ULONG_MAX ||
      tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &w, &ht, &subsamp, &colorspace) != 0)
    DT_USAGE(what, ": not a JPEG (TurboJPEG: ", size == 0 ? "no bytes" : tj_message(h), ")");
  JpegHeader hd;
  hd.height = ht;
  hd.width = w;
  hd.channels = colorspace == TJCS_GRAY ? 1 : (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) ? 4 : 3;
  return hd;
}

JpegHeader JpegDecoder::decode(const uint8_t* data, size_t size, int channels, int denom,
                               std::vector<uint8_t>& out, int64_t* out_h, int64_t* out_w,
                               const std::string& what, int64_t expect_h, int64_t expect_w) const {
  DT_CHECK(channels == 1 || channels == 3, what, ": decode to ", channels, " channels (1 or 3)");
  DT_CHECK(denom == 1 || denom == 2 || denom == 4 || denom == 8, what, ": DCT scale 1/", denom);
  const JpegHeader hd = header(data, size, what);
  if (hd.channels == 4) DT_USAGE(what, ": a CMYK JPEG (the loader decodes RGB and gray ones)");
  // Before anything is allocated: a damaged header must not size the buffer.
  if ((expect_h > 0 && hd.height != expect_h) || (expect_w > 0 && hd.width != expect_w))
    DT_USAGE(what, " is ", hd.height, "x", hd.width, " but /shapes says ", expect_h, "x", expect_w);
  const int64_t oh = jpeg_scaled(hd.height, denom), ow = jpeg_scaled(hd.width, denom);
  out.resize(static_cast<size_t>(oh * ow * channels));
  tjhandle h = static_cast<tjhandle>(handle());
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), out.data(), int(ow), 0, int(oh),
                    channels == 1 ? TJPF_GRAY : TJPF_RGB, 0) != 0)
    DT_USAGE(what, ": damaged JPEG (TurboJPEG: ", tj_message(h), ")");
  *out_h = oh;
  *out_w = ow;
  return hd;
}

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int64_t h, int64_t w, int channels, int quality,
                                 bool full_chroma) {
  DT_CHECK(channels == 1 || channels == 3, "encode_jpeg: ", channels, " channels (1 or 3)");
  DT_CHECK(quality >= 1 && quality <= 100, "encode_jpeg: quality ", quality, " outside [1, 100]");
  DT_CHECK(h >= 1 && w >= 1 && h <= INT_MAX && w <= INT_MAX, "encode_jpeg: size ", h, "x", w);
  tjhandle t = tjInitCompress();
  DT_CHECK(t != nullptr, "TurboJPEG: cannot create a compressor (", tjGetErrorStr2(nullptr), ")");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int subsamp = channels == 1 ? TJSAMP_GRAY : full_chroma ? TJSAMP_444 : TJSAMP_420;
  const int rc = tjCompress2(t, pixels, int(w), 0, int(h), channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size,
                             subsamp, quality, 0);
  std::string msg = rc != 0 ? tj_message(t) : "";
  tjDestroy(t);
  if (rc != 0) {
    tjFree(buf);
    DT_FAIL("TurboJPEG: encode of a ", h, "x", w, "x", channels, " image failed: ", msg);
  }
  std::vector<uint8_t> jpeg(buf, buf + size);
  tjFree(buf);
  return jpeg;
}

}  // namespace dtrain::io
