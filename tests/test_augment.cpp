// tests/test_augment.cpp — the recipes' augmentation (io/augment.hpp) and the
// resampler (io/resample.hpp): the random-resized crop's scale and aspect
// distributions against torchvision's, its fallback, its determinism (the same
// crops whatever the thread count and the order threads finish), AlexNet's
// random crop, the evaluation's resize + center crop geometry and pixels, the
// resampler's centre convention (libswscale and libvips against exact
// bilinear and each other), DCT scaling, and the option keys.
#include <hdf5.h>

#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "engine/config.hpp"
#include "io/augment.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/jpeg_codec.hpp"
#include "io/prefetcher.hpp"
#include "io/resample.hpp"
#include "io/sample_decoder.hpp"
#include "tests/jpeg_store.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::io::AugmentOptions;
using dtrain::io::CropMode;
using dtrain::io::ImageShape;
using dtrain::io::Rect;
using dtrain::io::SamplePlan;
using dtrain::test::TempDir;
using dtrain::test::usage_error_message;

namespace {
AugmentOptions rrc(bool flip = true) {
  AugmentOptions a;
  a.mode = CropMode::rrc;
  a.flip = flip;
  return a;
}
}  // namespace

TEST_CASE("random-resized crops follow torchvision's scale and aspect distributions", "[augment]") {
  // On a square image a try (s, log r), uniform on [0.08, 1] × [−L, L], L = log 4/3, is kept when
  // the crop fits: s·r ≤ 1 and s/r ≤ 1, i.e. s ≤ e^−|log r|. The first kept try is uniform on that
  // region A; 10 tries all fail with probability (1 − 0.8576)^10 ≈ 3e-9. Over A (integrals in closed form):
  //   P(s ≤ 0.75) = 0.67·2L / area(A) = 0.8492,  E[s] = 0.4778,
  //   and given s ≤ 0.75 (every ratio fits): s uniform on [0.08, 0.75], log r uniform on [−L, L].
  const int64_t n = 20000, side = 1000;
  const AugmentOptions a = rrc(false);
  const double L = std::log(4.0 / 3.0);
  int64_t small = 0, fallback = 0;
  double sum_s = 0, sum_l = 0, sum_l2 = 0, sum_y = 0, sum_x = 0;
  int64_t npos = 0;
  std::vector<int64_t> bins(10, 0);
  for (int64_t i = 0; i < n; ++i) {
    const SamplePlan p = dtrain::io::train_plan(a, 7, 0, i, side, side, 224, 224, 256);
    const Rect& r = p.from;
    REQUIRE(r.y >= 0);
    REQUIRE(r.x >= 0);
    REQUIRE(r.y + r.h <= side);
    REQUIRE(r.x + r.w <= side);
    CHECK(p.rh == 224);
    CHECK(p.take == Rect{0, 0, 224, 224});
    const double s = double(r.h * r.w) / double(side * side);
    const double l = std::log(double(r.w) / double(r.h));
    fallback += r == Rect{0, 0, side, side};
    sum_s += s;
    if (s <= 0.75) {
      ++small;
      bins[size_t(std::min(9.0, (s - 0.08) / 0.067))] += 1;
      sum_l += l;
      sum_l2 += l * l;
    }
    if (r.h < side && r.w < side) {  // the position: uniform over the places the crop fits
      sum_y += double(r.y) / double(side - r.h);
      sum_x += double(r.x) / double(side - r.w);
      ++npos;
    }
  }
  CHECK(fallback < 5);
  CHECK(std::abs(double(small) / double(n) - 0.8492) < 0.01);  // 4 standard errors
  CHECK(std::abs(sum_s / double(n) - 0.4778) < 0.006);
  for (int64_t b : bins) CHECK(std::abs(double(b) / double(small) - 0.1) < 0.012);
  const double mean_l = sum_l / double(small), var_l = sum_l2 / double(small) - mean_l * mean_l;
  CHECK(std::abs(mean_l) < 0.006);                             // centred: log-uniform around ratio 1
  CHECK(std::abs(var_l - (2 * L) * (2 * L) / 12.0) < 0.002);   // the variance of U(−L, L): 0.0276
  CHECK(std::abs(sum_y / double(npos) - 0.5) < 0.01);
  CHECK(std::abs(sum_x / double(npos) - 0.5) < 0.01);
}

