// tests/make_jpeg_store.cpp — dtrain_make_jpeg_store: a jpeg-layout dataset file
// (docs/data-formats.md) of real Fashion-MNIST pictures, for the integration
// test and the loader benchmark (bench/README.md), written by the tests'
// fixture writer (tests/jpeg_store.hpp) — not by the converter.
//
//   dtrain_make_jpeg_store OUT N [size=S] [long=L] [quality=Q] [noise=SIGMA] [gray=1] [test=1]
//     N pictures: image k is Fashion-MNIST image k (the t10k set with test=1),
//     resized with the loader's resampler to S × S (long=0, the default) or,
//     with long=L > S, to a shorter side S and a longer side cycling through
//     [S, L] (portrait and landscape in turn), tinted into RGB (gray=1: R = G =
//     B), plus Gaussian noise of SIGMA grey levels (the texture of photographs:
//     it sets the JPEG's size and decode cost), encoded at quality Q (90).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "core/error.hpp"
#include "io/jpeg_codec.hpp"
#include "tests/jpeg_store.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT N [size=S] [long=L] [quality=Q] [noise=SIGMA] [gray=1] [test=1]\n", argv[0]);
    return 2;
  }
  try {
    const std::string out = argv[1];
    const int64_t n = std::atoll(argv[2]);
    int64_t size = 28, longer = 0, quality = 90, gray = 0, test = 0;
    double noise = 0;
    for (int i = 3; i < argc; ++i) {
      const std::string a = argv[i];
      const size_t eq = a.find('=');
      const std::string k = a.substr(0, eq), v = eq == std::string::npos ? "" : a.substr(eq + 1);
      if (k == "size") size = std::atoll(v.c_str());
      else if (k == "long") longer = std::atoll(v.c_str());
      else if (k == "quality") quality = std::atoll(v.c_str());
      else if (k == "noise") noise = std::atof(v.c_str());
      else if (k == "gray") gray = std::atoll(v.c_str());
      else if (k == "test") test = std::atoll(v.c_str());
      else DT_USAGE("unknown argument '", a, "'");
    }
    if (n < 1 || size < 1) DT_USAGE("N and size must be >= 1");
    const dtrain::test::FashionImages f = dtrain::test::fashion_images(n, test != 0);
    std::mt19937 rng(12345);
    std::normal_distribution<double> nd(0.0, noise > 0 ? noise : 1.0);
    std::vector<dtrain::test::StoreImage> images;
    int64_t bytes = 0;
    for (int64_t k = 0; k < n; ++k) {
      int64_t h = size, w = size;
      if (longer > size) {
        const int64_t l = size + (k * 37) % (longer - size + 1);
        (k % 2 ? h : w) = l;
      }
      auto rgb = dtrain::test::fashion_rgb(f, k % f.n, h, w, gray != 0);
      if (noise > 0)
        for (auto& v : rgb) v = uint8_t(std::clamp(double(v) + nd(rng), 0.0, 255.0));
      dtrain::test::StoreImage im{dtrain::io::encode_jpeg(rgb.data(), h, w, 3, int(quality)), int32_t(h),
                                  int32_t(w), f.labels[size_t(k % f.n)]};
      bytes += int64_t(im.jpeg.size());
      images.push_back(std::move(im));
    }
    dtrain::test::StoreOptions so;
    so.size = int(size);
    dtrain::test::write_jpeg_store(out, images, so);
    std::printf("%s: %lld images, shorter side %lld, %.0f bytes per JPEG on average\n", out.c_str(),
                (long long)n, (long long)size, double(bytes) / double(n));
    return 0;
  } catch (const dtrain::Error& e) {
    std::fprintf(stderr, "dtrain_make_jpeg_store: %s\n", e.what());
    return 2;
  }
}
