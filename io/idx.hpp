// io/idx.hpp — IDX files (LeCun's MNIST format, also Fashion-MNIST) and the
// Fashion-MNIST → HDF5 converter.
//
// IDX: a big-endian header — magic 0x00000803 (uint8, 3 dims) for images or
// 0x00000801 (uint8, 1 dim) for labels, then one uint32 per dimension — followed
// by exactly prod(dims) bytes. Files are read through zlib's gzread, so both
// gzipped (Debian's dataset-fashion-mnist installs *-ubyte.gz) and plain files
// work. Every problem (bad magic, zero dimension, truncated data, trailing
// bytes, corrupt gzip) is a dtrain::UsageError naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::io {

struct IdxImages {
  int64_t n = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // [n, rows, cols]
};

// Reads an images IDX file (magic 0x00000803).
IdxImages read_idx_images(const std::string& path);
// Reads a labels IDX file (magic 0x00000801): [n] values 0..255.
std::vector<uint8_t> read_idx_labels(const std::string& path);

struct ConvertSummary {
  std::string train_path, test_path;  // the HDF5 files written
  int64_t n_train = 0, n_test = 0;
  int64_t height = 0, width = 0, channels = 0;
  int classes = 0;
  std::string describe() const;  // one human line per file
};

inline constexpr int kFashionClasses = 10;

// Converts Fashion-MNIST from src_dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
// into out_dir/fashion-mnist-train.h5 (60000 samples) and
// out_dir/fashion-mnist-test.h5 (10000), layout DESIGN.md §5 with H=W=28, C=1,
// classes=10. Creates out_dir. Each file is written under a temporary name and
// renamed when complete. Throws UsageError on bad input files (image and label
// counts differ, a label ≥ 10, anything read_idx_* rejects).
ConvertSummary convert_fashion_mnist(const std::string& src_dir, const std::string& out_dir);

}  // namespace dtrain::io
