// layers/models.cpp — model zoo builders and the registry (name → builder,
// input shape, description) that make_model, model_names and the help strings
// of the command line read.
#include "layers/models.hpp"

#include "core/error.hpp"
#include "layers/layer_kinds.hpp"

namespace dtrain::layers {

namespace {

int classes_or(const ModelOptions& o, int fallback) { return o.classes > 0 ? o.classes : fallback; }

// conv → (bn) → (relu), the common pattern.
int conv(Net& net, int x, const std::string& name, int out, int k, int stride, int pad,
         int groups = 1, bool bias = true, Init wi = Init::uniform_fan_in) {
  ConvOptions c;
  c.out_channels = out;
  c.kernel = k;
  c.stride = stride;
  c.pad = pad;
  c.groups = groups;
  c.bias = bias;
  c.weight_init = wi;
  return net.add(make_conv(name, c), x);
}
int relu(Net& net, int x, const std::string& name) { return net.add(make_relu(name), x); }
int bn(Net& net, int x, const std::string& name, Init gamma = Init::ones) {
  BatchNormOptions b;
  b.gamma_init = gamma;
  return net.add(make_batch_norm(name, b), x);
}
int maxpool(Net& net, int x, const std::string& name, int k, int s, int p = 0) {
  return net.add(make_pool(name, {PoolKind::max, k, s, p}), x);
}
int linear(Net& net, int x, const std::string& name, int out) {
  LinearOptions l;
  l.out_features = out;
  return net.add(make_linear(name, l), x);
}

// The end of a residual block: y + shortcut(x), then ReLU. The shortcut is the
// identity, or a 1×1 convolution (stride s) + BN when the shape changes (option B).
int residual(Net& net, int x, int y, const std::string& p, int in_ch, int out_ch, int stride,
             const std::string& relu_name) {
  int s = x;
  if (stride != 1 || in_ch != out_ch) {
    s = conv(net, x, p + ".downsample.conv", out_ch, 1, stride, 0, 1, false, Init::kaiming_normal);
    s = bn(net, s, p + ".downsample.bn");
  }
  return relu(net, net.add(make_add(p + ".add"), {y, s}), relu_name);
}

// torchvision BasicBlock: conv3×3(s)–bn–relu–conv3×3–bn, + shortcut (1×1 conv s + bn when
// the shape changes), relu.
int basic_block(Net& net, int x, const std::string& p, int in_ch, int out_ch, int stride) {
  int y = conv(net, x, p + ".conv1", out_ch, 3, stride, 1, 1, false, Init::kaiming_normal);
  y = relu(net, bn(net, y, p + ".bn1"), p + ".relu1");
  y = conv(net, y, p + ".conv2", out_ch, 3, 1, 1, 1, false, Init::kaiming_normal);
  y = bn(net, y, p + ".bn2");
  return residual(net, x, y, p, in_ch, out_ch, stride, p + ".relu2");
}

// torchvision Bottleneck (v1.5): 1×1 – 3×3(stride) – 1×1(×4), + shortcut.
int bottleneck(Net& net, int x, const std::string& p, int in_ch, int width, int stride) {
  int out_ch = width * 4;
  int y = conv(net, x, p + ".conv1", width, 1, 1, 0, 1, false, Init::kaiming_normal);
  y = relu(net, bn(net, y, p + ".bn1"), p + ".relu1");
  y = conv(net, y, p + ".conv2", width, 3, stride, 1, 1, false, Init::kaiming_normal);
  y = relu(net, bn(net, y, p + ".bn2"), p + ".relu2");
  y = conv(net, y, p + ".conv3", out_ch, 1, 1, 0, 1, false, Init::kaiming_normal);
  y = bn(net, y, p + ".bn3");
  return residual(net, x, y, p, in_ch, out_ch, stride, p + ".relu3");
}

// The ImageNet ResNet stem and head around `stages` of blocks.
Net imagenet_resnet(const ModelOptions& o, bool bottle, const int (&blocks)[4]) {
  Net net(Shape(o.minibatch, 3, 224, 224));
  int x = conv(net, Net::kInput, "conv1", 64, 7, 2, 3, 1, false, Init::kaiming_normal);
  x = relu(net, bn(net, x, "bn1"), "relu");
  x = maxpool(net, x, "maxpool", 3, 2, 1);
  int in_ch = 64;
  const int widths[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      int stride = (b == 0 && s > 0) ? 2 : 1;
      if (bottle) {
        x = bottleneck(net, x, p, in_ch, widths[s], stride);
        in_ch = widths[s] * 4;
      } else {
        x = basic_block(net, x, p, in_ch, widths[s], stride);
        in_ch = widths[s];
      }
    }
  }
  x = net.add(make_global_avg_pool("avgpool"), x);
  linear(net, x, "fc", classes_or(o, 1000));
  return net;
}

}  // namespace

