// io/jpeg_dataset.cpp — JpegDataset: validation at open and coalesced reads
// (jpeg_dataset.hpp).
#include "io/jpeg_dataset.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "core/log.hpp"
#include "io/h5_checks.hpp"

namespace dtrain::io {

JpegDataset::~JpegDataset() = default;

void JpegDataset::open_jpeg_bytes() {
  const hid_t f = file_.get();
  H5Id probe = open_h5_dataset(f, path_, "jpeg");
  check_int_type(probe.get(), path_, "/jpeg", 1, false, "uint8");
  auto dims = dataset_dims(probe.get(), path_, "/jpeg");
  if (dims.size() != 1) DT_USAGE(path_, ": /jpeg: rank is ", dims.size(), ", expected 1 ([total bytes])");
  const uint64_t total = dims[0];
  if (offsets_.back() != total)
    DT_USAGE(path_, ": /offsets: offsets[N] = ", offsets_.back(), " but /jpeg holds ", total, " bytes");

  H5Id dcpl(H5Dget_create_plist(probe.get()), H5Pclose);
  if (!dcpl.valid()) DT_USAGE(path_, ": /jpeg: cannot read creation properties", h5_error_suffix());
  const bool chunked = H5Pget_layout(dcpl.get()) == H5D_CHUNKED;
  const int nfilters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    size_t nelem = 0;
    char name[128] = {0};
    H5Z_filter_t id = H5Pget_filter2(dcpl.get(), unsigned(i), &flags, &nelem, nullptr, sizeof name, name, &config);
    if (id < 0) DT_USAGE(path_, ": /jpeg: cannot read filter ", i, h5_error_suffix());
    if (H5Zfilter_avail(id) <= 0 && !(flags & H5Z_FLAG_OPTIONAL))
      DT_USAGE(path_, ": /jpeg: compressed with filter ", id, name[0] ? " (" : "", name, name[0] ? ")" : "",
               ", which this HDF5 lacks; install the filter plugin (HDF5_PLUGIN_PATH) or rewrite the file");
  }
  int64_t chunk_bytes = int64_t(total);
  if (chunked) {
    hsize_t cd[1] = {0};
    if (H5Pget_chunk(dcpl.get(), 1, cd) != 1) DT_USAGE(path_, ": /jpeg: cannot read chunk shape");
    chunk_bytes = int64_t(cd[0]);
  }
  if (nfilters > 0) {
    const std::string msg = "compressed: JPEG bytes do not compress, and every random read decodes whole "
                            "chunks; store /jpeg uncompressed";
    warnings_.push_back(msg);
    log::warn_from_rank0(path_, ": /jpeg: ", msg);
  } else {
    // Uncompressed: everything offsets[N] promises must be in the file.
    const hsize_t stored = H5Dget_storage_size(probe.get());
    if (stored < total)
      DT_USAGE(path_, ": /jpeg: only ", stored, " of its ", total,
               " bytes are stored in the file (an incomplete conversion?)");
  }
  probe.reset();

  // Chunk cache: off for uncompressed chunks (direct reads of the selection);
  // two chunks (at least 32 MiB) for compressed ones.
  H5Id dapl(DT_H5(H5Pcreate(H5P_DATASET_ACCESS)), H5Pclose);
  const int64_t cache = nfilters > 0 ? std::max<int64_t>(2 * chunk_bytes, int64_t{32} << 20) : 0;
  DT_H5(H5Pset_chunk_cache(dapl.get(), 521, size_t(cache), 1.0));
  jpeg_ = open_h5_dataset(f, path_, "jpeg", dapl.get());
}

