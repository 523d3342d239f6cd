// io/dataset.hpp — what the loader (io::Prefetcher), the evaluator and the
// benchmarks need from a dataset file, whatever its layout
// (docs/data-formats.md): the labels, each sample's stored shape, and the
// stored bytes of a set of samples in one serialised read.
//
//   raw  (Hdf5Dataset, io/hdf5_dataset.hpp) — /images uint8 [N, H, W, C]: a
//        sample's stored bytes are its pixels;
//   jpeg (JpegDataset, io/jpeg_dataset.hpp) — a sample's stored bytes are a
//        JPEG, decoded by the loader's threads (io/sample_decoder.hpp).
// open_dataset() reads the root attribute `layout` ("raw", "jpeg"; absent =
// raw) and opens the matching reader; every problem with the file is a
// UsageError naming the file and the object, raised before any work.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::io {

enum class Layout { raw, jpeg };
const char* layout_name(Layout l);  // raw | jpeg

struct ImageShape {
  int64_t h = 0, w = 0, c = 0;
  bool operator==(const ImageShape&) const = default;
};

// Counters of the stored-byte reads since open or reset_read_stats().
struct ReadStats {
  int64_t calls = 0;              // read calls
  int64_t samples = 0;            // samples delivered
  int64_t bytes_delivered = 0;    // stored bytes delivered
  int64_t bytes_from_chunks = 0;  // bytes HDF5 takes from chunks (modelled, hdf5_dataset.hpp)
  int64_t requests = 0;           // hyperslab reads issued (one per run of consecutive samples)
  int64_t chunk_loads = 0;        // whole chunks loaded into the cache (modelled misses)
  double seconds = 0;             // wall time inside the calls, HDF5 lock waits included
  double amplification() const {  // bytes_from_chunks ÷ bytes_delivered (0 before any read)
    return bytes_delivered > 0 ? double(bytes_from_chunks) / double(bytes_delivered) : 0.0;
  }
};

// The stored bytes of U samples, back to back: sample k is
// bytes[offsets[k], offsets[k + 1]).
struct StoredSamples {
  std::vector<uint8_t> bytes;
  std::vector<size_t> offsets;  // [U + 1]
  const uint8_t* data(size_t k) const { return bytes.data() + offsets[k]; }
  size_t size(size_t k) const { return offsets[k + 1] - offsets[k]; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual Layout layout() const = 0;
  virtual const std::string& path() const = 0;
  virtual int64_t n() const = 0;
  virtual int classes() const = 0;
  virtual const std::vector<int32_t>& labels() const = 0;  // [N], in [0, classes)
  virtual int64_t channels() const = 0;                    // of every stored image
  virtual ImageShape shape(int64_t i) const = 0;           // stored (H, W, C) of sample i
  // Every sample's shape when they are all alike (raw), else nullopt (jpeg).
  virtual std::optional<ImageShape> fixed_shape() const = 0;
  // Reads the stored bytes of samples `sorted` (increasing, distinct, each in
  // [0, N)) into out, in that order. Thread-safe (reads are serialised).
  // Throws Error on a bad index, UsageError when the file cannot be read.
  virtual void read_stored(const std::vector<int64_t>& sorted, StoredSamples& out) const = 0;
  virtual ReadStats read_stats() const = 0;  // thread-safe snapshot
  virtual void reset_read_stats() = 0;
  virtual const std::vector<std::string>& warnings() const = 0;  // layout warnings found at open
};

struct Hdf5Options;

// The layout `path` declares (root attribute `layout`; absent = raw). Throws
// UsageError on an unreadable file or an unknown layout.
Layout file_layout(const std::string& path);

// Opens and validates `path` with the reader of its layout. Throws UsageError.
std::unique_ptr<Dataset> open_dataset(const std::string& path);
std::unique_ptr<Dataset> open_dataset(const std::string& path, const Hdf5Options& options);

}  // namespace dtrain::io
