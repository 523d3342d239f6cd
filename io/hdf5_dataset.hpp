// io/hdf5_dataset.hpp — the dataset HDF5 files of DESIGN.md §5: writer and reader.
//
// Layout:
//   /images   uint8 [N, H, W, C], chunked along N (kChunkTargetBytes per chunk,
//             at least kMinChunkSamples samples), uncompressed by default
//   /labels   int32 [N], every value in [0, classes)
//   classes   int attribute on the file root, > 0
//
// Writing goes to "<path>.tmp.<pid>" and is renamed on completion, so a killed
// writer never leaves a half file under the final name (DatasetWriter; the
// one-shot write_dataset() builds on it).
//
// Reading (Hdf5Dataset) opens the file read-only with file locking off and
// validates everything up front; every problem is a dtrain::UsageError whose
// message names the file and the object, e.g.
//   "data/x.h5: /labels: label 12 at index 5 is outside [0, 10)".
// Image reads sort the indices, coalesce consecutive ones into runs, read each
// run with one hyperslab read (uncompressed chunks bypass the chunk cache), then
// scatter the samples into the requested order.
//
// Threads: the Debian HDF5 build is threadsafe (one global lock inside HDF5),
// so one Hdf5Dataset may be read from several threads; reads are serialised.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/h5_util.hpp"

namespace dtrain::io {

inline constexpr int64_t kChunkTargetBytes = 512 * 1024;  // bytes of /images per chunk
inline constexpr int64_t kMinChunkSamples = 64;

// Samples per /images chunk for samples of `sample_bytes` bytes, given N samples:
// max(kMinChunkSamples, ceil(kChunkTargetBytes / sample_bytes)), capped at N.
int64_t images_chunk_samples(int64_t sample_bytes, int64_t n);

// Streams a dataset file of known shape; samples may be written in any order of
// ranges, but every sample must be written before commit().
class DatasetWriter {
 public:
  // n ≥ 1 samples of h × w × c uint8 values; labels in [0, classes).
  // compression: 0 = none (default), 1..9 = gzip level.
  DatasetWriter(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c, int classes,
                int compression = 0);
  ~DatasetWriter();  // without commit(): the temporary file is removed
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // images: [count, H, W, C] uint8; labels: [count] int32, each in [0, classes).
  // Writes samples [begin, begin + count). Throws Error on a bad range or label.
  void write(int64_t begin, int64_t count, std::span<const uint8_t> images,
             std::span<const int32_t> labels);
  // Makes the file durable and renames it to `path`.
  void commit();

 private:
  std::string path_;
  int64_t n_, sample_bytes_;
  int classes_;
  H5TempFile file_;
  H5Id images_, labels_;
  int64_t written_ = 0;  // samples written (sum of counts)
};

// One-shot writer. images: [n, h, w, c] uint8 (n·h·w·c values); labels: [n].
void write_dataset(const std::string& path, std::span<const uint8_t> images, int64_t n, int64_t h,
                   int64_t w, int64_t c, std::span<const int32_t> labels, int classes,
                   int compression = 0);

class Hdf5Dataset {
 public:
  // Opens and validates `path` (see the file comment). Throws UsageError.
  explicit Hdf5Dataset(const std::string& path);

  const std::string& path() const { return path_; }
  int64_t n() const { return n_; }
  int64_t height() const { return h_; }
  int64_t width() const { return w_; }
  int64_t channels() const { return c_; }
  int64_t sample_bytes() const { return h_ * w_ * c_; }  // bytes per image
  int classes() const { return classes_; }
  const std::vector<int32_t>& labels() const { return labels_; }  // [N]

  // Reads samples `indices` (any order, repeats allowed, each in [0, N)) into
  // out: [indices.size(), H, W, C] uint8, in the order given.
  void read_images(const std::vector<int64_t>& indices, uint8_t* out) const;
  // Reads samples [begin, begin + count) into out: [count, H, W, C] uint8.
  void read_range(int64_t begin, int64_t count, uint8_t* out) const;

 private:
  std::string path_;
  H5Id file_, images_;
  int64_t n_ = 0, h_ = 0, w_ = 0, c_ = 0;
  int classes_ = 0;
  std::vector<int32_t> labels_;
};

}  // namespace dtrain::io
