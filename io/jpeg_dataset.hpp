// io/jpeg_dataset.hpp — the reader of the jpeg layout (docs/data-formats.md):
// every image a JPEG of its own size, concatenated in /jpeg, delimited by
// /offsets, with its shape in /shapes; decoded by the loader's threads
// (io/sample_decoder.hpp).
//
// Validation at open, before any work (each failure a UsageError naming the
// file and the object): attribute `layout` = "jpeg", `classes` > 0, `size` > 0;
// /jpeg uint8 1-D; /offsets uint64 [N + 1], N ≥ 1, offsets[0] = 0, strictly
// increasing, offsets[N] = the bytes of /jpeg; /shapes int32 [N, 3] with H, W ≥ 1
// and C = 3; /labels int32 [N] in [0, classes); an uncompressed /jpeg whose
// stored bytes fall short of offsets[N] (an incomplete file); a mandatory
// filter this HDF5 lacks. Warnings (log::warn_from_rank0 and warnings()): images whose
// shorter side is not `size`; a compressed /jpeg (JPEG bytes do not compress;
// every random read decodes whole chunks). A JPEG that does not decode, or
// decodes to another size than /shapes says, is an Error at its decode
// (naming the file, /jpeg and the index): reading every image at open would
// read the whole file.
//
// Reads (read_stored): the indices' runs of consecutive samples, each one
// hyperslab read of its byte range of /jpeg, into one buffer in sample order —
// the raw reader's coalescing. Uncompressed /jpeg: chunk cache off (HDF5
// reads exactly the selected bytes). Thread-safe: HDF5 serialises the reads.
#pragma once

#include <memory>
#include <mutex>

#include "io/dataset.hpp"
#include "io/h5_util.hpp"

namespace dtrain::io {

class JpegDataset final : public Dataset {
 public:
  explicit JpegDataset(const std::string& path);  // throws UsageError (file comment)
  ~JpegDataset() override;

  Layout layout() const override { return Layout::jpeg; }
  const std::string& path() const override { return path_; }
  int64_t n() const override { return n_; }
  int classes() const override { return classes_; }
  const std::vector<int32_t>& labels() const override { return labels_; }
  int64_t channels() const override { return 3; }
  ImageShape shape(int64_t i) const override;
  std::optional<ImageShape> fixed_shape() const override { return std::nullopt; }
  void read_stored(const std::vector<int64_t>& sorted, StoredSamples& out) const override;
  ReadStats read_stats() const override;
  void reset_read_stats() override;
  const std::vector<std::string>& warnings() const override { return warnings_; }

  int64_t stored_size() const { return size_; }         // attribute `size`: the stored shorter side S
  uint64_t total_bytes() const { return offsets_.back(); }  // bytes of /jpeg
  uint64_t bytes_of(int64_t i) const { return offsets_[size_t(i) + 1] - offsets_[size_t(i)]; }

 private:
  std::string path_;
  H5Id file_, jpeg_;
  FileWatch watch_;  // after each read: the file unchanged since open
  int64_t n_ = 0, size_ = 0;
  int classes_ = 0;
  std::vector<uint64_t> offsets_;  // [N + 1]
  std::vector<int32_t> shapes_;    // [N, 3]
  std::vector<int32_t> labels_;    // [N]
  std::vector<std::string> warnings_;
  mutable std::mutex stats_mu_;
  mutable ReadStats stats_;

  void open_jpeg_bytes();  // /jpeg: type, rank, filters, chunk cache, stored bytes
};

}  // namespace dtrain::io
