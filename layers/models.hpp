// layers/models.hpp — the model zoo, built in C++ (one function per model).
//
// Each builder takes the minibatch N (the net is set up for it; other sizes
// work at run time) and returns an un-finalised Net. Parameter counts
// (asserted by tests/test_models.cpp):
//   lenet5       1×28×28 → 10          61,706   (LeCun et al. 1998, ReLU + max pool)
//   resnet20     1×28×28 → 10         272,186   (He et al. 2016 §4.2, 1×1 projection shortcuts)
//   alexnet      3×227×227 → 1000  60,965,224   (BVLC/Caffe reference: LRN, groups 2)
//   alexnet-owt  3×224×224 → 1000  61,100,840   (torchvision "one weird trick", Krizhevsky 2014)
//   resnet18     3×224×224 → 1000  11,689,512   (torchvision)
//   resnet50     3×224×224 → 1000  25,557,032   (torchvision, stride on the 3×3: "v1.5")
#pragma once

#include <string>
#include <vector>

#include "layers/net.hpp"

namespace dtrain::layers {

struct ModelOptions {
  int minibatch = 1;
  int classes = 0;   // 0: the model's default (10 for the 28×28 models, 1000 otherwise)
  float dropout = 0.5f;  // AlexNet variants
};

Net lenet5(const ModelOptions& o);
Net resnet20(const ModelOptions& o);
Net alexnet(const ModelOptions& o);
Net alexnet_owt(const ModelOptions& o);
Net resnet18(const ModelOptions& o);
Net resnet50(const ModelOptions& o);

// One row of the model registry (models.cpp): the one list of models.
struct ModelInfo {
  std::string name;                    // "lenet5", "resnet20", …
  Net (*build)(const ModelOptions&);
  Shape input;                         // one sample, [1, C, H, W]
  std::string description;             // a line for help and `dtrain model`
};
const std::vector<ModelInfo>& model_registry();

// By name (a registry row). Throws UsageError naming the model and the known ones when unknown.
Net make_model(const std::string& name, const ModelOptions& o);
std::vector<std::string> model_names();  // in registry order
std::string model_list_text();           // "lenet5 | resnet20 | …" for help strings

}  // namespace dtrain::layers