TEST_CASE("random-resized crop: torchvision's fallback for images outside the ratio range", "[augment]") {
  // 1000 × 10 (w/h = 0.01 < 3/4): no crop of area ≥ 0.08 fits, so the fallback: w = 10,
  // h = round(10 / (3/4)) = 13, centred; 10 × 1000 likewise with h = 10, w = round(10 · 4/3) = 13.
  const AugmentOptions a = rrc(false);
  for (int64_t i = 0; i < 50; ++i) {
    CHECK(dtrain::io::train_plan(a, 1, 0, i, 1000, 10, 8, 8, 9).from == Rect{493, 0, 13, 10});
    CHECK(dtrain::io::train_plan(a, 1, 0, i, 10, 1000, 8, 8, 9).from == Rect{0, 493, 10, 13});
  }
  // Within the range and nothing fits (a tiny image and a large minimum scale): the whole image.
  AugmentOptions big = a;
  big.scale_min = 0.999;
  dtrain::io::SampleRng rng(5);
  const Rect r = dtrain::io::rrc_region(3, 4, big, rng);
  CHECK(r.h * r.w >= 9);
}

TEST_CASE("crops are a pure function of (seed, epoch, index): same seed, same crops", "[augment]") {
  const AugmentOptions a = rrc();
  int differ_seed = 0, differ_epoch = 0, flips = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const SamplePlan p = dtrain::io::train_plan(a, 3, 2, i, 256, 341, 224, 224, 256);
    CHECK(p == dtrain::io::train_plan(a, 3, 2, i, 256, 341, 224, 224, 256));
    differ_seed += !(p == dtrain::io::train_plan(a, 4, 2, i, 256, 341, 224, 224, 256));
    differ_epoch += !(p == dtrain::io::train_plan(a, 3, 3, i, 256, 341, 224, 224, 256));
    flips += p.flip;
  }
  CHECK(differ_seed > 990);
  CHECK(differ_epoch > 990);
  CHECK(flips > 430);
  CHECK(flips < 570);
  // The flip is today's flip bit: mode none with flip flips exactly the samples crop_flip_for flips.
  AugmentOptions none;
  none.flip = true;
  for (int64_t i = 0; i < 200; ++i)
    CHECK(dtrain::io::train_plan(none, 9, 1, i, 40, 40, 28, 28, 32).flip == dtrain::io::crop_flip_for(none, 9, 1, i).flip);
}

TEST_CASE("rrc batches are bitwise the same with 1 and 4 loader threads finishing in random order", "[augment]") {
  TempDir dir;
  const dtrain::test::FashionImages f = dtrain::test::fashion_images(32);
  std::vector<dtrain::test::StoreImage> images;
  const std::pair<int, int> sizes[] = {{32, 40}, {40, 32}, {32, 32}, {48, 36}};
  for (int k = 0; k < 32; ++k) {
    const auto [h, w] = sizes[k % 4];
    const auto rgb = dtrain::test::fashion_rgb(f, k, h, w);
    images.push_back({dtrain::io::encode_jpeg(rgb.data(), h, w, 3, 90), h, w, f.labels[size_t(k)]});
  }
  const std::string path = dir.file("store.h5");
  dtrain::test::write_jpeg_store(path, images);
  auto ds = dtrain::io::open_dataset(path);
  auto run = [&](int threads, bool shuffle_finish, uint64_t seed) {
    dtrain::io::PrefetchOptions o;
    o.threads = threads;
    o.depth = 3;
    o.input = ImageShape{24, 24, 3};
    o.augment = rrc();
    o.seed = seed;
    o.total_batches = 10;
    o.mean = {0.5f, 0.4f, 0.3f};
    o.std = {0.2f, 0.25f, 0.3f};
    if (shuffle_finish)
      o.test_before_decode = [](int64_t index) {
        thread_local std::mt19937 rng(std::hash<std::thread::id>{}(std::this_thread::get_id()));
        std::this_thread::sleep_for(std::chrono::microseconds((rng() + uint64_t(index)) % 1500));
      };
    dtrain::io::Prefetcher pf(*ds, dtrain::io::Sampler(32, 1, 0, 8, 11), o);
    std::vector<float> all;
    for (int s = 0; s < 10; ++s) {
      const auto& b = pf.next();
      all.insert(all.end(), b.x, b.x + b.size * 3 * 24 * 24);
    }
    return all;
  };
  const auto one = run(1, false, 42);
  CHECK(one == run(4, true, 42));
  CHECK(one == run(3, true, 42));
  CHECK(one != run(4, true, 43));  // and the seed matters
}

