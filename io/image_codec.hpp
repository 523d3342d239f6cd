// io/image_codec.hpp — decoding, resizing and JPEG encoding of single images,
// for `dtrain data imagefolder` (io/imagefolder.hpp), on maintained libraries
// only: libjpeg-turbo's TurboJPEG API, libpng's simplified API, libexif for the
// EXIF orientation, libvips for rotation and resampling. No codec or resampler
// is written here.
//
// What an image becomes (docs/data-formats.md, "odd images"):
//   - the format is sniffed from the bytes, not the file name: JPEG (FF D8 FF)
//     or PNG (the 8-byte PNG signature); anything else is a BadImage;
//   - JPEG: decoded to 8-bit RGB (grayscale is expanded by libjpeg); CMYK/YCCK
//     is decoded to CMYK and converted with libjpeg-turbo's own formula
//     (its cmyk.h: Adobe's inverted CMYK, r = c·k/255, …); when the shorter
//     side is at least 2·min_side, the DCT scales it down by 1/2, 1/4 or 1/8
//     (the largest that keeps the shorter side ≥ min_side) — libjpeg's scaled
//     inverse DCT, much cheaper than decoding the full image;
//   - any libjpeg-turbo warning (premature end of file, corrupt data) makes
//     the image a BadImage: a truncated file is not stored half grey;
//   - PNG: every colour type and bit depth (palette, grayscale, 16-bit, alpha)
//     through png_image to 8-bit RGB; 16-bit samples without gAMA/sRGB chunks
//     are read as sRGB (v/257), alpha is dropped (like PIL's convert("RGB"));
//   - EXIF orientation (JPEG APP1, read by libexif; tags 1..8) is applied by
//     vips_autorot before resizing; PNG eXIf chunks are not read.
//
// Resizing: vips_resize (Lanczos-3, libvips' default kernel) to a shorter side
// of exactly S, the longer side round(long·S/short); raw stores then take the
// centre S×S (offsets ⌊(W−S)/2⌋, ⌊(H−S)/2⌋).
//
// Threads: every function may be called from many threads at once (TurboJPEG
// handles are per thread; libvips is thread-safe and is initialised once, with
// its own worker pool set to 1 thread and its operation cache off, since the
// caller parallelises over images).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain::io {

// An 8-bit RGB image; pixels: [height, width, 3], row-major.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
};

// The input is not a decodable image (unknown format, corrupt, truncated).
// what(): the reason, for the converter's report file.
class BadImage : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ImageFormat { jpeg, png, unknown };
ImageFormat sniff_image(std::span<const uint8_t> bytes);

// A decoded image and what is still to be done to it.
struct DecodedImage {
  RgbImage image;
  int orientation = 1;  // EXIF orientation 1..8 (1 = as stored), not yet applied
  int dct_denominator = 1;  // JPEG: the decode was scaled by 1/dct_denominator
};

// The DCT scaling denominator (1, 2, 4 or 8) for a w×h JPEG whose shorter side
// must stay ≥ min_side: the largest d with ceil(min(w, h)/d) ≥ min_side
// (TurboJPEG's TJSCALED rounding). min_side ≤ 0 → 1.
int jpeg_scale_denominator(int width, int height, int min_side);

// The EXIF orientation of a JPEG (1 when it has none or it is unreadable).
int jpeg_exif_orientation(std::span<const uint8_t> jpeg);

// Decodes a JPEG or PNG (see the file comment). min_side > 0 allows JPEG DCT
// scaling down to that shorter side. Throws BadImage on bad input.
DecodedImage decode_image(std::span<const uint8_t> bytes, int min_side = 0);

// Applies `orientation`, resizes to a shorter side of `size` (aspect kept) and,
// when `crop`, takes the centre size×size. Throws Error when libvips fails.
RgbImage orient_resize(const RgbImage& img, int orientation, int size, bool crop);

// The output size orient_resize gives before cropping: shorter side = size,
// longer side = round(long·size/short) (for dimensions already oriented).
void shorter_side_size(int width, int height, int size, int& out_width, int& out_height);

// JPEG of img at quality 1..100, 4:2:0 chroma subsampling (TurboJPEG).
std::vector<uint8_t> encode_jpeg(const RgbImage& img, int quality);

// Decodes a JPEG to RGB without scaling (the stored JPEGs of a jpeg store).
// Throws BadImage on bad input.
RgbImage decode_jpeg_rgb(std::span<const uint8_t> jpeg);

// libjpeg-turbo's CMYK → RGB (cmyk.h of libjpeg-turbo; Adobe inverted CMYK):
// r = round(c·k/255), g = round(m·k/255), b = round(y·k/255).
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t pixels);

// Initialises libvips once per process (idempotent, thread-safe).
void init_vips();

}  // namespace dtrain::io
