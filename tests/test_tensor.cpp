// tests/test_tensor.cpp — Tensor storage, views, shapes.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "layers/tensor.hpp"

using namespace dtrain::layers;

TEST_CASE("tensor owns zero-filled aligned storage", "[tensor]") {
  Tensor t(Shape(3, 5, 7, 7));
  REQUIRE(t.owning());
  REQUIRE(t.numel() == 3 * 5 * 7 * 7);
  REQUIRE(t.bytes() == static_cast<size_t>(t.numel()) * 4);
  REQUIRE(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(t.data()[i] == 0.0f);
  REQUIRE(t.shape().str() == "[3, 5, 7, 7]");
  REQUIRE(Shape::flat(4, 10).str() == "[4, 10]");
  REQUIRE(Shape::flat(4, 10).per_sample() == 10);
}

TEST_CASE("views share storage, clones do not", "[tensor]") {
  Tensor t(Shape::flat(2, 3));
  t.fill(2.0f);
  Tensor v = Tensor::view(t.data() + 3, Shape::flat(1, 3));
  REQUIRE_FALSE(v.owning());
  v.data()[0] = 7.0f;
  REQUIRE(t.data()[3] == 7.0f);
  Tensor c = t.clone();
  c.data()[3] = 1.0f;
  REQUIRE(t.data()[3] == 7.0f);
  Tensor r = t.reshaped(Shape(1, 6, 1, 1));
  REQUIRE(r.data() == t.data());
  REQUIRE_THROWS_AS(t.reshaped(Shape(1, 7, 1, 1)), dtrain::Error);
}
