// tests/image_tree.hpp — an ImageNet-style folder of Fashion-MNIST's real images,
// written with TurboJPEG, libpng and libvips (the fixture of the imagefolder
// converter's tests: tests/test_imagefolder.cpp, tests/integration/imagefolder.sh
// through the dtrain_make_image_tree tool).
//
// Layout under `dir`:
//   train/<class>/<name>     one folder per class (the names of kClassNames, so
//                            their sorted order is not Fashion-MNIST's label order)
//   val/ILSVRC2012_val_%08d.JPEG   flat
//   val_labels.txt           "NAME CLASS-NAME" lines (ImageNet's style)
//   val_index.txt            "NAME INDEX" lines, INDEX in the sorted class order
// Each image is a t10k Fashion-MNIST image, tinted to RGB (r = v, g = v/2 +
// 20·(class mod 5), b = 255 − v) and upscaled by vips_resize to one of a few
// sizes (300×200, 200×300, 37×53, 53×37), stored as JPEG (quality 92) or PNG.
// The odd ones: grayscale JPEG, CMYK JPEG, 16-bit PNG, palette PNG, RGBA PNG,
// JPEGs with EXIF orientation 3, 6 and 8 (via libexif), a PNG named .JPEG;
// and the bad ones (expected to be skipped): a truncated JPEG, a truncated
// PNG, a text file named .JPEG, an empty .JPEG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::test {

inline const std::vector<std::string> kClassNames = {"tshirt_top", "trouser", "pullover", "dress", "coat",
                                                     "sandal",     "shirt",   "sneaker",  "bag",   "ankle_boot"};

struct TreeFile {
  std::string path;        // relative to the tree's train/ or val/ folder
  std::string class_name;  // one of kClassNames
  std::string kind;        // "jpeg 300x200", "cmyk jpeg", "truncated jpeg", …
  bool bad = false;        // expected to be skipped
};

struct ImageTree {
  std::string train_root, val_root, val_labels, val_index;
  std::vector<TreeFile> train, val;
};

// Writes the tree (dir must not exist or be empty). per_class: ordinary train
// images per class (the odd and bad files come on top); val: validation images.
// kind: "" = the ordinary kinds in turn; else every ordinary train image is of
// this kind (e.g. "jpeg 300x200", for throughput measurements).
ImageTree write_image_tree(const std::string& dir, const std::string& fashion_dir, int per_class, int val,
                           const std::string& kind = "");

// A training-sized tree of Fashion-MNIST as it is distributed (not tinted):
// train/<class>/ the first n_train images of the train set, val/ flat the first
// n_val of the t10k set with val_labels.txt. The images are 28×28 gray, in
// three kinds by index i: i % 3 == 0 a gray PNG at 28×28 (lossless: stored
// exactly), 1 a gray-as-RGB JPEG at 28×28 (quality 92, 4:4:4), 2 an RGB PNG
// upscaled by vips_resize to 56×56 (the converter scales it back to 28). For
// tests/integration/imagefolder_train.sh (training from the converted tree
// against training from the IDX-converted file).
ImageTree write_fashion_tree(const std::string& dir, const std::string& fashion_dir, int n_train, int n_val);

}  // namespace dtrain::test
