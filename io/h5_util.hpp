// io/h5_util.hpp — small helpers over the HDF5 C API shared by io/ files.
//
// - H5Id: an owning hid_t (RAII), closed with the matching H5*close call.
// - quiet_h5_errors(): HDF5 prints its error stack to stderr by default; dtrain
//   produces its own messages instead. The HDF5 build on Debian is threadsafe,
//   and in a threadsafe build the error-printing setting is per thread, so
//   every public io/ entry point calls this (cheap after the first call).
// - h5_error_detail(): the innermost message of this thread's HDF5 error stack
//   (e.g. "truncated file: eof = 1024, ..."), to append to our own messages.
// - open_h5_read_only(): opens a file read-only with file locking off
//   (DESIGN.md §5), checking existence and the HDF5 signature first.
// - H5TempFile: a file created under a temporary name and made durable on
//   commit (flush, close, fsync, rename, fsync of the directory), so a killed
//   writer never leaves a half-written file under the final name.
//
// Errors: open_h5_read_only throws dtrain::UsageError naming the path; the
// writer side throws dtrain::Error (a write failure is not the user's input).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

// DT_CHECK_H5 with HDF5's own innermost message appended (io/ shorthand).
#define DT_H5(call) DT_CHECK_H5(call, ::dtrain::io::h5_error_suffix())

namespace dtrain::io {

class H5Id {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Id() = default;
  H5Id(hid_t id, Closer close) : id_(id), close_(close) {}
  ~H5Id() { reset(); }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Gives up ownership without closing; returns the id.
  hid_t release() {
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

// Turns off HDF5's automatic error printing for the calling thread.
void quiet_h5_errors();

// The innermost description on this thread's HDF5 error stack ("" when empty),
// on one line; an I/O failure's as "<system message> (errno N): <what> of
// '<file>'" ("No space left on device (errno 28): file write failed of 'x.h5'").
// Clears the stack.
std::string h5_error_detail();

// " (HDF5: <detail>)" or "" — for appending to a message.
std::string h5_error_suffix();

// Opens `path` read-only, file locking off. Throws UsageError
// "<path>: no such file" / "<path>: not an HDF5 file" /
// "<path>: cannot open HDF5 file (HDF5: truncated file ...)".
H5Id open_h5_read_only(const std::string& path);

// Does the link `name` exist directly under `loc` (a file or group)?
bool h5_link_exists(hid_t loc, const char* name);

// A readable name for an HDF5 datatype: "uint8", "int64", "float32", "string", ...
std::string h5_type_name(hid_t type);

// Small attributes and string lists (dtrain data imagefolder's files; docs/data-formats.md):
//   - an int attribute is int64 (H5T_STD_I64LE) scalar, an int vector int64 1-D;
//   - a string attribute is a fixed-length ASCII string of exactly its bytes
//     (H5T_C_S1, NULLPAD), scalar; read_string_attribute also reads
//     variable-length ones (h5py's default);
//   - a string list is a 1-D dataset of variable-length UTF-8 strings.
// Writers throw Error; readers throw UsageError naming `path` and the object.
// write_* replace an attribute of the same name.
void write_int_attribute(hid_t loc, const char* name, int64_t value);
void write_ints_attribute(hid_t loc, const char* name, const std::vector<int64_t>& values);
void write_string_attribute(hid_t loc, const char* name, const std::string& value);
bool has_attribute(hid_t loc, const char* name);
int64_t read_int_attribute(hid_t loc, const std::string& path, const char* name);
std::vector<int64_t> read_ints_attribute(hid_t loc, const std::string& path, const char* name);
std::string read_string_attribute(hid_t loc, const std::string& path, const char* name);
void write_string_list(hid_t loc, const char* name, const std::vector<std::string>& values);
std::vector<std::string> read_string_list(hid_t loc, const std::string& path, const char* name);

// A file access property list with file locking off (caller owns it). HDF5
// refuses to open a file twice in one process with different locking flags
// ("file locking flag values don't match"), so every io/ open uses this one.
H5Id make_fapl_no_locking();

// A file open for reading, watched for changes made under the job: the size
// and modification time of HDF5's descriptor at open, compared after reads.
// HDF5's sec2 driver reads past a shrunken end as zeros without an error (a
// dataset truncated by a copy, a quota or a re-staging while a job read it
// trained on blank images, silently: a helper's finding, 2026-12-04). fstat of
// the open descriptor, not stat of the path: a file replaced by rename leaves
// the open one intact, and is not an error. With a driver other than sec2 the
// watch is inert.
class FileWatch {
 public:
  FileWatch() = default;
  FileWatch(hid_t file, std::string path);
  // Throws Error "<path>: <what>: the file changed while this job read it
  // (size A → B bytes, modified …)": the samples just read may be wrong.
  void check(const char* what) const;

 private:
  std::string path_;
  int fd_ = -1;           // HDF5's descriptor (not owned); -1: inert
  int64_t size_ = 0;      // bytes at open
  int64_t mtime_ns_ = 0;  // st_mtim at open, ns since the epoch
};

class H5TempFile {
 public:
  // Creates "<final_path>.tmp.<pid>" (truncating a stale one). Throws Error.
  explicit H5TempFile(const std::string& final_path);
  // The resumable kind (dtrain data imagefolder): the temporary file is
  // "<final_path>.partial"; an existing one is opened read-write (reopened()),
  // else it is created. Not committed, it is closed and kept, so a later run
  // can continue it. Throws UsageError when an existing one cannot be opened.
  struct Resumable {};
  H5TempFile(const std::string& final_path, Resumable);
  // Not committed: closes the temporary file and removes it (the resumable
  // kind: closes and keeps it).
  ~H5TempFile();
  H5TempFile(const H5TempFile&) = delete;
  H5TempFile& operator=(const H5TempFile&) = delete;

  hid_t id() const { return file_.get(); }
  const std::string& temp_path() const { return temp_path_; }
  bool reopened() const { return reopened_; }
  // H5Fflush; with `durable` also fsync, so what was written survives a crash.
  void flush(bool durable);
  // Flushes and closes the file, fsyncs it, renames it to the final path and
  // fsyncs the directory. All objects opened in the file must be closed first.
  void commit();

 private:
  std::string final_path_;
  std::string temp_path_;
  H5Id file_;
  bool committed_ = false;
  bool resumable_ = false, reopened_ = false;
};

}  // namespace dtrain::io