TEST_CASE("AlexNet's crop: a random input-size window of the image resized to R", "[augment]") {
  AugmentOptions a;
  a.mode = CropMode::crop;
  std::set<int64_t> ys, xs;
  for (int64_t i = 0; i < 4000; ++i) {
    const SamplePlan p = dtrain::io::train_plan(a, 1, 0, i, 256, 341, 227, 227, 256);
    CHECK(p.from == Rect{0, 0, 256, 341});  // shorter side already 256: no resize
    CHECK(p.rh == 256);
    CHECK(p.rw == 341);
    CHECK(p.take.h == 227);
    CHECK(p.take.w == 227);
    ys.insert(p.take.y);
    xs.insert(p.take.x);
  }
  CHECK(ys.size() == 30);  // every offset in [0, 29] and [0, 114]
  CHECK(*ys.rbegin() == 29);
  CHECK(xs.size() == 115);
  // A 300 × 200 image is first resized to 384 × 256.
  const SamplePlan p = dtrain::io::train_plan(a, 1, 0, 0, 300, 200, 224, 224, 256);
  CHECK(p.rh == 384);
  CHECK(p.rw == 256);
}

TEST_CASE("evaluation: torchvision's Resize(R) + CenterCrop geometry", "[augment]") {
  using dtrain::io::eval_plan;
  // Landscape 256 × 341: no resize; (341 − 224)/2 = 58.5 rounds half to even → 58.
  SamplePlan p = eval_plan(256, 341, 224, 224, 256);
  CHECK(p.rh == 256);
  CHECK(p.rw == 341);
  CHECK(p.take == Rect{16, 58, 224, 224});
  p = eval_plan(341, 256, 224, 224, 256);
  CHECK(p.take == Rect{58, 16, 224, 224});
  // Portrait 300 × 200 → 384 × 256 (shorter side R, longer ⌊256·300/200⌋).
  p = eval_plan(300, 200, 224, 224, 256);
  CHECK(p.from == Rect{0, 0, 300, 200});
  CHECK(p.rh == 384);
  CHECK(p.rw == 256);
  CHECK(p.take == Rect{80, 16, 224, 224});
  // 225 × 300 → 256 × ⌊341.33⌋ = 341.
  p = eval_plan(225, 300, 224, 224, 256);
  CHECK(p.rw == 341);
  // Half to even both ways: (343 − 224)/2 = 59.5 → 60.
  CHECK(eval_plan(256, 343, 224, 224, 256).take.x == 60);
  // The input's own size: taken whole, whatever R.
  p = eval_plan(28, 28, 28, 28, 32);
  CHECK(p.take == Rect{0, 0, 28, 28});
  CHECK(p.rh == 28);
  CHECK(dtrain::io::default_resize(224, 224) == 256);
  CHECK(dtrain::io::default_resize(227, 227) == 259);
  CHECK_THROWS(eval_plan(300, 300, 224, 224, 200));  // R smaller than the input
}

