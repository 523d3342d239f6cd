// tests/jpeg_store.hpp — a writer of jpeg-layout dataset files for the tests
// and the loader benchmark (the layout of docs/data-formats.md, written here
// with the HDF5 C API on its own: it is the converter's contract, checked from
// the outside), and Fashion-MNIST images made into RGB pictures of other sizes
// with the loader's resampler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::test {

struct StoreImage {
  std::vector<uint8_t> jpeg;  // the encoded image
  int32_t h = 0, w = 0;       // its size
  int32_t label = 0;
};

struct StoreOptions {
  int classes = 10;
  int size = 0;                  // attribute `size` (0: the smallest shorter side)
  int64_t chunk_bytes = 1 << 20; // /jpeg chunk (capped at the total)
  bool variable_length_layout = false;  // attribute `layout` as a variable-length string
};

// Writes `path` (replacing it). Throws dtrain::Error on an HDF5 failure.
void write_jpeg_store(const std::string& path, const std::vector<StoreImage>& images, const StoreOptions& o = {});

// The first n Fashion-MNIST training images (Debian's dataset-fashion-mnist)
// and labels: [n, 28, 28] gray.
struct FashionImages {
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  int64_t n = 0;
};
FashionImages fashion_images(int64_t n, bool test_set = false);

// Image k of `f` as RGB h × w: the gray picture resized with io::resize_image,
// tinted per channel (R = p, G = (p + 85·k) mod 256 mixed 1:1 with p, B = 255 − p)
// so that colour and orientation matter; gray = true keeps R = G = B = p.
std::vector<uint8_t> fashion_rgb(const FashionImages& f, int64_t k, int64_t h, int64_t w, bool gray = false);

}  // namespace dtrain::test
