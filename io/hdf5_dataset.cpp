// io/hdf5_dataset.cpp — dataset files (DESIGN.md §5): DatasetWriter and Hdf5Dataset.
#include "io/hdf5_dataset.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/error.hpp"
#include "core/log.hpp"
#include "io/h5_checks.hpp"

namespace dtrain::io {

int64_t images_chunk_samples(int64_t sample_bytes, int64_t n) {
  int64_t k = std::max(kMinChunkSamples, (kChunkTargetBytes + sample_bytes - 1) / sample_bytes);
  const int64_t max_chunk_bytes = (int64_t{1} << 32) - 1;  // HDF5's limit per chunk
  k = std::min(k, std::max<int64_t>(1, max_chunk_bytes / sample_bytes));
  return std::max<int64_t>(1, std::min(k, n));
}

// ---- writer --------------------------------------------------------------------

DatasetWriter::DatasetWriter(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c,
                             int classes, int compression, int64_t chunk_samples)
    : path_(path), n_(n), sample_bytes_(h * w * c), classes_(classes), file_(path) {
  create(h, w, c, compression, chunk_samples);
}

DatasetWriter::DatasetWriter(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c,
                             int classes, H5TempFile::Resumable r)
    : path_(path), n_(n), sample_bytes_(h * w * c), classes_(classes), file_(path, r), resumable_(true) {
  if (file_.reopened())
    reopen(h, w, c);
  else
    create(h, w, c, 0, 0);
}

void DatasetWriter::create(int64_t h, int64_t w, int64_t c, int compression, int64_t chunk_samples) {
  const int64_t n = n_;
  const std::string& path = path_;
  DT_CHECK(n >= 1 && h >= 1 && w >= 1 && c >= 1, path, ": bad shape [", n, ", ", h, ", ", w, ", ",
           c, "]");
  DT_CHECK(classes_ >= 1, path, ": classes must be > 0, got ", classes_);
  DT_CHECK(compression >= 0 && compression <= 9, path, ": compression level ", compression);
  const hid_t f = file_.id();

  hsize_t dims[4] = {hsize_t(n), hsize_t(h), hsize_t(w), hsize_t(c)};
  H5Id space(DT_H5(H5Screate_simple(4, dims, nullptr)), H5Sclose);
  H5Id dcpl(DT_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  DT_CHECK(chunk_samples >= 0, path, ": chunk_samples ", chunk_samples, " < 0");
  const int64_t k = chunk_samples > 0 ? std::min(chunk_samples, n) : images_chunk_samples(sample_bytes_, n);
  hsize_t chunk[4] = {hsize_t(k), dims[1], dims[2], dims[3]};
  DT_H5(H5Pset_chunk(dcpl.get(), 4, chunk));
  DT_H5(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));  // every sample is written
  if (compression > 0) DT_H5(H5Pset_deflate(dcpl.get(), unsigned(compression)));
  // Resumable: every chunk exists from the start, so writes touch no metadata.
  if (resumable_) DT_H5(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY));
  images_ = H5Id(DT_CHECK_H5(H5Dcreate2(f, "images", H5T_STD_U8LE, space.get(), H5P_DEFAULT,
                                        dcpl.get(), H5P_DEFAULT),
                             path_, ": /images", h5_error_suffix()),
                 H5Dclose);