Net lenet5(const ModelOptions& o) {
  Net net(Shape(o.minibatch, 1, 28, 28));
  int x = relu(net, conv(net, Net::kInput, "conv1", 6, 5, 1, 2), "relu1");
  x = maxpool(net, x, "pool1", 2, 2);
  x = relu(net, conv(net, x, "conv2", 16, 5, 1, 0), "relu2");
  x = maxpool(net, x, "pool2", 2, 2);
  x = relu(net, linear(net, x, "fc1", 120), "relu3");
  x = relu(net, linear(net, x, "fc2", 84), "relu4");
  linear(net, x, "fc3", classes_or(o, 10));
  return net;
}

Net resnet20(const ModelOptions& o) {
  // He et al. 2016, §4.2 (CIFAR ResNet, n = 3), for 1×28×28 input: 16-32-64
  // channels at 28, 14, 7 pixels, 1×1 projection shortcuts (option B).
  Net net(Shape(o.minibatch, 1, 28, 28));
  int x = conv(net, Net::kInput, "conv1", 16, 3, 1, 1, 1, false, Init::kaiming_normal);
  x = relu(net, bn(net, x, "bn1"), "relu");
  int in_ch = 16;
  const int widths[3] = {16, 32, 64};
  for (int s = 0; s < 3; ++s)
    for (int b = 0; b < 3; ++b) {
      int stride = (b == 0 && s > 0) ? 2 : 1;
      x = basic_block(net, x, "layer" + std::to_string(s + 1) + "." + std::to_string(b), in_ch, widths[s], stride);
      in_ch = widths[s];
    }
  x = net.add(make_global_avg_pool("avgpool"), x);
  linear(net, x, "fc", classes_or(o, 10));
  return net;
}

Net alexnet(const ModelOptions& o) {
  // BVLC reference CaffeNet/AlexNet (models/bvlc_alexnet/train_val.prototxt):
  // conv1 96@11×11/4 → relu → LRN → pool 3/2 → conv2 256@5×5 p2 g2 → relu → LRN →
  // pool → conv3 384@3×3 p1 → conv4 384 g2 → conv5 256 g2 → pool → fc6 4096 →
  // dropout → fc7 4096 → dropout → fc8.
  Net net(Shape(o.minibatch, 3, 227, 227));
  LrnOptions lrn{5, 1e-4f, 0.75f, 1.0f};
  int x = relu(net, conv(net, Net::kInput, "conv1", 96, 11, 4, 0, 1, true, Init::normal_001), "relu1");
  x = maxpool(net, net.add(make_lrn("norm1", lrn), x), "pool1", 3, 2);
  x = relu(net, conv(net, x, "conv2", 256, 5, 1, 2, 2, true, Init::normal_001), "relu2");
  x = maxpool(net, net.add(make_lrn("norm2", lrn), x), "pool2", 3, 2);
  x = relu(net, conv(net, x, "conv3", 384, 3, 1, 1, 1, true, Init::normal_001), "relu3");
  x = relu(net, conv(net, x, "conv4", 384, 3, 1, 1, 2, true, Init::normal_001), "relu4");
  x = relu(net, conv(net, x, "conv5", 256, 3, 1, 1, 2, true, Init::normal_001), "relu5");
  x = maxpool(net, x, "pool5", 3, 2);
  x = relu(net, linear(net, x, "fc6", 4096), "relu6");
  x = net.add(make_dropout("drop6", o.dropout), x);
  x = relu(net, linear(net, x, "fc7", 4096), "relu7");
  x = net.add(make_dropout("drop7", o.dropout), x);
  linear(net, x, "fc8", classes_or(o, 1000));
  return net;
}

