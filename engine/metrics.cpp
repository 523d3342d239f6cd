// engine/metrics.cpp — JSON Lines writer.
#include "engine/metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/error.hpp"
#include "core/format.hpp"

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
    // Nothing of the record written (a file made read-only): nothing to cut.
    if (done > 0 && end >= 0 && ::ftruncate(fd, end) != 0) {
      DT_FAIL("metrics file '", path, "': writing a '", record.value("kind", "?"), "' record failed (",
              std::strerror(err), ") and cutting the file back to its last whole record failed too (",
              std::strerror(errno), "): its last line is incomplete");
    }
    DT_FAIL("metrics file '", path, "': writing a '", record.value("kind", "?"), "' record failed: ",
            std::strerror(err), " (the file keeps the records before it)");
  }
}
}  // namespace

namespace {
bool is_record(const nlohmann::json& j) { return j.is_object() && j.contains("kind") && j["kind"].is_string(); }
}  // namespace

bool is_metrics_line(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos ||
         is_record(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
}

MetricsTail metrics_tail(const std::string& line) {
  if (line.find_first_not_of('\0') == std::string::npos) return MetricsTail::cut;  // zeros only
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (is_record(j)) return MetricsTail::complete;
  return j.is_discarded() && line.starts_with('{') ? MetricsTail::cut : MetricsTail::foreign;
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  fd_ = ::open(path.c_str(), (append ? O_RDWR : O_WRONLY) | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd_ < 0) DT_USAGE("option 'metrics': cannot open '", path, "' for writing: ", std::strerror(errno));
  if (append) cut_partial_last_line();
}

// A file whose last line has no newline (a writer killed mid-record, a copy
// cut short) would have the next record glued onto it, and both lost to a
// reader: the fragment, never a whole record, is cut off and shown.
void MetricsWriter::cut_partial_last_line() {
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  if (size <= 0) return;
  char last = '\n';
  if (::pread(fd_, &last, 1, size - 1) != 1 || last == '\n') return;
  off_t start = size;  // the fragment: from after the last newline to the end
  char buf[4096];
  while (start > 0) {
    const off_t from = std::max<off_t>(0, start - static_cast<off_t>(sizeof buf));
    const ssize_t n = ::pread(fd_, buf, static_cast<size_t>(start - from), from);
    if (n != start - from) return;  // unreadable: leave the file as it is
    if (const void* nl = ::memrchr(buf, '\n', static_cast<size_t>(n))) {
      start = from + (static_cast<const char*>(nl) + 1 - buf);
      break;
    }
    start = from;
  }
  // The line, whole (a record is at most a few KiB; a longer line is no record of ours).
  std::string line(static_cast<size_t>(std::min<off_t>(size - start, off_t{1} << 20)), '\0');
  const ssize_t got = ::pread(fd_, line.data(), line.size(), start);
  line.resize(static_cast<size_t>(std::max<ssize_t>(0, got)));
  const std::string fragment = line.substr(0, 200);  // for the warning
  // Only the start of a record is ours to cut (check_outputs refused a file
  // that is not a metrics file; this one was changed since, or its last line
  // is someone else's); a whole record that lacks only its newline gets one.
  const MetricsTail tail = off_t(line.size()) == size - start ? metrics_tail(line) : MetricsTail::foreign;
  if (tail == MetricsTail::complete) {
    if (::write(fd_, "\n", 1) != 1)
      DT_USAGE("option 'metrics': '", path_, "': cannot end its last record with a newline: ", std::strerror(errno));
    return;
  }
  if (tail == MetricsTail::foreign)  // check_outputs refused such a file: it changed since
    DT_USAGE("option 'metrics': '", path_, "' ends in a line without a newline that is not the start of a record ('",
             format::visible(fragment.substr(0, 60)), "'): not cut; --metrics-append continues a metrics file only");
  if (::ftruncate(fd_, start) != 0)
    DT_USAGE("option 'metrics': '", path_, "' ends in a cut line, which cannot be removed: ", std::strerror(errno));
  std::fprintf(stderr, "dtrain: warning: metrics file '%s' ended in a cut line (no newline), removed before appending: %s%s\n",
               path_.c_str(), format::visible(fragment).c_str(), size - start > 200 ? "…" : "");
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