JpegDataset::JpegDataset(const std::string& path) : path_(path) {
  quiet_h5_errors();
  file_ = open_h5_read_only(path);
  const hid_t f = file_.get();
  watch_ = FileWatch(f, path);
  const std::string layout = has_attribute(f, "layout") ? read_string_attribute(f, path, "layout") : "";
  if (layout != "jpeg")
    DT_USAGE(path, ": attribute 'layout' is ", layout.empty() ? std::string("missing") : "'" + layout + "'",
             ", expected 'jpeg'");
  classes_ = read_classes(f, path);
  if (!has_attribute(f, "size"))
    DT_USAGE(path, ": attribute 'size' (the stored shorter side) on the file root is missing");
  size_ = read_int_attribute(f, path, "size");
  if (size_ <= 0) DT_USAGE(path, ": attribute 'size': must be > 0, found ", size_);

  // /offsets: uint64 [N + 1], 0 = offsets[0] < offsets[1] < … (offsets[N] is checked against /jpeg).
  {
    H5Id off = open_h5_dataset(f, path, "offsets");
    check_int_type(off.get(), path, "/offsets", 8, false, "uint64");
    auto dims = dataset_dims(off.get(), path, "/offsets");
    if (dims.size() != 1) DT_USAGE(path, ": /offsets: rank is ", dims.size(), ", expected 1 ([N + 1])");
    if (dims[0] < 2) DT_USAGE(path, ": /offsets: holds ", dims[0], " entries: no samples (N + 1 ≥ 2 expected)");
    n_ = int64_t(dims[0]) - 1;
    offsets_.resize(dims[0]);
    if (H5Dread(off.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets_.data()) < 0)
      DT_USAGE(path, ": /offsets: read failed (a truncated or damaged file?)", h5_error_suffix());
    if (offsets_[0] != 0) DT_USAGE(path, ": /offsets: offsets[0] is ", offsets_[0], ", expected 0");
    for (int64_t i = 0; i < n_; ++i)
      if (offsets_[size_t(i) + 1] <= offsets_[size_t(i)])
        DT_USAGE(path, ": /offsets: not increasing at index ", i + 1, " (", offsets_[size_t(i)], " then ",
                 offsets_[size_t(i) + 1], "): image ", i, " would have no bytes");
  }
  open_jpeg_bytes();

  // /shapes: int32 [N, 3] of (H, W, C), H, W ≥ 1, C = 3.
  {
    H5Id sh = open_h5_dataset(f, path, "shapes");
    check_int_type(sh.get(), path, "/shapes", 4, true, "int32");
    auto dims = dataset_dims(sh.get(), path, "/shapes");
    if (dims.size() != 2 || dims[1] != 3)
      DT_USAGE(path, ": /shapes: shape is [", dims.size() > 0 ? std::to_string(dims[0]) : "",
               dims.size() > 1 ? ", " + std::to_string(dims[1]) : "", "], expected [N, 3] (H, W, C)");
    if (int64_t(dims[0]) != n_)
      DT_USAGE(path, ": /shapes: has ", dims[0], " rows but /offsets has ", n_, " samples");
    shapes_.resize(size_t(n_) * 3);
    if (H5Dread(sh.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, shapes_.data()) < 0)
      DT_USAGE(path, ": /shapes: read failed (a truncated or damaged file?)", h5_error_suffix());
    int64_t off_size = 0, first = -1;
    for (int64_t i = 0; i < n_; ++i) {
      const int32_t* s = &shapes_[size_t(i) * 3];
      if (s[0] < 1 || s[1] < 1)
        DT_USAGE(path, ": /shapes: image ", i, " has the empty size ", s[0], "x", s[1]);
      if (s[2] != 3) DT_USAGE(path, ": /shapes: image ", i, " has C = ", s[2], ", expected 3 (RGB)");
      if (std::min(s[0], s[1]) != size_) {
        if (first < 0) first = i;
        ++off_size;
      }
    }
    if (off_size > 0) {
      const std::string msg = detail::concat(off_size, " images (the first: ", first, ", ", shapes_[size_t(first) * 3],
                                             "x", shapes_[size_t(first) * 3 + 1],
                                             ") have a shorter side other than the file's size ", size_);
      warnings_.push_back(msg);
      log::warn_from_rank0(path, ": /shapes: ", msg);
    }
  }
  labels_ = read_labels(f, path, n_, classes_, "/offsets");
}

ImageShape JpegDataset::shape(int64_t i) const {
  DT_CHECK(i >= 0 && i < n_, path_, ": sample index ", i, " outside [0, ", n_, ")");
  const int32_t* s = &shapes_[size_t(i) * 3];
  return {s[0], s[1], s[2]};
}

ReadStats JpegDataset::read_stats() const {
  std::lock_guard<std::mutex> lk(stats_mu_);
  return stats_;
}

void JpegDataset::reset_read_stats() {
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_ = ReadStats{};
}

void JpegDataset::read_stored(const std::vector<int64_t>& sorted, StoredSamples& out) const {
  quiet_h5_errors();
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < sorted.size(); ++k) {
    DT_CHECK(sorted[k] >= 0 && sorted[k] < n_, path_, ": /jpeg: sample index ", sorted[k], " outside [0, ", n_, ")");
    DT_CHECK(k == 0 || sorted[k] > sorted[k - 1], path_, ": read_stored: indices not increasing at position ", k);
  }
  out.offsets.resize(sorted.size() + 1);
  out.offsets[0] = 0;
  for (size_t k = 0; k < sorted.size(); ++k) out.offsets[k + 1] = out.offsets[k] + size_t(bytes_of(sorted[k]));
  out.bytes.resize(out.offsets.back());

  // One hyperslab read per run of consecutive samples: their bytes are contiguous in /jpeg.
  H5Id fspace(DT_H5(H5Dget_space(jpeg_.get())), H5Sclose);
  int64_t requests = 0;
  for (size_t i = 0; i < sorted.size(); ++requests) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
    const hsize_t start[1] = {offsets_[size_t(sorted[i])]};
    const hsize_t count[1] = {offsets_[size_t(sorted[j - 1]) + 1] - start[0]};
    DT_H5(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr));
    H5Id mspace(DT_H5(H5Screate_simple(1, count, nullptr)), H5Sclose);
    if (H5Dread(jpeg_.get(), H5T_NATIVE_UINT8, mspace.get(), fspace.get(), H5P_DEFAULT,
                out.bytes.data() + out.offsets[i]) < 0) {
      watch_.check("/jpeg");  // a file changed under the job: say so, not only that the read failed
      DT_USAGE(path_, ": /jpeg: reading the bytes of samples [", sorted[i], ", ", sorted[j - 1] + 1,
               ") failed (a truncated or damaged file?)", h5_error_suffix());
    }
    i = j;
  }
  watch_.check("/jpeg");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_.calls += 1;
  stats_.samples += int64_t(sorted.size());
  stats_.bytes_delivered += int64_t(out.bytes.size());
  stats_.bytes_from_chunks += int64_t(out.bytes.size());  // direct reads of the selection
  stats_.requests += requests;
  stats_.seconds += secs;
}

}  // namespace dtrain::io