  hsize_t ldims[1] = {hsize_t(n)};
  H5Id lspace(DT_H5(H5Screate_simple(1, ldims, nullptr)), H5Sclose);
  H5Id ldcpl(DT_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  if (resumable_) {  // chunked, so that commit(n_final) can shrink it
    hsize_t lchunk[1] = {hsize_t(std::min<int64_t>(n, 1 << 16))};
    DT_H5(H5Pset_chunk(ldcpl.get(), 1, lchunk));
    DT_H5(H5Pset_alloc_time(ldcpl.get(), H5D_ALLOC_TIME_EARLY));
  }
  labels_ = H5Id(DT_CHECK_H5(H5Dcreate2(f, "labels", H5T_STD_I32LE, lspace.get(), H5P_DEFAULT,
                                        ldcpl.get(), H5P_DEFAULT),
                             path_, ": /labels", h5_error_suffix()),
                 H5Dclose);

  H5Id aspace(DT_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  H5Id attr(
      DT_CHECK_H5(H5Acreate2(f, "classes", H5T_STD_I32LE, aspace.get(), H5P_DEFAULT, H5P_DEFAULT),
                  path_, ": attribute classes", h5_error_suffix()),
      H5Aclose);
  const int32_t cls = classes_;
  DT_H5(H5Awrite(attr.get(), H5T_NATIVE_INT32, &cls));
}

void DatasetWriter::reopen(int64_t h, int64_t w, int64_t c) {
  const hid_t f = file_.id();
  const std::string& where = file_.temp_path();
  for (const char* name : {"images", "labels"})
    if (!h5_link_exists(f, name)) DT_USAGE(where, ": /", name, " is missing; remove the file to start over");
  images_ = H5Id(DT_H5(H5Dopen2(f, "images", H5P_DEFAULT)), H5Dclose);
  labels_ = H5Id(DT_H5(H5Dopen2(f, "labels", H5P_DEFAULT)), H5Dclose);
  H5Id space(DT_H5(H5Dget_space(images_.get())), H5Sclose);
  hsize_t dims[4] = {0, 0, 0, 0};
  const bool ok = H5Sget_simple_extent_ndims(space.get()) == 4 &&
                  H5Sget_simple_extent_dims(space.get(), dims, nullptr) == 4 && int64_t(dims[0]) == n_ &&
                  int64_t(dims[1]) == h && int64_t(dims[2]) == w && int64_t(dims[3]) == c &&
                  read_int_attribute(f, where, "classes") == classes_;
  if (!ok)
    DT_USAGE(where, ": holds [", dims[0], ", ", dims[1], ", ", dims[2], ", ", dims[3], "] images, not [", n_, ", ",
             h, ", ", w, ", ", c, "] with ", classes_, " classes: left by another conversion; remove it to start over");
}

DatasetWriter::~DatasetWriter() {
  images_.reset();
  labels_.reset();
}  // file_'s destructor removes the uncommitted temporary file

void DatasetWriter::write(int64_t begin, int64_t count, std::span<const uint8_t> images,
                          std::span<const int32_t> labels) {
  quiet_h5_errors();
  DT_CHECK(images_.valid(), path_, ": write after commit");
  DT_CHECK(begin >= 0 && count >= 0 && begin + count <= n_, path_, ": samples [", begin, ", ",
           begin + count, ") outside [0, ", n_, ")");
  DT_CHECK(int64_t(images.size()) == count * sample_bytes_, path_, ": ", images.size(),
           " image bytes for ", count, " samples of ", sample_bytes_, " bytes");
  DT_CHECK(int64_t(labels.size()) == count, path_, ": ", labels.size(), " labels for ", count,
           " samples");
  for (int64_t i = 0; i < count; ++i)
    DT_CHECK(labels[i] >= 0 && labels[i] < classes_, path_, ": label ", labels[i], " of sample ",
             begin + i, " is outside [0, ", classes_, ")");
  if (count == 0) return;

  H5Id fspace(DT_H5(H5Dget_space(images_.get())), H5Sclose);
  hsize_t dims[4];
  H5Sget_simple_extent_dims(fspace.get(), dims, nullptr);
  hsize_t start[4] = {hsize_t(begin), 0, 0, 0};
  hsize_t cnt[4] = {hsize_t(count), dims[1], dims[2], dims[3]};
  DT_H5(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr));
  H5Id mspace(DT_H5(H5Screate_simple(4, cnt, nullptr)), H5Sclose);
  if (H5Dwrite(images_.get(), H5T_NATIVE_UINT8, mspace.get(), fspace.get(), H5P_DEFAULT,
               images.data()) < 0)
    DT_FAIL(file_.temp_path(), ": /images: write failed", h5_error_suffix());

  H5Id lfspace(DT_H5(H5Dget_space(labels_.get())), H5Sclose);
  DT_H5(H5Sselect_hyperslab(lfspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr));
  H5Id lmspace(DT_H5(H5Screate_simple(1, cnt, nullptr)), H5Sclose);
  if (H5Dwrite(labels_.get(), H5T_NATIVE_INT32, lmspace.get(), lfspace.get(), H5P_DEFAULT,
               labels.data()) < 0)
    DT_FAIL(file_.temp_path(), ": /labels: write failed", h5_error_suffix());
  written_ += count;
}

void DatasetWriter::commit() {
  if (!resumable_) DT_CHECK(written_ >= n_, path_, ": only ", written_, " of ", n_, " samples written");
  images_.reset();
  labels_.reset();
  file_.commit();
}

void DatasetWriter::commit(int64_t n_final) {
  DT_CHECK(resumable_ || n_final == n_, path_, ": commit(", n_final, ") of a writer of ", n_, " samples");
  DT_CHECK(n_final >= 1 && n_final <= n_, path_, ": commit(", n_final, ") outside [1, ", n_, "]");
  if (n_final < n_) {
    H5Id space(DT_H5(H5Dget_space(images_.get())), H5Sclose);
    hsize_t dims[4];
    H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    dims[0] = hsize_t(n_final);
    DT_H5(H5Dset_extent(images_.get(), dims));
    hsize_t ldims[1] = {hsize_t(n_final)};
    DT_H5(H5Dset_extent(labels_.get(), ldims));
  }
  commit();
}

void write_dataset(const std::string& path, std::span<const uint8_t> images, int64_t n, int64_t h,
                   int64_t w, int64_t c, std::span<const int32_t> labels, int classes,
                   int compression, int64_t chunk_samples) {
  DatasetWriter writer(path, n, h, w, c, classes, compression, chunk_samples);
  writer.write(0, n, images, labels);
  writer.commit();
}

// ---- reader --------------------------------------------------------------------

// ReadStats plus an LRU model of HDF5's chunk cache (capacity = cache bytes ÷
// chunk bytes), used to estimate the bytes HDF5 takes from chunks.
struct Hdf5Dataset::Counters {
  std::mutex mu;
  ReadStats stats;
  size_t capacity = 0;  // chunks the cache holds; 0 = no cache
  bool filtered = false;  // without a cache, filtered chunks are decoded whole per request
  std::list<int64_t> lru;  // most recent first
  std::unordered_map<int64_t, std::list<int64_t>::iterator> where;

