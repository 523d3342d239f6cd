// tests/test_models.cpp — model zoo: parameter counts and output shapes (the
// published numbers), and that the small models run forward and backward.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/models.hpp"

using namespace dtrain::layers;

namespace {
int64_t count_params(const Net& net) {
  int64_t total = 0;
  for (auto& r : net.summary()) total += r.params;
  return total;
}
}  // namespace

TEST_CASE("model zoo parameter counts match the published models", "[models]") {
  ModelOptions o;
  o.minibatch = 2;
  // torchvision / Caffe figures quoted in the issue.
  CHECK(count_params(lenet5(o)) == 61706);
  CHECK(count_params(alexnet(o)) == 60965224);
  CHECK(count_params(alexnet_owt(o)) == 61100840);
  CHECK(count_params(resnet18(o)) == 11689512);
  CHECK(count_params(resnet50(o)) == 25557032);
  // resnet20 with 1×1 projection shortcuts for 1 input channel: see models.hpp.
  CHECK(count_params(resnet20(o)) == 272186);
}

TEST_CASE("model zoo output shapes", "[models]") {
  ModelOptions o;
  o.minibatch = 3;
  CHECK(lenet5(o).output_shape() == Shape::flat(3, 10));
  CHECK(resnet20(o).output_shape() == Shape::flat(3, 10));
  CHECK(alexnet(o).output_shape() == Shape::flat(3, 1000));
  CHECK(alexnet_owt(o).output_shape() == Shape::flat(3, 1000));
  CHECK(resnet18(o).output_shape() == Shape::flat(3, 1000));
  CHECK(resnet50(o).output_shape() == Shape::flat(3, 1000));
  CHECK(alexnet(o).input_shape() == Shape(3, 3, 227, 227));
  CHECK(resnet50(o).input_shape() == Shape(3, 3, 224, 224));
  // Intermediate shapes of the classic networks.
  Net a = alexnet(o);
  auto rows = a.summary();
  auto find = [&](const std::string& n) {
    for (auto& r : rows)
      if (r.name == n) return r.out;
    FAIL("no layer " << n);
    return Shape();
  };
  CHECK(find("conv1") == Shape(3, 96, 55, 55));
  CHECK(find("pool2") == Shape(3, 256, 13, 13));
  CHECK(find("pool5") == Shape(3, 256, 6, 6));
  o.classes = 7;
  CHECK(resnet50(o).output_shape() == Shape::flat(3, 7));
  REQUIRE_THROWS_AS(make_model("vgg16", o), dtrain::UsageError);
}

TEST_CASE("forward FLOPs of the classic networks", "[models]") {
  ModelOptions o;
  o.minibatch = 1;
  // ResNet-50 is ~4.1 GMACs (8.2 GFLOPs) per 224×224 image; AlexNet-OWT ~0.71 GMACs.
  CHECK(resnet50(o).forward_flops() / 2e9 == Approx(4.1).epsilon(0.05));
  CHECK(alexnet_owt(o).forward_flops() / 2e9 == Approx(0.71).epsilon(0.05));
}

TEST_CASE("small models train forward and backward on the CPU backend", "[models]") {
  auto be = make_cpu_backend();
  for (const char* name : {"lenet5", "resnet20"}) {
    ModelOptions o;
    o.minibatch = 4;
    Net net = make_model(name, o);
    net.finalize(*be, 3);
    Tensor x(Shape(4, 1, 28, 28));
    for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
    const Tensor& y = net.forward(x, true);
    REQUIRE(y.shape() == Shape::flat(4, 10));
    Tensor dy(y.shape());
    dy.fill(0.25f);
    net.backward(dy);
    double g2 = 0;
    for (size_t i = 0; i < net.num_params(); ++i) g2 += static_cast<double>(net.grads().data()[i]) * net.grads().data()[i];
    CHECK(std::isfinite(g2));
    CHECK(g2 > 0.0);
  }
}

TEST_CASE("the model registry: names, input shapes, help text, unknown names", "[models]") {
  ModelOptions o;
  o.minibatch = 2;
  std::string text;
  for (const ModelInfo& m : model_registry()) {
    INFO(m.name);
    CHECK_FALSE(m.description.empty());
    // The registry's input is the built net's (one sample).
    const Shape in = make_model(m.name, o).input_shape();
    CHECK(Shape(1, in.c(), in.h(), in.w()) == m.input);
    text += (text.empty() ? "" : " | ") + m.name;
  }
  CHECK(model_list_text() == text);
  CHECK(model_list_text() == "lenet5 | resnet20 | alexnet | alexnet-owt | resnet18 | resnet50");
  CHECK(model_names().size() == model_registry().size());
  CHECK_THROWS_WITH(make_model("lenet6", o), Catch::Contains("lenet6") && Catch::Contains("resnet50"));
}
