// io/hdf5_dataset.hpp — the raw dataset HDF5 files of DESIGN.md §5
// (docs/data-formats.md, layout "raw"): writer and reader.
//
// Layout:
//   /images   uint8 [N, H, W, C], chunked along N (kChunkTargetBytes per chunk,
//             at least kMinChunkSamples samples), uncompressed by default
//   /labels   int32 [N], every value in [0, classes)
//   classes   int attribute on the file root, > 0
//   layout    optional string attribute "raw" (a "jpeg" file is JpegDataset's)
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
// run with one hyperslab read, then scatter the samples into the requested order.
//
// Chunk cache (sized at open for random minibatches, Hdf5Options):
//   - unfiltered chunks: cache off — HDF5 then reads exactly the selected bytes
//     of a chunk, so a random sample costs one small read, not a whole chunk;
//   - filtered (compressed) chunks must be decoded whole: the cache holds the
//     whole dataset when it fits in max_auto_cache_bytes (every chunk is decoded
//     once), else two chunks (a chunk shared by neighbouring runs of one call is
//     decoded once).
// Read amplification (ReadStats) = bytes HDF5 takes from chunks ÷ bytes
// delivered. It is modelled, not measured (HDF5 1.10 has no I/O counters):
// selected bytes on the direct path, whole chunks on a miss of an LRU model of
// the chunk cache otherwise. Repeated indices are read once, so it can be < 1.
//
// Layout warnings at open (log::warn_from_rank0, also kept in warnings()): chunks smaller
// than 64 KiB (unless one chunk holds the whole set), chunks that split a
// sample, a compressed set that does not fit the chunk cache, an optional
// filter this HDF5 lacks. A mandatory filter this HDF5 lacks is a UsageError:
// every read would fail.
//
// Threads: the Debian HDF5 build is threadsafe (one global lock inside HDF5),
// so one Hdf5Dataset may be read from several threads; reads are serialised.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "io/h5_util.hpp"

namespace dtrain::io {

inline constexpr int64_t kChunkTargetBytes = 512 * 1024;  // bytes of /images per chunk
inline constexpr int64_t kMinChunkSamples = 64;
inline constexpr int64_t kTinyChunkBytes = 64 * 1024;  // below this, open() warns

// Samples per /images chunk for samples of `sample_bytes` bytes, given N samples:
// max(kMinChunkSamples, ceil(kChunkTargetBytes / sample_bytes)), capped at N.
int64_t images_chunk_samples(int64_t sample_bytes, int64_t n);

// Streams a dataset file of known shape; samples may be written in any order of
// ranges, but every sample must be written before commit().
class DatasetWriter {
 public:
  // n ≥ 1 samples of h × w × c uint8 values; labels in [0, classes).
  // compression: 0 = none (default), 1..9 = gzip level. chunk_samples: samples
  // per /images chunk, 0 = images_chunk_samples() (the default; other values are
  // for benchmarks of bad layouts), capped at n.
  DatasetWriter(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c, int classes,
                int compression = 0, int64_t chunk_samples = 0);
  // The resumable kind (dtrain data imagefolder, io/image_store.hpp): the
  // temporary file is "<path>.partial" (H5TempFile::Resumable) and outlives the
  // writer; an existing one is reopened and must hold the same shape and
  // classes (else UsageError). Space for all n samples is allocated when the
  // file is created (H5D_ALLOC_TIME_EARLY; /labels is chunked too), so writing
  // samples never changes the file's metadata: after flush(), a killed writer
  // leaves a file that reopens with every flushed sample intact.
  DatasetWriter(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c, int classes,
                H5TempFile::Resumable);
  ~DatasetWriter();  // without commit(): the temporary file is removed (resumable: kept)
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // images: [count, H, W, C] uint8; labels: [count] int32, each in [0, classes).
  // Writes samples [begin, begin + count). Throws Error on a bad range or label.
  void write(int64_t begin, int64_t count, std::span<const uint8_t> images,
             std::span<const int32_t> labels);
  // Makes the file durable and renames it to `path`.
  void commit();
  // Resumable kind: keeps the first n_final ≤ n samples (H5Dset_extent), then
  // commit(). Which samples were written is the caller's record.
  void commit(int64_t n_final);

  hid_t file() const { return file_.id(); }  // for the caller's own attributes
  bool reopened() const { return file_.reopened(); }
  void flush(bool durable) { file_.flush(durable); }

