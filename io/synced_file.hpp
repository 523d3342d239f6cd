// io/synced_file.hpp — small files written whole or not at all: the bytes go
// to a temporary name in the same folder, are written, fsynced and closed
// (each step checked), and only then moved to the final name, so that a full
// disk or a killed writer never leaves a cut-off file under that name. Used by
// the checkpoint folder's `latest` pointer (io/checkpoint.cpp), the HDF5
// writer's commit (io/h5_util.cpp) and `dtrain tune`'s outputs
// (engine/tune_run.cpp).
//
// Errors: write_file_synced returns why it failed (strerror), so that callers
// choose the error kind and name the file as the user knows it; the others
// throw dtrain::Error (a write failure is not the user's input).
#pragma once

#include <string>

namespace dtrain::io {

// fsync of a file or a folder by its path. Some file systems refuse fsync on
// a folder (EINVAL); the files themselves are synced then, which is all they
// offer. Throws Error "fsync of PATH failed: <strerror>".
void fsync_path(const std::string& path, bool folder);

// Writes `path` holding `bytes`, fsynced, closed (created, or truncated: give
// a name of the caller's own, e.g. temp_name_for). Returns "" on success,
// else why not (strerror, "fsync: …" or "close: …"); a failed file is removed.
std::string write_file_synced(const std::string& path, const std::string& bytes);

// "<path>.tmp.<pid>": a temporary name beside `path`, in its folder (so that a
// rename onto `path` stays on one file system).
std::string temp_name_for(const std::string& path);

// A temporary file, removed on scope exit unless it was moved into place.
class TempName {
 public:
  explicit TempName(std::string path) : path_(std::move(path)) {}
  ~TempName();
  TempName(const TempName&) = delete;
  TempName& operator=(const TempName&) = delete;
  const std::string& path() const { return path_; }
  // rename(2) onto final_path, replacing what is there. Throws Error.
  void rename_to(const std::string& final_path);
  // Moves into place only where nothing named final_path exists, atomically
  // (renameat2 RENAME_NOREPLACE; where the file system lacks it, link(2) then
  // unlink of the temporary). Returns false, the temporary kept until scope
  // exit, when final_path exists (a file that appeared since it was checked);
  // throws Error for any other failure.
  bool rename_new(const std::string& final_path);

 private:
  std::string path_;
};

}  // namespace dtrain::io