  bool touch(int64_t chunk) {  // true on a (modelled) hit
    auto it = where.find(chunk);
    if (it != where.end()) {
      lru.splice(lru.begin(), lru, it->second);
      return true;
    }
    lru.push_front(chunk);
    where[chunk] = lru.begin();
    if (lru.size() > capacity) {
      where.erase(lru.back());
      lru.pop_back();
    }
    return false;
  }
};

Hdf5Dataset::~Hdf5Dataset() = default;
Hdf5Dataset::Hdf5Dataset(Hdf5Dataset&&) noexcept = default;
Hdf5Dataset& Hdf5Dataset::operator=(Hdf5Dataset&&) noexcept = default;

ReadStats Hdf5Dataset::read_stats() const {
  std::lock_guard<std::mutex> lock(counters_->mu);
  return counters_->stats;
}

void Hdf5Dataset::reset_read_stats() {
  std::lock_guard<std::mutex> lock(counters_->mu);
  counters_->stats = ReadStats{};
}

void Hdf5Dataset::count_read(const std::vector<int64_t>& sorted_unique, int64_t delivered,
                             int64_t requests, double seconds) const {
  Counters& k = *counters_;
  std::lock_guard<std::mutex> lock(k.mu);
  ReadStats& s = k.stats;
  s.calls += 1;
  s.samples += delivered;
  s.bytes_delivered += delivered * sample_bytes();
  s.requests += requests;
  s.seconds += seconds;
  auto load = [&](int64_t chunk) {
    s.bytes_from_chunks += std::min(chunk_samples_, n_ - chunk * chunk_samples_) * sample_bytes();
    s.chunk_loads += 1;
  };
  if (k.capacity == 0 && !k.filtered) {  // direct reads of the selection
    s.bytes_from_chunks += int64_t(sorted_unique.size()) * sample_bytes();
    return;
  }
  if (k.capacity == 0) {  // no cache: every request decodes the chunks it spans
    for (size_t i = 0; i < sorted_unique.size();) {
      size_t j = i + 1;
      while (j < sorted_unique.size() && sorted_unique[j] == sorted_unique[j - 1] + 1) ++j;
      for (int64_t c = sorted_unique[i] / chunk_samples_; c <= sorted_unique[j - 1] / chunk_samples_; ++c)
        load(c);
      i = j;
    }
    return;
  }
  int64_t last = -1;  // indices are sorted: a chunk's samples are adjacent
  for (int64_t i : sorted_unique) {
    const int64_t chunk = i / chunk_samples_;
    if (chunk == last) continue;
    last = chunk;
    if (!k.touch(chunk)) load(chunk);
  }
}

namespace {
int64_t next_prime(int64_t x) {
  auto prime = [](int64_t v) {
    if (v < 2) return false;
    for (int64_t d = 2; d * d <= v; ++d)
      if (v % d == 0) return false;
    return true;
  };
  while (!prime(x)) ++x;
  return x;
}
}  // namespace

void Hdf5Dataset::inspect_layout(const Hdf5Options& options) {
  auto warn = [this](const std::string& msg) {
    warnings_.push_back(msg);
    log::warn_from_rank0(path_, ": /images: ", msg);
  };
  H5Id dcpl(H5Dget_create_plist(images_.get()), H5Pclose);
  if (!dcpl.valid()) DT_USAGE(path_, ": /images: cannot read creation properties", h5_error_suffix());
  chunked_ = H5Pget_layout(dcpl.get()) == H5D_CHUNKED;
  chunk_samples_ = n_;
  if (chunked_) {
    hsize_t cd[4] = {0, 0, 0, 0};
    if (H5Pget_chunk(dcpl.get(), 4, cd) != 4) DT_USAGE(path_, ": /images: cannot read chunk shape");
    chunk_samples_ = int64_t(cd[0]);
    if (int64_t(cd[1]) != h_ || int64_t(cd[2]) != w_ || int64_t(cd[3]) != c_)
      warn(detail::concat("chunks [", cd[0], ", ", cd[1], ", ", cd[2], ", ", cd[3],
                          "] split each sample [", h_, ", ", w_, ", ", c_,
                          "]: every sample read touches several chunks; rewrite with dtrain data"));
    const int64_t bytes = int64_t(cd[0] * cd[1] * cd[2] * cd[3]);
    if (bytes < kTinyChunkBytes && chunk_samples_ < n_)
      warn(detail::concat("chunks of ", cd[0], " samples hold ", bytes,
                          " bytes (< 64 KiB): random minibatches become many small reads; "
                          "rewrite with dtrain data (>= ",
                          kMinChunkSamples, " samples and ~", kChunkTargetBytes / 1024,
                          " KiB per chunk)"));
  }

  // Filters: a mandatory one this HDF5 lacks makes every read fail — say so now.
  const int nfilters = H5Pget_nfilters(dcpl.get());
  filtered_ = nfilters > 0;
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    size_t nelem = 0;
    char name[128] = {0};
    H5Z_filter_t id =
        H5Pget_filter2(dcpl.get(), unsigned(i), &flags, &nelem, nullptr, sizeof name, name, &config);
    if (id < 0) DT_USAGE(path_, ": /images: cannot read filter ", i, h5_error_suffix());
    if (H5Zfilter_avail(id) > 0) continue;
    const std::string what = detail::concat("filter ", id, name[0] ? " (" : "", name,
                                            name[0] ? ")" : "", " is not available in this HDF5");
    if (flags & H5Z_FLAG_OPTIONAL)
      warn(what + " (optional: chunks written with it will fail to read)");
    else
      DT_USAGE(path_, ": /images: compressed with ", what,
               "; install the filter plugin (HDF5_PLUGIN_PATH) or rewrite the file uncompressed");
  }