TEST_CASE("evaluation of a raw image whose shorter side is R: the exact center window", "[augment]") {
  TempDir dir;
  const int64_t n = 3, h = 32, w = 40, c = 3;
  std::vector<uint8_t> img(size_t(n * h * w * c));
  std::mt19937 rng(2);
  for (auto& v : img) v = uint8_t(rng());
  std::vector<int32_t> lab{0, 1, 2};
  const std::string path = dir.file("raw.h5");
  dtrain::io::write_dataset(path, img, n, h, w, c, lab, 3);
  dtrain::io::Hdf5Dataset ds(path);
  dtrain::io::InputTransform t;
  t.input = ImageShape{28, 28, 3};
  t.resize = 32;
  t.train = false;
  // A raw file of another size is refused unless fitting is asked for (augment crop/rrc or eval-resize).
  CHECK_THAT(usage_error_message([&] { dtrain::io::check_transform(ds, t); }),
             Contains(path) && Contains("32×40×3") && Contains("expects 28×28×3"));
  t.fit_raw = true;
  CHECK_NOTHROW(dtrain::io::check_transform(ds, t));
  // The training loader takes the same flag (a run with --augment none --eval-resize R
  // on such a file was refused by the loader after the job's own check accepted it).
  dtrain::io::PrefetchOptions po;
  po.threads = 1;
  po.input = t.input;
  po.resize = 32;
  CHECK_THAT(usage_error_message([&] { dtrain::io::Prefetcher pf(ds, dtrain::io::Sampler(ds.n(), 1, 0, 3, 1), po); }),
             Contains("expects 28×28×3"));
  po.fit_raw = true;
  {
    dtrain::io::Prefetcher pf(ds, dtrain::io::Sampler(ds.n(), 1, 0, 3, 1), po);
    CHECK(pf.next().step == 0);
  }
  const dtrain::io::NormalizeTable norm(3, {}, {});
  std::vector<float> out(size_t(n * 28 * 28 * 3));
  dtrain::io::load_batch(ds, {0, 1, 2}, t, norm, 0, 0, 2, out.data());
  int64_t bad = 0;  // window at ((32 − 28)/2, (40 − 28)/2) = (2, 6)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < 28; ++y)
        for (int64_t x = 0; x < 28; ++x)
          bad += out[size_t(((i * 3 + ch) * 28 + y) * 28 + x)] !=
                 norm.channel(ch)[img[size_t(((i * h + y + 2) * w + x + 6) * c + ch)]];
  CHECK(bad == 0);
  // Luma for a 1-channel input: (19595 R + 38470 G + 7471 B + 2^15) >> 16 of the same window.
  t.input = ImageShape{28, 28, 1};
  const dtrain::io::NormalizeTable norm1(1, {}, {});
  dtrain::io::load_batch(ds, {1}, t, norm1, 0, 0, 1, out.data());
  const uint8_t* px = &img[size_t(((1 * h + 2) * w + 6) * c)];
  CHECK(out[0] == norm1.channel(0)[(19595u * px[0] + 38470u * px[1] + 7471u * px[2] + 0x8000u) >> 16]);
}

