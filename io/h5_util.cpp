// io/h5_util.cpp — HDF5 handle, error and durable-write helpers (see h5_util.hpp).
#include "io/h5_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "core/format.hpp"

namespace dtrain::io {

namespace fs = std::filesystem;

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

// fsync a path opened with POSIX; `what` names it in the error.
void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) DT_FAIL("cannot open ", path, " for fsync: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); the data itself is synced.
  if (rc != 0 && !(directory && (err == EINVAL || err == EBADF)))
    DT_FAIL("fsync of ", path, " failed: ", std::strerror(err));
}
}  // namespace

std::string h5_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
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
  if (f < 0) DT_FAIL("cannot create ", temp_path_, h5_error_suffix());
  file_ = H5Id(f, H5Fclose);
}

H5TempFile::~H5TempFile() {
  if (committed_) return;
  file_.reset();
  std::error_code ec;
  fs::remove(temp_path_, ec);
}

void H5TempFile::commit() {
  DT_CHECK(!committed_, "commit called twice for ", final_path_);
  if (H5Fflush(file_.get(), H5F_SCOPE_LOCAL) < 0)
    DT_FAIL("flushing ", temp_path_, " failed", h5_error_suffix());
  ssize_t open_objects = H5Fget_obj_count(file_.get(), H5F_OBJ_ALL | H5F_OBJ_LOCAL);
  DT_CHECK(open_objects == 1, temp_path_, ": ", open_objects - 1, " objects still open at commit");
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