  // Chunk cache for random minibatches (file comment).
  const int64_t cb = chunk_bytes();
  const int64_t all = n_ * sample_bytes();
  if (options.chunk_cache_bytes >= 0)
    cache_bytes_ = options.chunk_cache_bytes;
  else if (!chunked_ || !filtered_)
    cache_bytes_ = 0;
  else if (all <= options.max_auto_cache_bytes)
    cache_bytes_ = std::max(all, 2 * cb);
  else
    cache_bytes_ = 2 * cb;
  if (chunked_ && filtered_ && all > cache_bytes_)
    warn(detail::concat("compressed chunks of ", cb, " bytes and a ", cache_bytes_ >> 20,
                        " MiB chunk cache for ", all >> 20,
                        " MiB of samples: random samples decode whole chunks (read "
                        "amplification up to ",
                        chunk_samples_, "x); store the training set uncompressed"));
  if (chunked_) {
    const int64_t fit = cb > 0 ? cache_bytes_ / cb : 0;
    counters_->capacity = size_t(fit);
    counters_->filtered = filtered_;
    H5Id dapl(DT_H5(H5Pcreate(H5P_DATASET_ACCESS)), H5Pclose);
    // HDF5's advice: a prime number of hash slots, ~100x the chunks that fit.
    const int64_t slots = next_prime(std::max<int64_t>(521, std::min<int64_t>(100 * fit, 1 << 20)));
    DT_H5(H5Pset_chunk_cache(dapl.get(), size_t(slots), size_t(cache_bytes_), 1.0));
    images_.reset();  // an open dataset shares its chunk cache with later opens: close first
    images_ = open_h5_dataset(file_.get(), path_, "images", dapl.get());
  }
}