TEST_CASE("the resampler: bilinear with the centre convention, windows, copies", "[augment]") {
  using dtrain::io::resample;
  // Upsizing 1 × 3 → 1 × 5: output x samples input (x + ½)·3/5 − ½, bilinear, edges replicated.
  const uint8_t row[3] = {0, 240, 120};
  uint8_t up[5];
  resample(row, 1, 3, 1, Rect{0, 0, 1, 3}, 1, 5, Rect{0, 0, 1, 5}, up);
  CHECK(std::vector<int>(up, up + 5) == std::vector<int>{0, 96, 240, 168, 120});
  // Downsizing a ramp 0, 30, …, 210 by 2: the triangle filter of support 2 (PIL's BILINEAR):
  // interior outputs 75 and 135 exactly; the edges replicate (PIL renormalises: 21.4, 188.6).
  uint8_t ramp[8], down[4];
  for (int i = 0; i < 8; ++i) ramp[i] = uint8_t(30 * i);
  resample(ramp, 1, 8, 1, Rect{0, 0, 1, 8}, 1, 4, Rect{0, 0, 1, 4}, down);
  CHECK(int(down[1]) == 75);
  CHECK(int(down[2]) == 135);
  // A constant image stays constant, up and down, in every channel.
  std::vector<uint8_t> flat(20 * 30 * 3, 77), o1(45 * 13 * 3), o2(7 * 9 * 3);
  resample(flat.data(), 20, 30, 3, Rect{2, 3, 15, 20}, 45, 13, Rect{0, 0, 45, 13}, o1.data());
  resample(flat.data(), 20, 30, 3, Rect{0, 0, 20, 30}, 7, 9, Rect{0, 0, 7, 9}, o2.data());
  CHECK(std::all_of(o1.begin(), o1.end(), [](uint8_t v) { return v == 77; }));
  CHECK(std::all_of(o2.begin(), o2.end(), [](uint8_t v) { return v == 77; }));
  // A window of the resized region is that part of the whole resized region.
  std::vector<uint8_t> img(50 * 60 * 3);
  std::mt19937 rng(4);
  for (auto& v : img) v = uint8_t(rng());
  std::vector<uint8_t> whole(70 * 44 * 3), part(20 * 30 * 3);
  const Rect from{5, 7, 40, 33};
  resample(img.data(), 50, 60, 3, from, 70, 44, Rect{0, 0, 70, 44}, whole.data());
  resample(img.data(), 50, 60, 3, from, 70, 44, Rect{10, 4, 20, 30}, part.data());
  int64_t bad = 0;
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 30 * 3; ++x) bad += part[size_t(y * 90 + x)] != whole[size_t((y + 10) * 132 + 12 + x)];
  CHECK(bad == 0);
  // No resize: a copy.
  std::vector<uint8_t> copy(40 * 33 * 3);
  resample(img.data(), 50, 60, 3, from, 40, 33, Rect{0, 0, 40, 33}, copy.data());
  CHECK(copy[0] == img[size_t((5 * 60 + 7) * 3)]);
  CHECK_THROWS(resample(img.data(), 50, 60, 3, Rect{20, 20, 40, 40}, 10, 10, Rect{0, 0, 10, 10}, copy.data()));
}

