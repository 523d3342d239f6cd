// io/image_store.cpp — resumable raw / jpeg dataset writer (see image_store.hpp).
#include "io/image_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "io/h5_util.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/synced_file.hpp"  // fsync_path

namespace dtrain::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kKeyAttr = "resume_key";
constexpr const char* kProgressAttr = "progress";
constexpr int64_t kJpegChunkBytes = int64_t{1} << 20;  // /jpeg chunk (docs/data-formats.md)
constexpr int64_t kCopyBlock = int64_t{16} << 20;      // F.partial.jpeg → /jpeg copy block

const char* layout_name(StoreLayout l) { return l == StoreLayout::raw ? "raw" : "jpeg"; }

// A plain file written at known offsets; fsync'd at checkpoints.
class PlainFile {
 public:
  PlainFile() = default;
  // Opens `path`; keep_bytes ≥ 0: an existing file is truncated to that length
  // (a resumed run), -1: created empty.
  void open(const std::string& path, int64_t keep_bytes) {
    path_ = path;
    const int flags = keep_bytes < 0 ? (O_RDWR | O_CREAT | O_TRUNC) : (O_RDWR | O_CREAT);
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd_ < 0) DT_FAIL("cannot open ", path, ": ", std::strerror(errno));
    if (keep_bytes >= 0) {
      const off_t size = ::lseek(fd_, 0, SEEK_END);
      if (size < keep_bytes)
        DT_USAGE(path, ": holds ", size, " bytes, but the partial output says ", keep_bytes,
                 " were written; remove the partial files to start over");
      if (::ftruncate(fd_, keep_bytes) != 0) DT_FAIL("cannot truncate ", path, ": ", std::strerror(errno));
    }
    size_ = std::max<int64_t>(keep_bytes, 0);
  }
  ~PlainFile() { close(); }
  void append(const void* data, size_t bytes) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::pwrite(fd_, p, bytes, size_);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) DT_FAIL("writing ", path_, " failed: ", std::strerror(errno));
      p += n;
      bytes -= size_t(n);
      size_ += n;
    }
  }
  void read(int64_t offset, void* data, size_t bytes) const {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, bytes, offset);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) DT_FAIL("reading ", path_, " failed: ", n < 0 ? std::strerror(errno) : "unexpected end of file");
      p += n;
      bytes -= size_t(n);
      offset += n;
    }
  }
  void sync() {
    if (::fdatasync(fd_) != 0) DT_FAIL("fsync of ", path_, " failed: ", std::strerror(errno));
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// A fixed-size dataset, contiguous, its space allocated at creation.
H5Id create_fixed(hid_t f, const char* name, hid_t type, std::vector<hsize_t> dims) {
  H5Id space(DT_H5(H5Screate_simple(int(dims.size()), dims.data(), nullptr)), H5Sclose);
  H5Id dcpl(DT_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  DT_H5(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY));
  DT_H5(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
  hid_t d = H5Dcreate2(f, name, type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT);
  if (d < 0) DT_FAIL("cannot create /", name, h5_error_suffix());
  return H5Id(d, H5Dclose);
}

// Rows [begin, begin + count) of a 1-D or 2-D dataset (cols = 1 for 1-D).
void write_rows(hid_t d, hid_t mtype, int64_t begin, int64_t count, int64_t cols, const void* data) {
  if (count == 0) return;
  H5Id fspace(DT_H5(H5Dget_space(d)), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(fspace.get());
  hsize_t start[2] = {hsize_t(begin), 0}, cnt[2] = {hsize_t(count), hsize_t(cols)};
  DT_H5(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr));
  H5Id mspace(DT_H5(H5Screate_simple(rank, cnt, nullptr)), H5Sclose);
  if (H5Dwrite(d, mtype, mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0)
    DT_FAIL("dataset write failed", h5_error_suffix());
}

void read_rows(hid_t d, hid_t mtype, int64_t begin, int64_t count, int64_t cols, void* data) {
  if (count == 0) return;
  H5Id fspace(DT_H5(H5Dget_space(d)), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(fspace.get());
  hsize_t start[2] = {hsize_t(begin), 0}, cnt[2] = {hsize_t(count), hsize_t(cols)};
  DT_H5(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr));
  H5Id mspace(DT_H5(H5Screate_simple(rank, cnt, nullptr)), H5Sclose);
  if (H5Dread(d, mtype, mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0)
    DT_FAIL("dataset read failed", h5_error_suffix());
}

// `progress` rewritten in place (same type and size: only the value changes).
void record_progress(hid_t f, const StoreProgress& p) {
  const int64_t v[4] = {p.inputs_done, p.samples_done, p.report_bytes, p.jpeg_bytes};
  H5Id attr(DT_H5(H5Aopen(f, kProgressAttr, H5P_DEFAULT)), H5Aclose);
  DT_H5(H5Awrite(attr.get(), H5T_NATIVE_INT64, v));
}

void write_classes_attribute(hid_t f, int classes) {
  H5Id space(DT_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  H5Id attr(DT_H5(H5Acreate2(f, "classes", H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT)), H5Aclose);
  const int32_t c = classes;
  DT_H5(H5Awrite(attr.get(), H5T_NATIVE_INT32, &c));
}

// The descriptive attributes and /class_names of both layouts.
void write_description(hid_t f, const StoreSpec& s) {
  write_string_attribute(f, "layout", layout_name(s.layout));
  write_int_attribute(f, "size", s.size);
  if (s.layout == StoreLayout::jpeg) write_int_attribute(f, "quality", s.quality);
  write_string_list(f, "class_names", s.class_names);
}

// An existing partial file must come from the same conversion.
void check_resume_key(const std::string& partial, const std::string& key) {
  H5Id f;
  try {
    f = open_h5_read_only(partial);
  } catch (const UsageError& e) {  // e.g. a run killed while it created the file
    DT_USAGE(e.what(), " — the partial output of an earlier run, which cannot be continued; remove ", partial,
             "* to start over");
  }
  const std::string found = has_attribute(f.get(), kKeyAttr) ? read_string_attribute(f.get(), partial, kKeyAttr) : "";
  if (found != key)
    DT_USAGE(partial, ": left by a conversion with other options or another file list (",
             found.empty() ? "no resume key" : "resume key " + found, ", this one is ", key,
             "); rerun that command to finish it, or remove ", partial, "* to start over");
}

constexpr const char* kReportBytesAttr = "report_bytes";  // F: the length of F.skipped.txt

// F after its rename, finished: a raw F is shrunk to the samples stored
// (`progress`'s second value; skipped inputs leave no gap), then `progress` is
// removed — what makes it a finished file (readers refuse a file that has
// it) — and F is flushed, closed and synced. Does nothing to a finished F.
void finish_file(const std::string& path) {
  H5Id fapl = make_fapl_no_locking();
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.get());
  if (id < 0) DT_FAIL("cannot reopen ", path, " to finish it", h5_error_suffix());
  H5Id f(id, H5Fclose);
  if (has_attribute(f.get(), kProgressAttr)) {
    const auto v = read_ints_attribute(f.get(), path, kProgressAttr);
    if (v.size() != 4 || v[1] < 1)  // a file damaged outside dtrain: the user's to remove, not an internal error
      DT_USAGE(path, ": attribute 'progress' is damaged (", v.size(), " values); remove the file and convert again");
    if (h5_link_exists(f.get(), "images")) {  // raw
      for (const char* name : {"images", "labels"}) {
        H5Id d(DT_H5(H5Dopen2(f.get(), name, H5P_DEFAULT)), H5Dclose);
        H5Id space(DT_H5(H5Dget_space(d.get())), H5Sclose);
        hsize_t dims[4] = {0, 0, 0, 0};
        H5Sget_simple_extent_dims(space.get(), dims, nullptr);
        dims[0] = hsize_t(v[1]);
        DT_H5(H5Dset_extent(d.get(), dims));
      }
    }
    DT_H5(H5Adelete(f.get(), kProgressAttr));
  }
  const hid_t raw = f.release();
  if (H5Fclose(raw) < 0) DT_FAIL("closing ", path, " failed", h5_error_suffix());
  fsync_path(path, false);
}

// A report field: a backslash, tab, newline or carriage return inside it
// written as two characters (\\, \t, \n, \r), so each line stays PATH<TAB>REASON.
std::string escape_report_field(const std::string& v) {
  std::string out;
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

struct ImageStoreWriter::Impl {
  StoreSpec spec;
  std::function<void(int64_t)> kill_point;
  std::string partial;
  bool resumed = false;
  StoreProgress saved, cur;  // as of the last checkpoint / including the buffer
  int64_t stored_this_run = 0;

  std::unique_ptr<DatasetWriter> raw;  // raw: F.partial is the dataset itself
  std::unique_ptr<H5TempFile> meta;    // jpeg: F.partial holds offsets, shapes, labels
  H5Id offsets, shapes, labels;
  PlainFile jpeg_bytes, report;

  std::vector<uint8_t> buf;  // raw pixels or JPEG bytes since the last checkpoint
  std::vector<int32_t> buf_labels, buf_shapes;
  std::vector<uint64_t> buf_ends;  // jpeg: offsets[i + 1] of the buffered samples
  std::string buf_report;

  hid_t file() const { return raw ? raw->file() : meta->id(); }
};

ImageStoreWriter::ImageStoreWriter(const StoreSpec& spec, std::function<void(int64_t)> kill_point)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.spec = spec;
  m.kill_point = std::move(kill_point);
  m.partial = partial_path(spec.path);
  DT_CHECK(spec.inputs >= 1 && spec.size >= 1 && !spec.class_names.empty() && !spec.resume_key.empty(),
           spec.path, ": bad store spec");
  std::error_code ec;
  m.resumed = fs::exists(m.partial, ec);
  if (m.resumed) check_resume_key(m.partial, spec.resume_key);
  const int classes = int(spec.class_names.size());
  if (spec.layout == StoreLayout::raw) {
    m.raw = std::make_unique<DatasetWriter>(spec.path, spec.inputs, spec.size, spec.size, 3, classes,
                                            H5TempFile::Resumable{});
  } else {
    m.meta = std::make_unique<H5TempFile>(spec.path, H5TempFile::Resumable{});
    const hid_t f = m.meta->id();
    const hsize_t n = hsize_t(spec.inputs);
    if (m.meta->reopened()) {
      for (const char* name : {"offsets", "shapes", "labels"})
        if (!h5_link_exists(f, name)) DT_USAGE(m.partial, ": /", name, " is missing; remove it to start over");
      m.offsets = H5Id(DT_H5(H5Dopen2(f, "offsets", H5P_DEFAULT)), H5Dclose);
      m.shapes = H5Id(DT_H5(H5Dopen2(f, "shapes", H5P_DEFAULT)), H5Dclose);
      m.labels = H5Id(DT_H5(H5Dopen2(f, "labels", H5P_DEFAULT)), H5Dclose);
    } else {
      m.offsets = create_fixed(f, "offsets", H5T_STD_U64LE, {n + 1});
      m.shapes = create_fixed(f, "shapes", H5T_STD_I32LE, {n, 3});
      m.labels = create_fixed(f, "labels", H5T_STD_I32LE, {n});
      const uint64_t zero = 0;
      write_rows(m.offsets.get(), H5T_NATIVE_UINT64, 0, 1, 1, &zero);
    }
  }
  const hid_t f = m.file();
  if (m.resumed) {
    auto v = read_ints_attribute(f, m.partial, kProgressAttr);
    if (v.size() != 4 || v[0] < 0 || v[0] > spec.inputs || v[1] < 0 || v[1] > v[0] || v[2] < 0 || v[3] < 0)
      DT_USAGE(m.partial, ": attribute 'progress' is damaged; remove ", m.partial, "* to start over");
    m.saved = StoreProgress{v[0], v[1], v[2], v[3]};
  } else {
    write_string_attribute(f, kKeyAttr, spec.resume_key);
    write_ints_attribute(f, kProgressAttr, {0, 0, 0, 0});
    if (spec.layout == StoreLayout::raw) write_description(f, spec);
  }
  m.cur = m.saved;
  m.report.open(spec.path + ".skipped.txt.partial", m.resumed ? m.saved.report_bytes : -1);
  if (spec.layout == StoreLayout::jpeg)
    m.jpeg_bytes.open(m.partial + ".jpeg", m.resumed ? m.saved.jpeg_bytes : -1);
  if (spec.layout == StoreLayout::raw)
    m.raw->flush(true);
  else
    m.meta->flush(true);
}

ImageStoreWriter::~ImageStoreWriter() = default;

bool ImageStoreWriter::resumed() const { return impl_->resumed; }
const StoreProgress& ImageStoreWriter::progress() const { return impl_->cur; }
int64_t ImageStoreWriter::buffered_bytes() const { return int64_t(impl_->buf.size()); }

void ImageStoreWriter::add_raw(const RgbImage& image, int32_t label) {
  Impl& m = *impl_;
  DT_CHECK(m.raw && image.width == m.spec.size && image.height == m.spec.size, "add_raw: a ", image.width, "x",
           image.height, " image for a raw store of ", m.spec.size);
  DT_CHECK(m.cur.inputs_done < m.spec.inputs, "add_raw: more inputs than ", m.spec.inputs);
  m.buf.insert(m.buf.end(), image.pixels.begin(), image.pixels.end());
  m.buf_labels.push_back(label);
  ++m.cur.inputs_done;
  ++m.cur.samples_done;
  ++m.stored_this_run;
}

void ImageStoreWriter::add_jpeg(std::vector<uint8_t> jpeg, int height, int width, int32_t label) {
  Impl& m = *impl_;
  DT_CHECK(m.meta && !jpeg.empty(), "add_jpeg: not a jpeg store or an empty image");
  DT_CHECK(m.cur.inputs_done < m.spec.inputs, "add_jpeg: more inputs than ", m.spec.inputs);
  m.buf.insert(m.buf.end(), jpeg.begin(), jpeg.end());
  m.cur.jpeg_bytes += int64_t(jpeg.size());
  m.buf_ends.push_back(uint64_t(m.cur.jpeg_bytes));
  m.buf_shapes.insert(m.buf_shapes.end(), {height, width, 3});
  m.buf_labels.push_back(label);
  ++m.cur.inputs_done;
  ++m.cur.samples_done;
  ++m.stored_this_run;
}

void ImageStoreWriter::add_skipped(const std::string& path, const std::string& reason) {
  Impl& m = *impl_;
  DT_CHECK(m.cur.inputs_done < m.spec.inputs, "add_skipped: more inputs than ", m.spec.inputs);
  const std::string line = escape_report_field(path) + "\t" + escape_report_field(reason);
  m.buf_report += line + "\n";
  m.cur.report_bytes += int64_t(line.size() + 1);
  ++m.cur.inputs_done;
}

void ImageStoreWriter::checkpoint() {
  Impl& m = *impl_;
  if (m.cur.inputs_done == m.saved.inputs_done) return;
  const int64_t begin = m.saved.samples_done, count = m.cur.samples_done - m.saved.samples_done;
  if (m.raw) {
    m.raw->write(begin, count, m.buf, m.buf_labels);
    m.raw->flush(true);
  } else {
    m.jpeg_bytes.append(m.buf.data(), m.buf.size());
    m.jpeg_bytes.sync();
    write_rows(m.offsets.get(), H5T_NATIVE_UINT64, begin + 1, count, 1, m.buf_ends.data());
    write_rows(m.shapes.get(), H5T_NATIVE_INT32, begin, count, 3, m.buf_shapes.data());
    write_rows(m.labels.get(), H5T_NATIVE_INT32, begin, count, 1, m.buf_labels.data());
    m.meta->flush(true);
  }
  m.report.append(m.buf_report.data(), m.buf_report.size());
  m.report.sync();
  if (m.kill_point) m.kill_point(m.stored_this_run);
  record_progress(m.file(), m.cur);
  if (m.raw)
    m.raw->flush(false);
  else
    m.meta->flush(false);
  m.saved = m.cur;
  m.buf.clear();
  m.buf_labels.clear();
  m.buf_shapes.clear();
  m.buf_ends.clear();
  m.buf_report.clear();
}

int64_t ImageStoreWriter::commit() {
  Impl& m = *impl_;
  DT_CHECK(m.cur.inputs_done == m.spec.inputs, "commit after ", m.cur.inputs_done, " of ", m.spec.inputs, " inputs");
  checkpoint();
  const int64_t n = m.cur.samples_done;
  const std::string report_final = report_path(m.spec.path);
  auto finish_report = [&] {
    m.report.sync();
    m.report.close();
    std::error_code ec;
    fs::rename(m.report.path(), report_final, ec);
    if (ec) DT_FAIL("renaming ", m.report.path(), " to ", report_final, " failed: ", ec.message());
  };
  std::error_code ec;
  if (n == 0) {
    m.raw.reset();
    m.offsets.reset();
    m.shapes.reset();
    m.labels.reset();
    m.meta.reset();
    m.jpeg_bytes.close();
    // An F that --overwrite was to replace goes too, before the partial files
    // (a run stopped in between resumes them): the report describes this run.
    const bool removed = fs::remove(m.spec.path, ec);
    fs::remove(m.partial, ec);
    fs::remove(m.partial + ".jpeg", ec);
    finish_report();
    DT_USAGE(m.spec.path, ": none of the ", m.spec.inputs, " files could be decoded (see ", report_final, "); ",
             removed ? "the earlier file of that name was removed (--overwrite) and no new one written"
                     : "nothing written");
  }
  if (m.raw) {
    // F.partial becomes F as it is (all M rows, `progress` in it: readers refuse
    // it), then F is shrunk and loses `progress`; a run stopped in between
    // finishes it (finish_interrupted).
    write_ints_attribute(m.raw->file(), kReportBytesAttr, {m.cur.report_bytes});
    m.raw->commit(m.spec.inputs);
    m.raw.reset();
    finish_file(m.spec.path);
  } else {
    H5TempFile out(m.spec.path);
    const hid_t f = out.id();
    {
      const int64_t total = m.cur.jpeg_bytes;
      const hsize_t dims[1] = {hsize_t(total)};
      const hsize_t chunk[1] = {hsize_t(std::min(total, kJpegChunkBytes))};
      H5Id space(DT_H5(H5Screate_simple(1, dims, nullptr)), H5Sclose);
      H5Id dcpl(DT_H5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
      DT_H5(H5Pset_chunk(dcpl.get(), 1, chunk));
      DT_H5(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
      H5Id jpeg(H5Dcreate2(f, "jpeg", H5T_STD_U8LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
      if (!jpeg.valid()) DT_FAIL(out.temp_path(), ": cannot create /jpeg", h5_error_suffix());
      std::vector<uint8_t> block;
      for (int64_t at = 0; at < total; at += kCopyBlock) {
        const int64_t len = std::min(kCopyBlock, total - at);
        block.resize(size_t(len));
        m.jpeg_bytes.read(at, block.data(), block.size());
        write_rows(jpeg.get(), H5T_NATIVE_UINT8, at, len, 1, block.data());
      }
      std::vector<uint64_t> offsets(size_t(n) + 1);
      std::vector<int32_t> shapes(static_cast<size_t>(n) * 3), labels(static_cast<size_t>(n));
      read_rows(m.offsets.get(), H5T_NATIVE_UINT64, 0, n + 1, 1, offsets.data());
      read_rows(m.shapes.get(), H5T_NATIVE_INT32, 0, n, 3, shapes.data());
      read_rows(m.labels.get(), H5T_NATIVE_INT32, 0, n, 1, labels.data());
      if (offsets[0] != 0 || int64_t(offsets[size_t(n)]) != total)
        DT_USAGE(m.partial, ": its offsets (", offsets[0], " … ", offsets[size_t(n)], ") do not match the ", total,
                 " bytes of ", m.jpeg_bytes.path(), "; remove both and convert again");
      const hsize_t n1 = hsize_t(n);
      H5Id o = create_fixed(f, "offsets", H5T_STD_U64LE, {n1 + 1});
      H5Id s = create_fixed(f, "shapes", H5T_STD_I32LE, {n1, 3});
      H5Id l = create_fixed(f, "labels", H5T_STD_I32LE, {n1});
      write_rows(o.get(), H5T_NATIVE_UINT64, 0, n + 1, 1, offsets.data());
      write_rows(s.get(), H5T_NATIVE_INT32, 0, n, 3, shapes.data());
      write_rows(l.get(), H5T_NATIVE_INT32, 0, n, 1, labels.data());
      write_classes_attribute(f, int(m.spec.class_names.size()));
      write_description(f, m.spec);
      write_string_attribute(f, kKeyAttr, m.spec.resume_key);  // which conversion made F (finish_interrupted)
      write_ints_attribute(f, kReportBytesAttr, {m.cur.report_bytes});
    }
    out.commit();
    m.offsets.reset();
    m.shapes.reset();
    m.labels.reset();
    m.meta.reset();
    m.jpeg_bytes.close();
    fs::remove(m.partial, ec);
    fs::remove(m.partial + ".jpeg", ec);
  }
  finish_report();
  return int64_t(fs::file_size(m.spec.path, ec));
}

bool ImageStoreWriter::owns(const std::string& path, const StoreSpec& spec) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  try {
    H5Id f = open_h5_read_only(path);
    return has_attribute(f.get(), kKeyAttr) && read_string_attribute(f.get(), path, kKeyAttr) == spec.resume_key;
  } catch (const UsageError&) {
    return false;  // not an HDF5 file of this converter
  }
}

bool ImageStoreWriter::finish_interrupted(const StoreSpec& spec) {
  std::error_code ec;
  const std::string report_partial = spec.path + ".skipped.txt.partial";
  // F.partial present: the conversion is resumed (its commit writes F again);
  // only an F that took its name from this conversion's partial file, with
  // the report that goes with it, is finished here.
  if (fs::exists(partial_path(spec.path), ec) || !fs::exists(report_partial, ec) || !owns(spec.path, spec))
    return false;
  {
    H5Id f = open_h5_read_only(spec.path);
    if (!has_attribute(f.get(), kReportBytesAttr)) return false;
    const auto v = read_ints_attribute(f.get(), spec.path, kReportBytesAttr);
    if (v.size() != 1 || v[0] != int64_t(fs::file_size(report_partial, ec)) || ec) return false;
  }
  finish_file(spec.path);
  const std::string report = report_path(spec.path);
  fs::rename(report_partial, report, ec);
  if (ec) DT_FAIL("renaming ", report_partial, " to ", report, " failed: ", ec.message());
  const fs::path dir = fs::path(spec.path).parent_path();
  fsync_path(dir.empty() ? std::string(".") : dir.string(), true);
  return true;
}

}  // namespace dtrain::io