Hdf5Dataset::Hdf5Dataset(const std::string& path, const Hdf5Options& options)
    : path_(path), counters_(std::make_unique<Counters>()) {
  quiet_h5_errors();
  file_ = open_h5_read_only(path);
  const hid_t f = file_.get();
  watch_ = FileWatch(f, path);
  if (has_attribute(f, "layout"))
    if (const std::string layout = read_string_attribute(f, path, "layout"); layout != "raw")
      DT_USAGE(path, ": attribute 'layout' is '", layout, "': not a raw dataset file (open it with io::open_dataset)");
  // A converter's file that is not finished (image_store.hpp: `progress` is
  // removed when the conversion ends): its unwritten samples read as black
  // images of class 0.
  if (has_attribute(f, "progress"))
    DT_USAGE(path, ": an unfinished dtrain data imagefolder conversion (attribute 'progress'); run the same "
             "dtrain data imagefolder command again to finish it");
  classes_ = read_classes(f, path);

  images_ = open_h5_dataset(f, path, "images", H5P_DEFAULT);
  check_int_type(images_.get(), path, "/images", 1, false, "uint8");
  auto idims = dataset_dims(images_.get(), path, "/images");
  if (idims.size() != 4)
    DT_USAGE(path, ": /images: rank is ", idims.size(), ", expected 4 ([N, H, W, C])");
  if (idims[0] == 0) DT_USAGE(path, ": /images: holds no samples (N = 0)");
  if (idims[1] == 0 || idims[2] == 0 || idims[3] == 0)
    DT_USAGE(path, ": /images: empty sample shape [", idims[1], ", ", idims[2], ", ", idims[3],
             "]");
  n_ = int64_t(idims[0]);
  h_ = int64_t(idims[1]);
  w_ = int64_t(idims[2]);
  c_ = int64_t(idims[3]);
  inspect_layout(options);  // reopens /images with a chunk cache sized for random reads

  labels_ = read_labels(f, path, n_, classes_, "/images");
}

