// tests/test_formats.cpp — activation formats (layers/format.hpp) on the "cpu"
// backend: bf16 rounding, conversions between every pair of formats, the
// elementwise functions on blocked and bf16 tensors against the plain float32
// ones, and the one-pass SGD over arena segments against the per-range update.
// The Net's plans (fusion, formats, bf16) are tests/test_net_plan.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "bf16_edges.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/sgd.hpp"

using namespace dtrain::layers;

namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A tensor of shape s in format f on backend be, holding the plain float32 values v.
Tensor make(Backend& be, std::vector<std::shared_ptr<float>>& keep, const Shape& s, const Format& f,
            const std::vector<float>* v = nullptr) {
  keep.push_back(be.allocate((f.bytes(s) + 3) / 4));
  Tensor t = Tensor::view(keep.back().get(), s, f);
  if (v) be.convert(Tensor::view(const_cast<float*>(v->data()), s), t);
  return t;
}

std::vector<float> plain_values(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  Tensor out = Tensor::view(v.data(), t.shape());
  be.convert(t, out);
  return v;
}

const Format kFormats[] = {Format::plain(),         Format::blocked(16), Format::blocked(8), Format::nhwc(),
                           Format::plain(DType::bf16), Format::blocked(16, DType::bf16), Format::nhwc(DType::bf16)};

}  // namespace

TEST_CASE("Format sizes count the padding channels", "[format]") {
  const Shape s(2, 5, 3, 4);
  CHECK(Format::plain().elements(s) == 120);
  CHECK(Format::plain().bytes(s) == 480);
  CHECK(Format::blocked(16).elements(s) == 2 * 16 * 12);
  CHECK(Format::blocked(8, DType::bf16).bytes(s) == 2 * 8 * 12 * 2);
  CHECK(Format::blocked(16).elements(Shape(1, 32, 1, 1)) == 32);
  CHECK(Format::blocked(16, DType::bf16).str() == "bf16 nChw16c");
  CHECK(Format::plain().str() == "f32 nchw");
  CHECK(Format::nhwc().elements(s) == 120);  // channels last: no padding
  CHECK(Format::nhwc(DType::bf16).bytes(s) == 240);
  CHECK(Format::nhwc(DType::bf16).str() == "bf16 nhwc");
  CHECK(Format::nhwc() != Format::plain());
  CHECK(Format::nhwc().for_shape(s) == Format::nhwc());
  CHECK(Format::nhwc(DType::bf16).for_shape(Shape(2, 64, 1, 1)) == Format::plain(DType::bf16));  // one pixel
  CHECK(Format::nhwc().for_shape(Shape(2, 1, 28, 28)) == Format::plain());                       // one channel
  CHECK(Format::blocked(16).for_shape(Shape(2, 64, 1, 1)) == Format::blocked(16));
  CHECK(parse_precision("bf16") == DType::bf16);
  CHECK(parse_precision("fp32") == DType::f32);
  CHECK_THROWS_WITH(parse_precision("fp16"), Catch::Contains("option 'precision'"));
}