TEST_CASE("libswscale and libvips agree: centre-convention bilinear, antialiased downsizing", "[augment]") {
  using dtrain::io::resample;
  using dtrain::io::Resampler;
  std::mt19937 rng(8);
  const int64_t h = 40, w = 50;
  for (int64_t c : {1, 3}) {
    std::vector<uint8_t> img(size_t(h * w * c));
    for (auto& v : img) v = uint8_t(rng());
    // Upsizing a region 20 × 30 at (7, 9) to 45 × 61: both within 1 grey level of exact
    // centre-convention bilinear interpolation with replicated edges (computed here in double).
    const Rect from{7, 9, 20, 30};
    const int64_t rh = 45, rw = 61;
    std::vector<uint8_t> a(size_t(rh * rw * c)), b(a.size());
    resample(img.data(), h, w, c, from, rh, rw, Rect{0, 0, rh, rw}, a.data(), Resampler::swscale);
    resample(img.data(), h, w, c, from, rh, rw, Rect{0, 0, rh, rw}, b.data(), Resampler::vips);
    auto at = [&](int64_t y, int64_t x, int64_t ch) { return double(img[size_t(((from.y + y) * w + from.x + x) * c + ch)]); };
    double worst_a = 0, worst_b = 0;
    for (int64_t y = 0; y < rh; ++y)
      for (int64_t x = 0; x < rw; ++x) {
        const double sy = std::clamp((double(y) + 0.5) * double(from.h) / double(rh) - 0.5, 0.0, double(from.h - 1));
        const double sx = std::clamp((double(x) + 0.5) * double(from.w) / double(rw) - 0.5, 0.0, double(from.w - 1));
        const int64_t y0 = std::min<int64_t>(int64_t(sy), from.h - 2), x0 = std::min<int64_t>(int64_t(sx), from.w - 2);
        const double fy = sy - double(y0), fx = sx - double(x0);
        for (int64_t ch = 0; ch < c; ++ch) {
          const double ref = (1 - fy) * ((1 - fx) * at(y0, x0, ch) + fx * at(y0, x0 + 1, ch)) +
                             fy * ((1 - fx) * at(y0 + 1, x0, ch) + fx * at(y0 + 1, x0 + 1, ch));
          worst_a = std::max(worst_a, std::abs(ref - a[size_t((y * rw + x) * c + ch)]));
          worst_b = std::max(worst_b, std::abs(ref - b[size_t((y * rw + x) * c + ch)]));
        }
      }
    CHECK(worst_a <= 1.0);
    CHECK(worst_b <= 1.0);
    // Downsizing the whole image to 17 × 23 (and a mixed case): the two libraries' triangle filters
    // agree within 2 grey levels, mostly exactly.
    for (auto [dh, dw] : {std::pair<int64_t, int64_t>{17, 23}, {60, 31}}) {
      std::vector<uint8_t> p(size_t(dh * dw * c)), q(p.size());
      resample(img.data(), h, w, c, Rect{0, 0, h, w}, dh, dw, Rect{0, 0, dh, dw}, p.data(), Resampler::swscale);
      resample(img.data(), h, w, c, Rect{0, 0, h, w}, dh, dw, Rect{0, 0, dh, dw}, q.data(), Resampler::vips);
      int worst = 0;
      double sum = 0;
      for (size_t i = 0; i < p.size(); ++i) {
        worst = std::max(worst, std::abs(int(p[i]) - int(q[i])));
        sum += std::abs(int(p[i]) - int(q[i]));
      }
      INFO(dh << "x" << dw << "x" << c << ": mean difference " << sum / double(p.size()));
      CHECK(worst <= 2);  // fixed-point rounding of two implementations
      CHECK(sum / double(p.size()) < 0.5);
    }
  }
  // automatic: swscale from kMinSwscaleSide on, libvips below (and for 2 or 4 channels).
  std::vector<uint8_t> img(16 * 16 * 3, 9), o(16 * 16 * 3);
  CHECK_THROWS(resample(img.data(), 16, 16, 3, Rect{0, 0, 7, 16}, 9, 9, Rect{0, 0, 9, 9}, o.data(), Resampler::swscale));
  CHECK_NOTHROW(resample(img.data(), 16, 16, 3, Rect{0, 0, 7, 16}, 9, 9, Rect{0, 0, 9, 9}, o.data()));
}

TEST_CASE("DCT scaling: the denominator, the scaled plan, and pixels close to a full decode", "[augment]") {
  SamplePlan p;
  p.from = Rect{0, 0, 1000, 1000};
  p.rh = p.rw = 224;
  CHECK(dtrain::io::dct_denominator(p) == 4);  // 1000 ≥ 4·224 = 896, < 8·224
  p.from = Rect{100, 50, 447, 600};
  CHECK(dtrain::io::dct_denominator(p) == 1);  // 447 < 2·224
  p.from = Rect{101, 50, 460, 900};
  CHECK(dtrain::io::dct_denominator(p) == 2);
  const SamplePlan q = dtrain::io::scale_plan(p, 2, 1001, 1001);
  CHECK(q.from == Rect{50, 25, 230, 450});  // 101/2 = 50.5 → 50 (half to even), 561/2 = 280.5 → 280
  p.from = Rect{0, 0, 1001, 999};
  CHECK(dtrain::io::scale_plan(p, 4, 1001, 999).from == Rect{0, 0, 251, 250});  // whole stays whole

  // Eval of a 600 × 800 picture to 224 with R = 256: decode at 1/2 (300 × 400 → 256 × 341) vs full.
  TempDir dir;
  const dtrain::test::FashionImages f = dtrain::test::fashion_images(2);
  const auto rgb = dtrain::test::fashion_rgb(f, 1, 600, 800);
  std::vector<dtrain::test::StoreImage> images{{dtrain::io::encode_jpeg(rgb.data(), 600, 800, 3, 92), 600, 800, 1}};
  const std::string path = dir.file("big.h5");
  dtrain::test::write_jpeg_store(path, images);
  auto ds = dtrain::io::open_dataset(path);
  dtrain::io::InputTransform t;
  t.input = ImageShape{224, 224, 3};
  t.train = false;
  const dtrain::io::NormalizeTable norm(3, {}, {});
  std::vector<float> scaled(224 * 224 * 3), full(224 * 224 * 3);
  dtrain::io::load_batch(*ds, {0}, t, norm, 0, 0, 1, scaled.data());
  t.dct_scaling = false;
  dtrain::io::load_batch(*ds, {0}, t, norm, 0, 0, 1, full.data());
  double diff = 0;
  for (size_t i = 0; i < full.size(); ++i) diff += std::abs(double(full[i]) - double(scaled[i]));
  CHECK(diff / double(full.size()) < 3.0 / 255.0);  // a mean difference below 3 grey levels
  CHECK(scaled != full);                            // and it did take the other path
}