void Hdf5Dataset::read_range(int64_t begin, int64_t count, uint8_t* out) const {
  quiet_h5_errors();
  DT_CHECK(begin >= 0 && count >= 0 && begin + count <= n_, path_, ": /images: range [", begin,
           ", ", begin + count, ") outside [0, ", n_, ")");
  if (count == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  H5Id fspace(DT_H5(H5Dget_space(images_.get())), H5Sclose);
  hsize_t start[4] = {hsize_t(begin), 0, 0, 0};
  hsize_t cnt[4] = {hsize_t(count), hsize_t(h_), hsize_t(w_), hsize_t(c_)};
  DT_H5(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr));
  H5Id mspace(DT_H5(H5Screate_simple(4, cnt, nullptr)), H5Sclose);
  if (H5Dread(images_.get(), H5T_NATIVE_UINT8, mspace.get(), fspace.get(), H5P_DEFAULT, out) < 0) {
    watch_.check("/images");  // a file changed under the job: say so, not only that the read failed
    DT_USAGE(path_, ": /images: reading samples [", begin, ", ", begin + count, ") failed (a truncated or damaged file?)",
             h5_error_suffix());
  }
  watch_.check("/images");
  std::vector<int64_t> all(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) all[size_t(i)] = begin + i;
  count_read(all, count, 1,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void Hdf5Dataset::read_images(const std::vector<int64_t>& indices, uint8_t* out) const {
  quiet_h5_errors();
  if (indices.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i : indices)
    DT_CHECK(i >= 0 && i < n_, path_, ": /images: sample index ", i, " outside [0, ", n_, ")");

  std::vector<int64_t> sorted(indices);
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const bool in_place = sorted == indices;  // already sorted and distinct: no scatter
  std::vector<uint8_t> staging;
  uint8_t* dst = out;
  if (!in_place) {
    staging.resize(sorted.size() * size_t(sample_bytes()));
    dst = staging.data();
  }

  // One H5Dread per run of consecutive indices, in file order. (A single read of
  // the union of all runs is ~50x slower in HDF5 1.10: 50 ms vs 1 ms for 256
  // random Fashion-MNIST samples, measured.)
  H5Id fspace(DT_H5(H5Dget_space(images_.get())), H5Sclose);
  const size_t sb = size_t(sample_bytes());
  size_t runs = 0;
  for (size_t i = 0; i < sorted.size(); ++runs) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
    hsize_t start[4] = {hsize_t(sorted[i]), 0, 0, 0};
    hsize_t cnt[4] = {hsize_t(j - i), hsize_t(h_), hsize_t(w_), hsize_t(c_)};
    DT_H5(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr));
    H5Id mspace(DT_H5(H5Screate_simple(4, cnt, nullptr)), H5Sclose);
    if (H5Dread(images_.get(), H5T_NATIVE_UINT8, mspace.get(), fspace.get(), H5P_DEFAULT,
                dst + i * sb) < 0) {
      watch_.check("/images");  // a file changed under the job: say so, not only that the read failed
      DT_USAGE(path_, ": /images: reading samples [", sorted[i], ", ", sorted[j - 1] + 1,
               ") failed (a truncated or damaged file?)", h5_error_suffix());
    }
    i = j;
  }
  watch_.check("/images");
  if (!in_place) {
    for (size_t k = 0; k < indices.size(); ++k) {
      size_t pos =
          size_t(std::lower_bound(sorted.begin(), sorted.end(), indices[k]) - sorted.begin());
      std::memcpy(out + k * sb, staging.data() + pos * sb, sb);
    }
  }
  count_read(sorted, int64_t(indices.size()), int64_t(runs),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void Hdf5Dataset::read_stored(const std::vector<int64_t>& sorted, StoredSamples& out) const {
  for (size_t k = 1; k < sorted.size(); ++k)
    DT_CHECK(sorted[k] > sorted[k - 1], path_, ": read_stored: indices not increasing at position ", k);
  const size_t sb = size_t(sample_bytes());
  out.bytes.resize(sorted.size() * sb);
  out.offsets.resize(sorted.size() + 1);
  for (size_t k = 0; k <= sorted.size(); ++k) out.offsets[k] = k * sb;
  read_images(sorted, out.bytes.data());  // sorted and distinct: read in place
}

}  // namespace dtrain::io
