// io/resample.cpp — resample() over libswscale, and libvips for small sizes (resample.hpp).
#include "io/resample.hpp"

#include <vips/vips.h>
extern "C" {
#include <libavutil/mem.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "io/image_codec.hpp"  // init_vips: one libvips set-up for the converter and the loader

namespace dtrain::io {

namespace {

// ---- libswscale: planar 8-bit scaling, per-thread context and buffers --------

constexpr int64_t kAlign = 64;  // swscale's SIMD wants aligned lines; lines are padded to this
int64_t aligned(int64_t w) { return (w + kAlign - 1) / kAlign * kAlign; }

struct SwsScratch {
  SwsContext* ctx = nullptr;
  uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  size_t in_bytes = 0, out_bytes = 0;
  ~SwsScratch() {
    sws_freeContext(ctx);
    av_free(in);
    av_free(out);
  }
  static uint8_t* grow(uint8_t*& p, size_t& have, size_t want) {
    if (want > have) {
      av_free(p);
      p = static_cast<uint8_t*>(av_malloc(want));
      DT_CHECK(p != nullptr, "resample: out of memory (", want, " bytes)");
      have = want;
    }
    return p;
  }
};

// The region `from` of src (c = 1 or 3) scaled to rh × rw, window `take` → out (HWC).
void resample_swscale(const uint8_t* src, int64_t w, int64_t c, const Rect& from, int64_t rh, int64_t rw,
                      const Rect& take, uint8_t* out) {
  thread_local SwsScratch s;
  const int64_t ls_in = aligned(from.w), ls_out = aligned(rw);
  // Planes: gray, or R, G, B, each scaled alike.
  static constexpr int kPlaneOfRgb[3] = {0, 1, 2};
  uint8_t* in = SwsScratch::grow(s.in, s.in_bytes, size_t(c * ls_in * from.h + kAlign));
  uint8_t* o = SwsScratch::grow(s.out, s.out_bytes, size_t(c * ls_out * rh + kAlign));
  for (int64_t y = 0; y < from.h; ++y) {
    const uint8_t* row = src + ((from.y + y) * w + from.x) * c;
    if (c == 1) {
      std::memcpy(in + y * ls_in, row, size_t(from.w));
      continue;
    }
    uint8_t* p[3];
    for (int k = 0; k < 3; ++k) p[k] = in + (kPlaneOfRgb[k] * from.h + y) * ls_in;
    for (int64_t x = 0; x < from.w; ++x) {
      p[0][x] = row[3 * x];
      p[1][x] = row[3 * x + 1];
      p[2][x] = row[3 * x + 2];
    }
  }
  // One GRAY8 scaler for every plane (its luma path): GBRP would go through
  // swscale's internal YUV and lose up to ~30 grey levels.
  s.ctx = sws_getCachedContext(s.ctx, int(from.w), int(from.h), AV_PIX_FMT_GRAY8, int(rw), int(rh),
                               AV_PIX_FMT_GRAY8, SWS_BILINEAR | SWS_ACCURATE_RND | SWS_BITEXACT, nullptr, nullptr,
                               nullptr);
  if (!s.ctx) DT_FAIL("libswscale: no scaler for ", from.h, "x", from.w, " → ", rh, "x", rw);
  for (int64_t k = 0; k < c; ++k) {
    const uint8_t* sp[4] = {in + k * from.h * ls_in, nullptr, nullptr, nullptr};
    uint8_t* dp[4] = {o + k * rh * ls_out, nullptr, nullptr, nullptr};
    const int ss[4] = {int(ls_in), 0, 0, 0}, ds[4] = {int(ls_out), 0, 0, 0};
    const int got = sws_scale(s.ctx, sp, ss, 0, int(from.h), dp, ds);
    if (got != rh) DT_FAIL("libswscale: scaled ", got, " of ", rh, " rows");
  }
  for (int64_t y = 0; y < take.h; ++y) {
    uint8_t* dst = out + y * take.w * c;
    if (c == 1) {
      std::memcpy(dst, o + (take.y + y) * ls_out + take.x, size_t(take.w));
      continue;
    }
    const uint8_t* p[3];
    for (int k = 0; k < 3; ++k) p[k] = o + (kPlaneOfRgb[k] * rh + take.y + y) * ls_out + take.x;
    for (int64_t x = 0; x < take.w; ++x) {
      dst[3 * x] = p[0][x];
      dst[3 * x + 1] = p[1][x];
      dst[3 * x + 2] = p[2][x];
    }
  }
}

// ---- libvips: small sizes and other channel counts ---------------------------

std::string vips_message() {
  char* m = vips_error_buffer_copy();
  std::string s = m ? m : "";
  g_free(m);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// An owning VipsImage*.
struct Img {
  VipsImage* p = nullptr;
  Img() = default;
  explicit Img(VipsImage* q) : p(q) {}
  ~Img() {
    if (p) g_object_unref(p);
  }
  Img(const Img&) = delete;
  Img& operator=(const Img&) = delete;
  Img& operator=(Img&& o) noexcept {
    if (this != &o) {
      if (p) g_object_unref(p);
      p = o.p;
      o.p = nullptr;
    }
    return *this;
  }
};

void check(int rc, const char* op) {
  if (rc != 0) DT_FAIL("libvips: ", op, " failed: ", vips_message());
}

bool inside(const Rect& r, int64_t h, int64_t w) {
  return r.h >= 1 && r.w >= 1 && r.y >= 0 && r.x >= 0 && r.y + r.h <= h && r.x + r.w <= w;
}

}  // namespace

void resample(const uint8_t* src, int64_t h, int64_t w, int64_t c, const Rect& from, int64_t rh,
              int64_t rw, const Rect& take, uint8_t* out, Resampler lib) {
  DT_CHECK(h >= 1 && w >= 1 && c >= 1 && c <= 4, "resample: image ", h, "x", w, "x", c);
  DT_CHECK(inside(from, h, w), "resample: region (", from.y, ", ", from.x, ") ", from.h, "x", from.w,
           " outside the ", h, "x", w, " image");
  DT_CHECK(rh >= 1 && rw >= 1 && inside(take, rh, rw), "resample: window (", take.y, ", ", take.x, ") ",
           take.h, "x", take.w, " outside the resized ", rh, "x", rw);
  if (rh == from.h && rw == from.w) {  // no resampling: a copy of a window
    const int64_t row = take.w * c;
    for (int64_t y = 0; y < take.h; ++y)
      std::memcpy(out + y * row, src + ((from.y + take.y + y) * w + from.x + take.x) * c, size_t(row));
    return;
  }
  const bool swscale_fits = (c == 1 || c == 3) && std::min({from.h, from.w, rh, rw}) >= kMinSwscaleSide;
  DT_CHECK(lib != Resampler::swscale || swscale_fits, "resample: libswscale needs 1 or 3 channels and sizes >= ",
           kMinSwscaleSide, " (", from.h, "x", from.w, "x", c, " → ", rh, "x", rw, ")");
  if (swscale_fits && lib != Resampler::vips) {
    resample_swscale(src, w, c, from, rh, rw, take, out);
    return;
  }
  init_vips();
  Img img(vips_image_new_from_memory(src, size_t(h * w * c), int(w), int(h), int(c), VIPS_FORMAT_UCHAR));
  if (!img.p) DT_FAIL("libvips: wrapping a ", h, "x", w, "x", c, " image failed: ", vips_message());
  auto step = [&](int rc, VipsImage* next, const char* op) {
    Img n(next);
    check(rc, op);
    img = std::move(n);
  };
  VipsImage* t = nullptr;
  if (from.y != 0 || from.x != 0 || from.h != h || from.w != w) {
    const int rc = vips_extract_area(img.p, &t, int(from.x), int(from.y), int(from.w), int(from.h), nullptr);
    step(rc, t, "extract_area");
  }
  if (rh < from.h) {
    t = nullptr;
    const int rc = vips_reducev(img.p, &t, double(from.h) / double(rh), "kernel", VIPS_KERNEL_LINEAR, "gap",
                                0.0, nullptr);
    step(rc, t, "reducev");
  }
  if (rw < from.w) {
    t = nullptr;
    const int rc = vips_reduceh(img.p, &t, double(from.w) / double(rw), "kernel", VIPS_KERNEL_LINEAR, "gap",
                                0.0, nullptr);
    step(rc, t, "reduceh");
  }
  if (rh > from.h || rw > from.w) {
    const double sy = double(rh) / double(img.p->Ysize), sx = double(rw) / double(img.p->Xsize);
    VipsInterpolate* bilinear = vips_interpolate_new("bilinear");
    if (!bilinear) DT_FAIL("libvips: no bilinear interpolator: ", vips_message());
    VipsArrayInt* area = vips_array_int_newv(4, 0, 0, int(rw), int(rh));
    t = nullptr;
    const int rc = vips_affine(img.p, &t, sx, 0.0, 0.0, sy, "interpolate", bilinear, "idx", 0.5, "idy", 0.5,
                               "odx", -0.5, "ody", -0.5, "oarea", area, "extend", VIPS_EXTEND_COPY, nullptr);
    vips_area_unref(VIPS_AREA(area));
    g_object_unref(bilinear);
    step(rc, t, "affine");
  }
  DT_CHECK(img.p->Ysize == rh && img.p->Xsize == rw, "libvips: resized to ", img.p->Ysize, "x", img.p->Xsize,
           ", expected ", rh, "x", rw);

  // Pull the window through a region in this thread.
  VipsRegion* region = vips_region_new(img.p);
  if (!region) DT_FAIL("libvips: region: ", vips_message());
  VipsRect rect{int(take.x), int(take.y), int(take.w), int(take.h)};
  if (vips_region_prepare(region, &rect) != 0) {
    g_object_unref(region);
    DT_FAIL("libvips: computing a ", take.h, "x", take.w, " window failed: ", vips_message());
  }
  const size_t row = size_t(take.w * c);
  for (int64_t y = 0; y < take.h; ++y)
    std::memcpy(out + size_t(y) * row, VIPS_REGION_ADDR(region, int(take.x), int(take.y + y)), row);
  g_object_unref(region);
}

void resize_image(const uint8_t* src, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow, uint8_t* out) {
  resample(src, h, w, c, Rect{0, 0, h, w}, oh, ow, Rect{0, 0, oh, ow}, out);
}

}  // namespace dtrain::io