 private:
  std::string path_;
  int64_t n_, sample_bytes_;
  int classes_;
  H5TempFile file_;
  H5Id images_, labels_;
  int64_t written_ = 0;  // samples written (sum of counts)
  bool resumable_ = false;

  void create(int64_t h, int64_t w, int64_t c, int compression, int64_t chunk_samples);
  void reopen(int64_t h, int64_t w, int64_t c);
};

// One-shot writer. images: [n, h, w, c] uint8 (n·h·w·c values); labels: [n].
void write_dataset(const std::string& path, std::span<const uint8_t> images, int64_t n, int64_t h,
                   int64_t w, int64_t c, std::span<const int32_t> labels, int classes,
                   int compression = 0, int64_t chunk_samples = 0);

struct Hdf5Options {
  int64_t chunk_cache_bytes = -1;                // -1: automatic (file comment); ≥ 0: forced
  int64_t max_auto_cache_bytes = int64_t{256} << 20;  // automatic cache limit, bytes
};

// ReadStats (io/dataset.hpp) here count read_images / read_range / read_stored
// calls; bytes_delivered = samples · sample_bytes.
class Hdf5Dataset final : public Dataset {
 public:
  // Opens and validates `path` (see the file comment). Throws UsageError.
  explicit Hdf5Dataset(const std::string& path, const Hdf5Options& options = {});
  ~Hdf5Dataset() override;
  Hdf5Dataset(Hdf5Dataset&&) noexcept;
  Hdf5Dataset& operator=(Hdf5Dataset&&) noexcept;

  Layout layout() const override { return Layout::raw; }
  const std::string& path() const override { return path_; }
  int64_t n() const override { return n_; }
  int64_t height() const { return h_; }
  int64_t width() const { return w_; }
  int64_t channels() const override { return c_; }
  ImageShape shape(int64_t) const override { return {h_, w_, c_}; }
  std::optional<ImageShape> fixed_shape() const override { return ImageShape{h_, w_, c_}; }
  int64_t sample_bytes() const { return h_ * w_ * c_; }  // bytes per image
  int classes() const override { return classes_; }
  const std::vector<int32_t>& labels() const override { return labels_; }  // [N]
  // Samples per /images chunk (N for a contiguous dataset); bytes per chunk.
  int64_t chunk_samples() const { return chunk_samples_; }
  int64_t chunk_bytes() const { return chunk_samples_ * sample_bytes(); }
  bool filtered() const { return filtered_; }                    // compressed / filtered chunks
  int64_t chunk_cache_bytes() const { return cache_bytes_; }     // as configured at open
  const std::vector<std::string>& warnings() const override { return warnings_; }  // layout warnings

  // Thread-safe snapshot / reset of the read counters.
  ReadStats read_stats() const override;
  void reset_read_stats() override;

  // Dataset::read_stored: read_images of `sorted` (no staging), offsets k · sample_bytes.
  void read_stored(const std::vector<int64_t>& sorted, StoredSamples& out) const override;

  // Reads samples `indices` (any order, repeats allowed, each in [0, N)) into
  // out: [indices.size(), H, W, C] uint8, in the order given. Thread-safe
  // (HDF5 serialises the reads). Throws Error on a bad index, UsageError when
  // HDF5 cannot read the file, Error when the file changed since it was opened
  // (io/h5_util.hpp FileWatch: size or modification time; HDF5 itself reads
  // past a shrunken end as zeros).
  void read_images(const std::vector<int64_t>& indices, uint8_t* out) const;
  // Reads samples [begin, begin + count) into out: [count, H, W, C] uint8.
  void read_range(int64_t begin, int64_t count, uint8_t* out) const;

 private:
  std::string path_;
  H5Id file_, images_;
  FileWatch watch_;  // after each read: the file unchanged since open
  int64_t n_ = 0, h_ = 0, w_ = 0, c_ = 0;
  int classes_ = 0;
  std::vector<int32_t> labels_;
  int64_t chunk_samples_ = 0, cache_bytes_ = 0;
  bool filtered_ = false, chunked_ = false;
  std::vector<std::string> warnings_;
  struct Counters;                      // ReadStats + the chunk cache model, behind a mutex
  std::unique_ptr<Counters> counters_;  // (a pointer keeps the dataset movable)

  void inspect_layout(const Hdf5Options& options);  // chunk cache, filters, warnings
  void count_read(const std::vector<int64_t>& sorted_unique, int64_t delivered, int64_t requests,
                  double seconds) const;
};

}  // namespace dtrain::io
