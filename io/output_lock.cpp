// io/output_lock.cpp — see output_lock.hpp.
#include "io/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace dtrain::io {

namespace fs = std::filesystem;

OutputLock::OutputLock(const std::string& out, const std::string& who) : path_(out + ".lock") {
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) DT_USAGE("option 'out': cannot create ", path_, ": ", std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      char buf[256] = {0};  // the holder's line (it may not have written it yet)
      const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
      std::string holder(buf, n > 0 ? static_cast<size_t>(n) : 0);
      if (const size_t nl = holder.find('\n'); nl != std::string::npos) holder.resize(nl);
      ::close(fd_);
      DT_USAGE("option 'out': ", out, " is being written by another converter (", path_, " is held",
               holder.empty() ? std::string() : " by: " + format::visible(holder),
               "); wait for it to end or stop it, then run this again");
    }
    struct stat held {}, named {};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      char host[256] = {0};
      if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
      const std::string line = who + ", pid " + std::to_string(::getpid()) + " on " + host + "\n";
      if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) < 0) {
        // best effort: the lock is the flock, the text only names its holder
      }
      return;
    }
    ::close(fd_);  // its holder removed it between our open and flock: take the new one
  }
}

OutputLock::~OutputLock() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

int remove_stale_temporaries(const std::string& out, const std::string& who) {
  const fs::path p(out);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string prefix = p.filename().string() + ".tmp.";
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (!std::all_of(name.begin() + std::ptrdiff_t(prefix.size()), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::error_code rec;
    if (fs::remove(it->path(), rec)) {
      ++removed;
      log::info(who, ": removed ", it->path().string(), ", left by a run stopped while it wrote ", out);
    }
  }
  return removed;
}

}  // namespace dtrain::io