TEST_CASE("bf16 rounds to nearest even and keeps NaN, infinities and signs", "[format]") {
  CHECK(round_bf16(1.0f) == 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  CHECK(round_bf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  CHECK(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(round_bf16(-2.5f) == -2.5f);
  CHECK(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::signaling_NaN()))));
  CHECK(round_bf16(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(round_bf16(3.4e38f) == std::numeric_limits<float>::infinity());  // above bf16's largest finite (3.3895e38)
  for (float x : randn(1000, 3)) CHECK(std::fabs(round_bf16(x) - x) <= std::fabs(x) * std::ldexp(1.0f, -8));
}

TEST_CASE("bf16 bits of the rounding's edge values: ties, overflow, infinities, NaN, zeros, subnormals",
          "[format]") {
  for (const auto& e : dtrain::test::kBf16Edges) {
    INFO(e.what << ": 0x" << std::hex << e.f32);
    CHECK(to_bf16(dtrain::test::f32_of(e.f32)) == e.bf16);
  }
}

TEST_CASE("cpu backend converts between every pair of formats", "[format][onednn]") {
  auto be = make_cpu_backend();
  std::vector<std::shared_ptr<float>> keep;
  for (const Shape& s : {Shape(3, 5, 7, 7), Shape(2, 17, 3, 5), Shape(2, 32, 1, 1)}) {
    const std::vector<float> v = randn(static_cast<size_t>(s.numel()), 11);
    for (const Format& a : kFormats)
      for (const Format& b : kFormats) {
        Tensor ta = make(*be, keep, s, a, &v);
        Tensor tb = make(*be, keep, s, b);
        std::memset(tb.raw(), 0x7f, tb.bytes());  // garbage in the padding too
        be->convert(ta, tb);
        const std::vector<float> back = plain_values(*be, tb);
        const bool bf16 = a.dtype == DType::bf16 || b.dtype == DType::bf16;
        INFO(s.str() << " " << a.str() << " → " << b.str());
        for (size_t i = 0; i < v.size(); ++i) REQUIRE(back[i] == (bf16 ? round_bf16(v[i]) : v[i]));
        if (b.is_nhwc()) {  // channel c of pixel p at p·C + c
          const int64_t pix = s.h() * s.w();
          for (int64_t i = 0; i < s.numel(); ++i) {
            const int64_t n = i / (s.c() * pix), c = i / pix % s.c(), p = i % pix;
            const size_t at = static_cast<size_t>((n * pix + p) * s.c() + c);
            const float x = b.dtype == DType::f32 ? tb.data()[at]
                                                   : from_bf16(static_cast<const uint16_t*>(tb.raw())[at]);
            REQUIRE(x == (bf16 ? round_bf16(v[static_cast<size_t>(i)]) : v[static_cast<size_t>(i)]));
          }
        } else if (!b.is_plain()) {  // the padding channels are zero
          const int64_t cb = b.cblock, blocks = (s.c() + cb - 1) / cb, pix = s.h() * s.w();
          for (int64_t n = 0; n < s.n(); ++n)
            for (int64_t c = s.c(); c < blocks * cb; ++c)
              for (int64_t p = 0; p < pix; ++p) {
                const size_t at = static_cast<size_t>(((n * blocks + c / cb) * pix + p) * cb + c % cb);
                const float x = b.dtype == DType::f32 ? tb.data()[at]
                                                       : from_bf16(static_cast<const uint16_t*>(tb.raw())[at]);
                REQUIRE(x == 0.0f);
              }
        }
      }
  }
}

TEST_CASE("cpu backend elementwise functions in every format equal the plain f32 ones", "[format][onednn]") {
  auto be = make_cpu_backend();
  auto ref = make_reference_backend();
  std::vector<std::shared_ptr<float>> keep;
  const Shape s(3, 20, 5, 3);
  const size_t n = static_cast<size_t>(s.numel());
  const std::vector<float> a = randn(n, 1), b = randn(n, 2), g = randn(n, 3);
  // oneDNN makes no bf16 eltwise/binary primitives where the CPU lacks
  // AVX512-BF16 and AMX; there bf16 is refused before any net is built
  // (Backend::precision_unsupported), so only the f32 formats are reachable.
  const std::string no_bf16 = be->precision_unsupported(DType::bf16);
  if (!no_bf16.empty()) WARN("bf16 formats not run: " << no_bf16);
  size_t ran = 0;
  for (const Format& f : kFormats) {
    INFO(f.str());
    const bool bf16 = f.dtype == DType::bf16;
    if (bf16 && !no_bf16.empty()) continue;
    ++ran;
    auto r = [&](float x) { return bf16 ? round_bf16(x) : x; };
    // The plain f32 reference on the values as f stores them.
    std::vector<float> ar(n), br(n), gr(n);
    for (size_t i = 0; i < n; ++i) ar[i] = r(a[i]), br[i] = r(b[i]), gr[i] = r(g[i]);
    Tensor ta = make(*be, keep, s, f, &a), tb = make(*be, keep, s, f, &b), tg = make(*be, keep, s, f, &g);
    Tensor ty = make(*be, keep, s, f);

    std::vector<float> want(n);
    be->relu(ta, ty);
    ref->relu_forward(ar.data(), want.data(), n);
    CHECK(plain_values(*be, ty) == want);

    be->relu_grad(ty, tg, ty);  // in place, as the Net masks a fused ReLU's gradient
    std::vector<float> y(n);
    ref->relu_forward(ar.data(), y.data(), n);
    ref->relu_backward(y.data(), gr.data(), want.data(), n);
    CHECK(plain_values(*be, ty) == want);

    for (bool relu : {false, true}) {
      be->sum(ta, tb, ty, relu);
      for (size_t i = 0; i < n; ++i) want[i] = r(relu ? std::max(ar[i] + br[i], 0.0f) : ar[i] + br[i]);
      CHECK(plain_values(*be, ty) == want);
    }
    be->convert(tb, ty);
    be->accumulate_into(ta, ty);
    for (size_t i = 0; i < n; ++i) want[i] = r(ar[i] + br[i]);
    CHECK(plain_values(*be, ty) == want);

    if (f.is_plain()) {  // dropout: plain formats (the mask follows the NCHW index)
      std::vector<float> mask(n), mask_ref(n);
      be->dropout(ta, ty, mask.data(), 0.3f, 77);
      ref->dropout_forward(ar.data(), want.data(), mask_ref.data(), n, 0.3f, 77);
      CHECK(mask == mask_ref);
      for (size_t i = 0; i < n; ++i) want[i] = r(want[i]);
      CHECK(plain_values(*be, ty) == want);
      be->dropout_grad(mask.data(), tg, ty);
      ref->dropout_backward(mask_ref.data(), gr.data(), want.data(), n);
      for (size_t i = 0; i < n; ++i) want[i] = r(want[i]);
      CHECK(plain_values(*be, ty) == want);
    } else {
      std::vector<float> mask(n);
      CHECK_THROWS_WITH(be->dropout(ta, ty, mask.data(), 0.3f, 77), Catch::Contains("plain"));
    }
  }
  CHECK(ran >= 4);  // the four f32 formats at least
  // Operands of different formats are refused, naming the function.
  Tensor p = make(*be, keep, s, Format::plain(), &a), q = make(*be, keep, s, Format::blocked(16));
  CHECK_THROWS_WITH(be->relu(p, q), Catch::Contains("relu"));
  // The defaults of backend.hpp take plain f32 only.
  CHECK_THROWS_WITH(ref->convert(p, q), Catch::Contains("f32 nchw"));
}

TEST_CASE("SGD over arena segments in one pass equals the per-range update", "[format][onednn][sgd]") {
  auto be = make_cpu_backend();
  const size_t count = 300001;
  const std::vector<float> p0 = randn(count, 5), g = randn(count, 6), m0 = randn(count, 7);
  // Ranges of odd lengths with alternating decay, and a gap the update must not touch.
  std::vector<Backend::SgdSegment> segs{{0, 1000, 0.01f}, {1000, 1003, 0.0f}, {1003, 150001, 0.01f},
                                        {150010, 300001, 0.0f}};
  const int restore = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int threads : {1, 2, 3}) {
    set_cpu_threads(threads);
    std::vector<float> pa = p0, ma = m0, pb = p0, mb = m0;
    be->sgd_update_segments(pa.data(), g.data(), ma.data(), segs.data(), segs.size(), 0.1f, 0.9f);
    for (const auto& s : segs)
      be->sgd_update(pb.data() + s.begin, g.data() + s.begin, mb.data() + s.begin, s.end - s.begin, 0.1f, 0.9f,
                     s.weight_decay);
    INFO(threads << " thread(s)");
    CHECK(pa == pb);
    CHECK(ma == mb);
    CHECK(pa[150005] == p0[150005]);  // the gap
  }
  set_cpu_threads(restore);
}

TEST_CASE("SGD out of place (a server's two generations) is bitwise the in-place update and reads only its inputs",
          "[format][onednn][sgd]") {
  auto cpu = make_cpu_backend();
  auto ref = make_reference_backend();
  const size_t count = 300001;
  const std::vector<float> p0 = randn(count, 11), g = randn(count, 12), m0 = randn(count, 13);
  std::vector<Backend::SgdSegment> segs{{3, 1000, 0.01f}, {1000, 1003, 0.0f}, {1003, 150001, 0.01f},
                                        {150010, 300001, 0.0f}};
  const float untouched = -7.5f;
  const int restore = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (Backend* be : {cpu.get(), ref.get()}) {
    for (int threads : {1, 2, 3}) {
      INFO(be->name() << ", " << threads << " thread(s)");
      set_cpu_threads(threads);
      std::vector<float> pa = p0, ma = m0;
      be->sgd_update_segments(pa.data(), g.data(), ma.data(), segs.data(), segs.size(), 0.1f, 0.9f);
      const std::vector<float> pin = p0, min = m0;
      std::vector<float> pout(count, untouched), mout(count, untouched);
      be->sgd_update_segments_into(pin.data(), min.data(), pout.data(), mout.data(), g.data(), segs.data(),
                                   segs.size(), 0.1f, 0.9f);
      CHECK(pin == p0);  // the old generation stays as it was
      CHECK(min == m0);
      size_t wrong = 0, touched = 0;
      for (size_t i = 0, k = 0; i < count; ++i) {
        while (k < segs.size() && segs[k].end <= i) ++k;
        if (k < segs.size() && i >= segs[k].begin)
          wrong += pout[i] != pa[i] || mout[i] != ma[i];
        else
          touched += pout[i] != untouched || mout[i] != untouched;  // outside the segments: not written
      }
      CHECK(wrong == 0);
      CHECK(touched == 0);
      // In place through the same entry point (an input and its output the same arena).
      std::vector<float> pc = p0, mc = m0;
      be->sgd_update_segments_into(pc.data(), mc.data(), pc.data(), mc.data(), g.data(), segs.data(), segs.size(),
                                   0.1f, 0.9f);
      CHECK(pc == pa);
      CHECK(mc == ma);
    }
  }
  set_cpu_threads(restore);

  // Sgd::step_into over a net's ranges (decay off for biases): bitwise Sgd::step.
  SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 5e-4f;
  o.decay_bias_bn = false;
  std::vector<ParamRange> ranges{{"w1", 0, 5000, false}, {"b1", 5000, 7, true}, {"w2", 5007, 100000, false}};
  const size_t n = 105007;
  Sgd in_place(*cpu, o, ranges, n), out_of_place(*cpu, o, ranges, n);
  std::vector<float> pa(p0.begin(), p0.begin() + n), pb = pa, mb(n, 0.0f), pb2(n), mb2(n);
  const std::vector<float> gg(g.begin(), g.begin() + n);
  for (int step = 0; step < 3; ++step) {  // the generations alternate, as on a server
    in_place.step(pa.data(), gg.data(), 0.05f, 3, n - 11);
    out_of_place.step_into(pb.data(), mb.data(), pb2.data(), mb2.data(), gg.data(), 0.05f, 3, n - 11);
    std::copy_n(pb.begin(), 3, pb2.begin());  // outside [3, n − 11): not updated, as in place
    std::copy_n(pb.end() - 11, 11, pb2.end() - 11);
    std::swap(pb, pb2);
    std::swap(mb, mb2);
  }
  CHECK(pa == pb);
  CHECK(std::equal(mb.begin() + 3, mb.end() - 11, in_place.momentum_state() + 3));
  CHECK_THROWS_WITH(out_of_place.step_into(pb.data(), mb.data(), pb2.data(), mb2.data(), gg.data(), 0.05f, 0, n + 1),
                    Catch::Contains("outside the arena"));
}

TEST_CASE("SGD that writes the bf16 weight mirror: the same update, and bf16_bits of every updated parameter",
          "[format][onednn][sgd][bf16]") {
  auto cpu = make_cpu_backend();
  auto ref = make_reference_backend();
  const size_t count = 300001;
  const std::vector<float> p0 = randn(count, 8), g = randn(count, 9), m0 = randn(count, 10);
  // Segments that start and end off any vector or cache-line boundary, a gap the
  // update (and the mirror) must not touch, and a mirror whose start is not
  // aligned either (the vector stores begin after a scalar head).
  std::vector<Backend::SgdSegment> segs{{3, 1000, 0.01f}, {1000, 1003, 0.0f}, {1003, 150001, 0.01f},
                                        {150010, 300001, 0.0f}};
  const uint16_t untouched = 0xabcd;
  const int restore = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (Backend* be : {cpu.get(), ref.get()}) {
    for (int threads : {1, 2, 3}) {
      for (size_t shift : {0, 1, 7}) {
        INFO(be->name() << ", " << threads << " thread(s), mirror shifted by " << shift);
        set_cpu_threads(threads);
        std::vector<float> pa = p0, ma = m0, pb = p0, mb = m0;
        std::vector<uint16_t> store(count + shift, untouched);
        uint16_t* mirror = store.data() + shift;
        be->sgd_update_segments(pa.data(), g.data(), ma.data(), segs.data(), segs.size(), 0.1f, 0.9f, mirror);
        be->sgd_update_segments(pb.data(), g.data(), mb.data(), segs.data(), segs.size(), 0.1f, 0.9f);
        CHECK(pa == pb);  // bit for bit the update without the mirror
        CHECK(ma == mb);
        size_t wrong = 0;
        for (const auto& s : segs)
          for (size_t i = s.begin; i < s.end; ++i) wrong += mirror[i] != bf16_bits(pa[i]);
        CHECK(wrong == 0);
        for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{150001}, size_t{150009}}) CHECK(mirror[i] == untouched);
      }
    }
  }
  set_cpu_threads(restore);

  // The rounding's edges (tests/bf16_edges.hpp) inside the vector body: with
  // lr = 0 and zero gradient and momentum a finite parameter stays as it is
  // and its mirror must hold the table's bits; ±inf and NaN parameters turn
  // into NaNs (0·inf in the decay term), whose bits must be bf16_bits' too.
  std::vector<float> p(4096, 1.0f), z(4096, 0.0f), mom(4096, 0.0f);
  std::vector<uint16_t> mirror(4096, untouched);
  size_t at = 100;
  for (const auto& e : dtrain::test::kBf16Edges) {
    p[at] = std::bit_cast<float>(e.f32);
    at += 37;
  }
  const Backend::SgdSegment all{0, p.size(), 0.0f};
  cpu->sgd_update_segments(p.data(), z.data(), mom.data(), &all, 1, 0.0f, 0.9f, mirror.data());
  at = 100;
  for (const auto& e : dtrain::test::kBf16Edges) {
    INFO(e.what);
    CHECK(mirror[at] == bf16_bits(p[at]));
    if ((e.f32 & 0x7f800000u) != 0x7f800000u) CHECK(mirror[at] == e.bf16);
    at += 37;
  }
  CHECK(std::isnan(p[100 + 37 * 13]));  // a NaN went through the vector body
}
