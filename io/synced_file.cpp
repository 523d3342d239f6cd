// io/synced_file.cpp — files written whole or not at all (synced_file.hpp).
#include "io/synced_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2, RENAME_NOREPLACE (glibc ≥ 2.28)
#include <cstring>

#include "core/error.hpp"

namespace dtrain::io {

void fsync_path(const std::string& path, bool folder) {
  int fd = ::open(path.c_str(), folder ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) DT_FAIL("cannot open ", path, " for fsync: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !(folder && (err == EINVAL || err == EBADF)))
    DT_FAIL("fsync of ", path, " failed: ", std::strerror(err));
}

std::string write_file_synced(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    done += size_t(n);
  }
  std::string why = done == bytes.size() ? "" : std::strerror(errno);
  if (why.empty() && ::fsync(fd) != 0) why = std::string("fsync: ") + std::strerror(errno);
  if (::close(fd) != 0 && why.empty()) why = std::string("close: ") + std::strerror(errno);
  if (!why.empty()) ::unlink(path.c_str());
  return why;
}

std::string temp_name_for(const std::string& path) {
  std::string s = path;
  s += ".tmp.";  // appended, not + to_string(): GCC 12 warns falsely on that
  s += std::to_string(::getpid());
  return s;
}

TempName::~TempName() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

void TempName::rename_to(const std::string& final_path) {
  if (std::rename(path_.c_str(), final_path.c_str()) != 0)
    DT_FAIL("renaming ", path_, " to ", final_path, " failed: ", std::strerror(errno));
  path_.clear();
}

bool TempName::rename_new(const std::string& final_path) {
  if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) == 0) {
    path_.clear();
    return true;
  }
  if (errno == EEXIST) return false;
  if (errno != EINVAL && errno != ENOSYS)
    DT_FAIL("renaming ", path_, " to ", final_path, " failed: ", std::strerror(errno));
  // A file system without RENAME_NOREPLACE: link(2) refuses an existing name too.
  if (::link(path_.c_str(), final_path.c_str()) != 0) {
    if (errno == EEXIST) return false;
    DT_FAIL("linking ", path_, " to ", final_path, " failed: ", std::strerror(errno));
  }
  ::unlink(path_.c_str());  // the file lives on under final_path
  path_.clear();
  return true;
}

}  // namespace dtrain::io