TEST_CASE("augment options: keys, values and conflicts", "[augment][config]") {
  using dtrain::engine::TrainConfig;
  auto usage = [](const std::vector<std::string>& args) {
    TrainConfig c;
    try {
      dtrain::engine::parse_train_args(args, c);
    } catch (const dtrain::UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TrainConfig c;
  REQUIRE(dtrain::engine::parse_train_args({"--train-data", "x.h5", "--augment", "rrc", "--augment-flip", "true",
                                            "--rrc-scale", "0.25,1", "--rrc-ratio", "3/4,4/3", "--eval-resize", "288",
                                            "--dct-scaling", "false"},
                                           c));
  CHECK(c.augment == CropMode::rrc);
  CHECK(c.augment_flip);
  CHECK(c.rrc_scale_min == 0.25);
  CHECK(c.rrc_ratio_min == 0.75);
  CHECK(std::abs(c.rrc_ratio_max - 4.0 / 3.0) < 1e-15);
  CHECK(c.eval_resize == 288);
  CHECK_FALSE(c.dct_scaling);
  CHECK(dtrain::engine::range_text(0.75, 4.0 / 3.0) == "3/4,4/3");
  // Spaces around a fraction's '/' as around the comma ("3 / 4, 4/3" in a job file).
  TrainConfig spaced;
  REQUIRE(dtrain::engine::parse_train_args({"--train-data", "x.h5", "--rrc-ratio", " 3 / 4 , 4/ 3"}, spaced));
  CHECK(spaced.rrc_ratio_min == 0.75);
  CHECK(spaced.rrc_ratio_max == c.rrc_ratio_max);
  // A fraction's parts are positive: 3/0 was "not a range", -3/-4 was 0.75.
  CHECK_THAT(usage({"--train-data", "x.h5", "--rrc-ratio", "3/0,1"}),
             Contains("option 'rrc-ratio': '3/0' in '3/0,1': a fraction's numerator and denominator must be positive"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--rrc-ratio", "-3/-4,1"}),
             Contains("'-3/-4' in '-3/-4,1': a fraction's numerator and denominator must be positive"));
  // Invisible bytes in a list or range are shown, not printed raw.
  CHECK_THAT(usage({"--train-data", "x.h5", "--rrc-scale", "0.08\f,1"}), Contains("'0.08\\x0c,1'"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--mean", "0.5\f"}), Contains("'0.5\\x0c'"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--augment", "random"}), Contains("option 'augment'") && Contains("none, crop or rrc"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--augment", "rrc", "--augment-pad", "4"}),
             Contains("option 'augment-pad'") && Contains("augment none only"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--rrc-scale", "0.5,0.1"}), Contains("option 'rrc-scale'"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--rrc-scale", "0,1"}), Contains("option 'rrc-scale'"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--rrc-ratio", "a,b"}), Contains("option 'rrc-ratio'"));
  CHECK_THAT(usage({"--train-data", "x.h5", "--eval-resize", "-1"}), Contains("option 'eval-resize'"));
  const std::string help = dtrain::engine::train_help();
  for (const char* key : {"--augment ", "--eval-resize", "--rrc-scale", "--rrc-ratio", "--dct-scaling", "--augment-pad"})
    CHECK_THAT(help, Contains(key));
}