Net alexnet_owt(const ModelOptions& o) {
  // torchvision.models.alexnet: single tower, no LRN, dropout before fc6/fc7.
  Net net(Shape(o.minibatch, 3, 224, 224));
  int x = relu(net, conv(net, Net::kInput, "conv1", 64, 11, 4, 2), "relu1");
  x = maxpool(net, x, "pool1", 3, 2);
  x = relu(net, conv(net, x, "conv2", 192, 5, 1, 2), "relu2");
  x = maxpool(net, x, "pool2", 3, 2);
  x = relu(net, conv(net, x, "conv3", 384, 3, 1, 1), "relu3");
  x = relu(net, conv(net, x, "conv4", 256, 3, 1, 1), "relu4");
  x = relu(net, conv(net, x, "conv5", 256, 3, 1, 1), "relu5");
  x = maxpool(net, x, "pool5", 3, 2);  // 6×6 at 224 input (torchvision's adaptive pool is then the identity)
  DT_CHECK(net.shape(x).h() == 6 && net.shape(x).w() == 6, "alexnet-owt expects 224×224 input");
  x = net.add(make_dropout("drop6", o.dropout), x);
  x = relu(net, linear(net, x, "fc6", 4096), "relu6");
  x = net.add(make_dropout("drop7", o.dropout), x);
  x = relu(net, linear(net, x, "fc7", 4096), "relu7");
  linear(net, x, "fc8", classes_or(o, 1000));
  return net;
}

Net resnet18(const ModelOptions& o) { return imagenet_resnet(o, false, {2, 2, 2, 2}); }
Net resnet50(const ModelOptions& o) { return imagenet_resnet(o, true, {3, 4, 6, 3}); }

// The registry: a new model is a builder above and a row here (name, builder,
// one sample's input [1, C, H, W], what it is).
const std::vector<ModelInfo>& model_registry() {
  static const std::vector<ModelInfo> models{
      {"lenet5", lenet5, Shape(1, 1, 28, 28), "LeNet-5 (LeCun et al. 1998, ReLU + max pool), 10 classes"},
      {"resnet20", resnet20, Shape(1, 1, 28, 28), "ResNet-20 for 28x28 input (He et al. 2016 §4.2), 10 classes"},
      {"alexnet", alexnet, Shape(1, 3, 227, 227), "AlexNet, BVLC/Caffe reference (LRN, groups 2), 1000 classes"},
      {"alexnet-owt", alexnet_owt, Shape(1, 3, 224, 224), "AlexNet \"one weird trick\" (torchvision), 1000 classes"},
      {"resnet18", resnet18, Shape(1, 3, 224, 224), "ResNet-18 (torchvision), 1000 classes"},
      {"resnet50", resnet50, Shape(1, 3, 224, 224), "ResNet-50 v1.5 (torchvision), 1000 classes"},
  };
  return models;
}

std::vector<std::string> model_names() {
  std::vector<std::string> v;
  for (const auto& m : model_registry()) v.push_back(m.name);
  return v;
}

std::string model_list_text() {
  std::string s;
  for (const auto& m : model_registry()) s += (s.empty() ? "" : " | ") + m.name;
  return s;
}

Net make_model(const std::string& name, const ModelOptions& o) {
  for (const auto& m : model_registry())
    if (m.name == name) return m.build(o);
  std::string known;
  for (auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  DT_USAGE("unknown model '", name, "' (known: ", known, ")");
}

}  // namespace dtrain::layers
