// io/h5_util.cpp — HDF5 handle, error and durable-write helpers (see h5_util.hpp).
#include "io/h5_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.hpp"
#include "core/format.hpp"
#include "io/synced_file.hpp"  // fsync_path

namespace dtrain::io {

namespace fs = std::filesystem;

// HDF5's exit handler closes what is still open; a file whose close failed
// (a full disk) stays open inside the library, and HDF5 1.10 crashes closing it
// there (SIGSEGV in H5F__close_cb after dtrain's error message, tests/
// test_full_disk.cpp). dtrain closes every file it wrote before it exits
// (writers commit or remove their temporaries as the stack unwinds), so the
// handler is not needed: turned off before the first HDF5 call of the process.
[[maybe_unused]] const herr_t g_h5_no_atexit = H5dont_atexit();

void quiet_h5_errors() {
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

namespace {
herr_t collect_innermost(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  // Walking downward (API call first), the last entry is the innermost one.
  if (err->desc && err->desc[0]) *static_cast<std::string*>(data) = err->desc;
  return 0;
}

}  // namespace

namespace {
// The value of `key = '...'` or `key = ...,` in an HDF5 description ("" if none).
std::string h5_field(const std::string& d, const std::string& key) {
  const size_t at = d.find(key + " = ");
  if (at == std::string::npos) return {};
  size_t b = at + key.size() + 3, e;
  if (b < d.size() && d[b] == '\'') {
    e = d.find('\'', ++b);
  } else {
    e = d.find(',', b);
  }
  return d.substr(b, (e == std::string::npos ? d.size() : e) - b);
}
}  // namespace

std::string h5_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  // One line: the sec2 driver's I/O failures span two ("file write failed:
  // time = …\n, filename = …, errno = 28, error message = 'No space left on
  // device', buf = …"); the system's message goes first, the buffer address
  // and sizes are dropped.
  for (char& c : detail)
    if (c == '\n' || c == '\r') c = ' ';
  if (const std::string msg = h5_field(detail, "error message"); !msg.empty()) {
    // What failed: the text before the first "key = value" field and its ':' or ','.
    const std::string head = detail.substr(0, detail.find(" = "));
    const std::string what = head.substr(0, std::min(head.rfind(':'), head.rfind(',')));
    const std::string file = h5_field(detail, "filename"), err = h5_field(detail, "errno");
    return msg + (err.empty() ? "" : " (errno " + err + ")") + ": " + what + (file.empty() ? "" : " of '" + file + "'");
  }
  return detail;
}

std::string h5_error_suffix() {
  std::string d = h5_error_detail();
  return d.empty() ? std::string() : " (HDF5: " + d + ")";
}

H5Id make_fapl_no_locking() {
  quiet_h5_errors();
  H5Id fapl(DT_H5(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
  // Parallel file systems often lack flock; readers never need the lock.
  DT_H5(H5Pset_file_locking(fapl.get(), false, true));
  return fapl;
}

H5Id open_h5_read_only(const std::string& path) {
  quiet_h5_errors();
  std::error_code ec;
  if (!fs::exists(path, ec)) DT_USAGE(format::missing_path(path), ": no such file");
  if (fs::is_directory(path, ec)) DT_USAGE(path, ": is a directory, not an HDF5 file");
  htri_t is_h5 = H5Fis_hdf5(path.c_str());
  if (is_h5 < 0) DT_USAGE(path, ": cannot read file", h5_error_suffix());
  if (is_h5 == 0) DT_USAGE(path, ": not an HDF5 file (no HDF5 signature)");
  H5Id fapl = make_fapl_no_locking();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (f < 0) DT_USAGE(path, ": cannot open HDF5 file (truncated or corrupt?)", h5_error_suffix());
  return H5Id(f, H5Fclose);
}

namespace {
int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }
}  // namespace

FileWatch::FileWatch(hid_t file, std::string path) : path_(std::move(path)) {
  H5Id fapl(H5Fget_access_plist(file), H5Pclose);
  void* handle = nullptr;
  // The sec2 driver's handle is a pointer to its descriptor.
  if (fapl.get() < 0 || H5Pget_driver(fapl.get()) != H5FD_SEC2 ||
      H5Fget_vfd_handle(file, fapl.get(), &handle) < 0 || handle == nullptr) {
    h5_error_detail();  // clears the stack
    return;
  }
  struct stat st;
  if (::fstat(*static_cast<int*>(handle), &st) != 0) return;
  fd_ = *static_cast<int*>(handle);
  size_ = int64_t(st.st_size);
  mtime_ns_ = mtime_ns(st);
}

void FileWatch::check(const char* what) const {
  if (fd_ < 0) return;
  struct stat st;
  if (::fstat(fd_, &st) != 0) DT_FAIL(path_, ": ", what, ": cannot stat the open file: ", std::strerror(errno));
  if (int64_t(st.st_size) == size_ && mtime_ns(st) == mtime_ns_) return;
  DT_FAIL(path_, ": ", what, ": the file changed while this job read it (size ", size_, " → ", int64_t(st.st_size),
          " bytes", mtime_ns(st) != mtime_ns_ ? ", modified since it was opened" : "",
          "): samples read from it may be wrong (HDF5 reads past a shrunken end as zeros). A copy, truncation "
          "or re-staging of a file in use? Let it finish, then resume from the last checkpoint");
}

bool h5_link_exists(hid_t loc, const char* name) { return H5Lexists(loc, name, H5P_DEFAULT) > 0; }

std::string h5_type_name(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: {
      std::string s = H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int";
      return s + std::to_string(8 * H5Tget_size(type));
    }
    case H5T_FLOAT:
      return "float" + std::to_string(8 * H5Tget_size(type));
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_REFERENCE:
      return "reference";
    case H5T_VLEN:
      return "vlen";
    default:
      return "unknown type";
  }
}

H5TempFile::H5TempFile(const std::string& final_path)
    : final_path_(final_path), temp_path_(final_path + ".tmp." + std::to_string(::getpid())) {
  quiet_h5_errors();
  H5Id fapl = make_fapl_no_locking();
  hid_t f = H5Fcreate(temp_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  if (f < 0) {
    const std::string why = h5_error_suffix();
    std::error_code ec;
    fs::remove(temp_path_, ec);  // what a failed create left (a full disk: an empty file)
    DT_FAIL("cannot create ", temp_path_, why);
  }
  file_ = H5Id(f, H5Fclose);
}

H5TempFile::H5TempFile(const std::string& final_path, Resumable)
    : final_path_(final_path), temp_path_(final_path + ".partial"), resumable_(true) {
  quiet_h5_errors();
  H5Id fapl = make_fapl_no_locking();
  std::error_code ec;
  if (fs::exists(temp_path_, ec)) {
    hid_t f = H5Fopen(temp_path_.c_str(), H5F_ACC_RDWR, fapl.get());
    if (f < 0)
      DT_USAGE(temp_path_, ": cannot reopen the partial output of an earlier run", h5_error_suffix(),
               "; remove it to start over");
    file_ = H5Id(f, H5Fclose);
    reopened_ = true;
    return;
  }
  hid_t f = H5Fcreate(temp_path_.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get());
  if (f < 0) DT_FAIL("cannot create ", temp_path_, h5_error_suffix());
  file_ = H5Id(f, H5Fclose);
}

H5TempFile::~H5TempFile() {
  if (committed_) return;
  file_.reset();
  if (resumable_) return;  // kept for the next run
  std::error_code ec;
  fs::remove(temp_path_, ec);
}

void H5TempFile::flush(bool durable) {
  if (H5Fflush(file_.get(), H5F_SCOPE_LOCAL) < 0) DT_FAIL("flushing ", temp_path_, " failed", h5_error_suffix());
  if (durable) fsync_path(temp_path_, false);
}

void H5TempFile::commit() {
  DT_CHECK(!committed_, "commit called twice for ", final_path_);
  if (H5Fflush(file_.get(), H5F_SCOPE_LOCAL) < 0)
    DT_FAIL("flushing ", temp_path_, " failed", h5_error_suffix());
  // Datasets, groups, types and attributes of this file; not file ids, which
  // HDF5 counts across files: one whose close failed (a full disk) stays open
  // inside the library and made every later commit of the process fail here.
  const ssize_t open_objects = H5Fget_obj_count(
      file_.get(), H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_ATTR | H5F_OBJ_LOCAL);
  DT_CHECK(open_objects == 0, temp_path_, ": ", open_objects, " objects still open at commit");
  hid_t f = file_.release();  // closed here with a checked call
  if (H5Fclose(f) < 0) DT_FAIL("closing ", temp_path_, " failed", h5_error_suffix());
  fsync_path(temp_path_, false);
  std::error_code ec;
  fs::rename(temp_path_, final_path_, ec);
  if (ec) DT_FAIL("renaming ", temp_path_, " to ", final_path_, " failed: ", ec.message());
  committed_ = true;
  fs::path dir = fs::path(final_path_).parent_path();
  fsync_path(dir.empty() ? std::string(".") : dir.string(), true);
}

}  // namespace dtrain::io

// ---- attributes and string lists -------------------------------------------------

namespace dtrain::io {

namespace {
void replace_attribute(hid_t loc, const char* name, hid_t ftype, hid_t space, hid_t mtype, const void* value) {
  if (H5Aexists(loc, name) > 0) DT_H5(H5Adelete(loc, name));
  H5Id attr(H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) DT_FAIL("cannot create attribute '", name, "'", h5_error_suffix());
  if (H5Awrite(attr.get(), mtype, value) < 0) DT_FAIL("writing attribute '", name, "' failed", h5_error_suffix());
}

H5Id open_attribute(hid_t loc, const std::string& path, const char* name) {
  if (H5Aexists(loc, name) <= 0) DT_USAGE(path, ": attribute '", name, "' is missing");
  H5Id attr(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) DT_USAGE(path, ": attribute '", name, "': cannot open", h5_error_suffix());
  return attr;
}
}  // namespace

bool has_attribute(hid_t loc, const char* name) { return H5Aexists(loc, name) > 0; }

void write_int_attribute(hid_t loc, const char* name, int64_t value) {
  H5Id space(DT_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  replace_attribute(loc, name, H5T_STD_I64LE, space.get(), H5T_NATIVE_INT64, &value);
}

void write_ints_attribute(hid_t loc, const char* name, const std::vector<int64_t>& values) {
  DT_CHECK(!values.empty(), "attribute '", name, "': no values");
  hsize_t n = values.size();
  H5Id space(DT_H5(H5Screate_simple(1, &n, nullptr)), H5Sclose);
  replace_attribute(loc, name, H5T_STD_I64LE, space.get(), H5T_NATIVE_INT64, values.data());
}

void write_string_attribute(hid_t loc, const char* name, const std::string& value) {
  DT_CHECK(!value.empty(), "attribute '", name, "': empty string");
  H5Id type(DT_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  DT_H5(H5Tset_size(type.get(), value.size()));
  DT_H5(H5Tset_strpad(type.get(), H5T_STR_NULLPAD));
  H5Id space(DT_H5(H5Screate(H5S_SCALAR)), H5Sclose);
  replace_attribute(loc, name, type.get(), space.get(), type.get(), value.data());
}

int64_t read_int_attribute(hid_t loc, const std::string& path, const char* name) {
  auto v = read_ints_attribute(loc, path, name);
  if (v.size() != 1) DT_USAGE(path, ": attribute '", name, "': expected one integer, found ", v.size());
  return v[0];
}

std::vector<int64_t> read_ints_attribute(hid_t loc, const std::string& path, const char* name) {
  H5Id attr = open_attribute(loc, path, name);
  H5Id type(DT_H5(H5Aget_type(attr.get())), H5Tclose);
  H5Id space(DT_H5(H5Aget_space(attr.get())), H5Sclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    DT_USAGE(path, ": attribute '", name, "': ", h5_type_name(type.get()), ", expected integers");
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n <= 0) DT_USAGE(path, ": attribute '", name, "': empty");
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, v.data()) < 0)
    DT_USAGE(path, ": attribute '", name, "': cannot read", h5_error_suffix());
  return v;
}

std::string read_string_attribute(hid_t loc, const std::string& path, const char* name) {
  H5Id attr = open_attribute(loc, path, name);
  H5Id type(DT_H5(H5Aget_type(attr.get())), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING)
    DT_USAGE(path, ": attribute '", name, "': ", h5_type_name(type.get()), ", expected a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Id mtype(DT_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
    DT_H5(H5Tset_size(mtype.get(), H5T_VARIABLE));
    char* s = nullptr;
    if (H5Aread(attr.get(), mtype.get(), &s) < 0)
      DT_USAGE(path, ": attribute '", name, "': cannot read", h5_error_suffix());
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  const size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0)
    DT_USAGE(path, ": attribute '", name, "': cannot read", h5_error_suffix());
  out.resize(std::strlen(out.c_str()));  // NULLPAD / NULLTERM padding
  return out;
}

void write_string_list(hid_t loc, const char* name, const std::vector<std::string>& values) {
  DT_CHECK(!values.empty(), "/", name, ": no strings");
  H5Id type(DT_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
  DT_H5(H5Tset_size(type.get(), H5T_VARIABLE));
  DT_H5(H5Tset_cset(type.get(), H5T_CSET_UTF8));
  hsize_t n = values.size();
  H5Id space(DT_H5(H5Screate_simple(1, &n, nullptr)), H5Sclose);
  H5Id d(H5Dcreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (!d.valid()) DT_FAIL("cannot create /", name, h5_error_suffix());
  std::vector<const char*> p;
  for (const auto& v : values) p.push_back(v.c_str());
  if (H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()) < 0)
    DT_FAIL("writing /", name, " failed", h5_error_suffix());
}

std::vector<std::string> read_string_list(hid_t loc, const std::string& path, const char* name) {
  if (!h5_link_exists(loc, name)) DT_USAGE(path, ": /", name, ": dataset is missing");
  H5Id d(H5Dopen2(loc, name, H5P_DEFAULT), H5Dclose);
  if (!d.valid()) DT_USAGE(path, ": /", name, ": cannot open", h5_error_suffix());
  H5Id ftype(DT_H5(H5Dget_type(d.get())), H5Tclose);
  H5Id space(DT_H5(H5Dget_space(d.get())), H5Sclose);
  if (H5Tget_class(ftype.get()) != H5T_STRING || H5Sget_simple_extent_ndims(space.get()) != 1)
    DT_USAGE(path, ": /", name, ": expected a 1-D list of strings, found ", h5_type_name(ftype.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<std::string> out;
  if (n <= 0) return out;
  if (H5Tis_variable_str(ftype.get()) > 0) {
    H5Id mtype(DT_H5(H5Tcopy(H5T_C_S1)), H5Tclose);
    DT_H5(H5Tset_size(mtype.get(), H5T_VARIABLE));
    DT_H5(H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get())));
    std::vector<char*> p(size_t(n), nullptr);
    if (H5Dread(d.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()) < 0)
      DT_USAGE(path, ": /", name, ": cannot read", h5_error_suffix());
    for (char* s : p) out.emplace_back(s ? s : "");
    H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, p.data());
  } else {
    const size_t size = H5Tget_size(ftype.get());
    std::vector<char> buf(size * size_t(n));
    if (H5Dread(d.get(), ftype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
      DT_USAGE(path, ": /", name, ": cannot read", h5_error_suffix());
    for (hssize_t i = 0; i < n; ++i) {
      std::string s(buf.data() + size_t(i) * size, size);
      s.resize(std::strlen(s.c_str()));
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace dtrain::io
