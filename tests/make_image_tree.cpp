// tests/make_image_tree.cpp — writes the Fashion-MNIST image tree of
// tests/image_tree.hpp (for tests/integration/imagefolder.sh and the
// conversion measurements of docs/data-formats.md).
// Usage: dtrain_make_image_tree DIR [PER_CLASS [VAL [KIND]]]   (defaults 12, 30, all kinds)
// KIND: every ordinary train image of one kind, e.g. "jpeg 300x200".
//        dtrain_make_image_tree --fashion DIR N_TRAIN N_VAL   (write_fashion_tree)
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/settings.hpp"
#include "tests/image_tree.hpp"

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--fashion") {
    try {
      auto t = dtrain::test::write_fashion_tree(argv[2], dtrain::settings::fashion_dir(), std::atoi(argv[3]),
                                                std::atoi(argv[4]));
      std::printf("%s: %zu train files, %zu val files; labels %s\n", argv[2], t.train.size(), t.val.size(),
                  t.val_labels.c_str());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dtrain_make_image_tree: %s\n", e.what());
      return 1;
    }
  }
  if (argc < 2 || argc > 5) {
    std::fprintf(stderr, "usage: %s DIR [PER_CLASS [VAL [KIND]]]\n", argv[0]);
    return 2;
  }
  try {
    const int per_class = argc > 2 ? std::atoi(argv[2]) : 12;
    const int val = argc > 3 ? std::atoi(argv[3]) : 30;
    auto t = dtrain::test::write_image_tree(argv[1], dtrain::settings::fashion_dir(), per_class, val,
                                            argc > 4 ? argv[4] : "");
    int bad = 0;
    for (const auto& f : t.train) bad += f.bad;
    std::printf("%s: %zu train files (%d bad), %zu val files; labels %s, %s\n", argv[1], t.train.size(), bad,
                t.val.size(), t.val_labels.c_str(), t.val_index.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain_make_image_tree: %s\n", e.what());
    return 1;
  }
  return 0;
}
