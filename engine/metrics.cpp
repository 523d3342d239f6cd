// engine/metrics.cpp — JSON Lines writer.
#include "engine/metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/error.hpp"

namespace dtrain::engine {

namespace {
// One record at a time in this process: the failure record may come from the
// watchdog's thread while the trainer's thread writes a step record.
std::timed_mutex g_write_mu;

// One record at the end of fd, whole or not at all (metrics.hpp).
void write_line(int fd, const std::string& path, const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  const off_t end = ::lseek(fd, 0, SEEK_END);  // the end of the last whole record
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = n < 0 ? errno : ENOSPC;
    if (end >= 0 && ::ftruncate(fd, end) != 0) {
      DT_FAIL("metrics file '", path, "': writing a '", record.value("kind", "?"), "' record failed (",
              std::strerror(err), ") and cutting the file back to its last whole record failed too (",
              std::strerror(errno), "): its last line is incomplete");
    }
    DT_FAIL("metrics file '", path, "': writing a '", record.value("kind", "?"), "' record failed: ",
            std::strerror(err), " (the file keeps the records before it)");
  }
}
}  // namespace

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd_ < 0) DT_USAGE("option 'metrics': cannot open '", path, "' for writing: ", std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (fd_ < 0) return;
  std::lock_guard<std::timed_mutex> lk(g_write_mu);
  write_line(fd_, path_, record);
}

void MetricsWriter::append_record(const std::string& path, const nlohmann::json& record) {
  std::lock_guard<std::timed_mutex> lk(g_write_mu);
  append_locked(path, record);
}

bool MetricsWriter::try_append_record(const std::string& path, const nlohmann::json& record, double wait_s) {
  std::unique_lock<std::timed_mutex> lk(g_write_mu, std::chrono::duration<double>(wait_s));
  if (!lk.owns_lock()) return false;
  append_locked(path, record);
  return true;
}

void MetricsWriter::append_locked(const std::string& path, const nlohmann::json& record) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND, 0644);
  if (fd < 0) DT_FAIL("metrics file '", path, "': cannot open it to append the run record: ", std::strerror(errno));
  try {
    write_line(fd, path, record);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace dtrain::engine
