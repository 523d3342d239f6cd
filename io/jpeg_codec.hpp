// io/jpeg_codec.hpp — JPEG decode (and encode, for fixtures and benchmarks)
// through libjpeg-turbo's TurboJPEG API; one handle per object, so one object
// per thread (a tjhandle is not thread-safe).
//
// Decode flags: 0 — TurboJPEG's defaults (accurate integer DCT, fancy chroma
// upsampling), the same decode as libjpeg's and PIL's defaults. A warning
// (e.g. "Premature end of JPEG file") is an error like a fatal one: a store's
// images were checked when it was written, so a damaged one is a damaged file.
//
// DCT scaling: decode(…, denom) with denom ∈ {1, 2, 4, 8} decodes at 1/denom
// of the size, ⌈h/denom⌉ × ⌈w/denom⌉ (TJSCALED), by a reduced inverse DCT —
// several times faster than a full decode plus a resize.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::io {

struct JpegHeader {
  int64_t height = 0, width = 0;
  int channels = 0;  // 1 for a grayscale JPEG, else 3 (YCbCr, RGB; CMYK reads as 4)
};

// ⌈size / denom⌉: the decoded size at 1/denom (TJSCALED with 1/denom).
inline int64_t jpeg_scaled(int64_t size, int denom) { return (size + denom - 1) / denom; }

class JpegDecoder {
 public:
  JpegDecoder();  // the TurboJPEG handle is made at the first call (a raw file's decoder never needs one)
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the header of `size` bytes at `data`. Throws Error("<what>: not a
  // JPEG (TurboJPEG: …)") when it cannot, or when TurboJPEG cannot make a handle.
  JpegHeader header(const uint8_t* data, size_t size, const std::string& what) const;

  // Decodes into out: [⌈H/denom⌉, ⌈W/denom⌉, channels] uint8 (resized to fit),
  // channels 1 (luma: the JPEG's Y plane) or 3 (RGB; a gray JPEG is replicated).
  // denom ∈ {1, 2, 4, 8}. Returns the header (full-size dims). expect_h/w > 0:
  // the stored shape (/shapes), checked against the header before anything is
  // allocated. Throws UsageError (exit 2: a malformed file) naming `what` on a
  // damaged image or a header that disagrees with expect_h × expect_w.
  JpegHeader decode(const uint8_t* data, size_t size, int channels, int denom,
                    std::vector<uint8_t>& out, int64_t* out_h, int64_t* out_w,
                    const std::string& what, int64_t expect_h = 0, int64_t expect_w = 0) const;

 private:
  mutable void* handle_ = nullptr;  // tjhandle, made by handle()
  void* handle() const;
};

// pixels: [h, w, channels] uint8 (channels 1 or 3) → a baseline JPEG at
// `quality` (1..100), chroma 4:2:0 for colour (TurboJPEG's usual choice), 4:4:4
// with full_chroma. Throws Error.
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int64_t h, int64_t w, int channels,
                                 int quality, bool full_chroma = false);

}  // namespace dtrain::io
