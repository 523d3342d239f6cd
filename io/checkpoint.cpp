// io/checkpoint.cpp — the checkpoint folder: the write protocol, listing,
// finding the newest valid checkpoint, the start-up checks (checkpoint.hpp).
// The HDF5 layout of one file is io/checkpoint_file.cpp.
//
// The writer never lets a name ckpt-*.h5 or `latest` point at bytes that are
// not yet on disk: everything is written under a .tmp-* name, fsynced, and
// only then renamed, and the folder is fsynced so that the rename itself
// survives a crash. Each step of the protocol is a kill point
// (DTRAIN_CKPT_KILL_AT): tests/test_checkpoint.cpp SIGKILLs the writer at every
// one of them and checks that the folder still holds a loadable checkpoint.
#include "io/checkpoint.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <chrono>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>
#include <filesystem>
#include <optional>
#include <system_error>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "io/checkpoint_file.hpp"
#include "io/synced_file.hpp"  // fsync_path, write_file_synced, TempName

namespace dtrain::io {

namespace fs = std::filesystem;

namespace {

// Kill points of a write besides one per array: created; state attributes;
// complete flag; closed; fsynced; renamed; folder fsynced; latest temp
// written; latest renamed; folder fsynced; pruned.
constexpr int kFixedKillPoints = 11;

// DTRAIN_CKPT_KILL_AT = N: the N-th kill point this process passes while the
// variable is set raises SIGKILL (the counter is per process, not per write,
// so a run that checkpoints several times can be killed inside a later one).
class KillPoints {
 public:
  KillPoints() : at_(settings::ckpt_kill_at()) {}
  void pass() {
    if (at_ && passed_.fetch_add(1) + 1 == *at_) ::raise(SIGKILL);
  }

 private:
  std::optional<long> at_;
  static inline std::atomic<long> passed_{0};
};

// ".<pid>" (appended, not "." + to_string(): GCC 12 warns falsely on that).
std::string pid_suffix() {
  std::string s = ".";
  s += std::to_string(::getpid());
  return s;
}

bool parse_checkpoint_name(const std::string& name, int64_t* step) {
  const size_t digits = name.size() - std::min(name.size(), sizeof("ckpt-.h5") - 1);
  if (digits < 10 || digits > 18 || !name.starts_with("ckpt-") || !name.ends_with(".h5"))
    return false;
  int64_t v = 0;
  for (size_t i = 5; i < 5 + digits; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + (name[i] - '0');
  }
  *step = v;
  return true;
}

}  // namespace

int checkpoint_kill_points(size_t arrays) { return int(arrays) + kFixedKillPoints; }

std::string checkpoint_file_name(int64_t step) {
  DT_CHECK(step >= 0, "checkpoint step ", step, " is negative");
  char buf[32];
  std::snprintf(buf, sizeof buf, "ckpt-%010lld.h5", static_cast<long long>(step));
  return buf;
}

CheckpointStore::CheckpointStore(std::string dir, int keep_last)
    : dir_(std::move(dir)), keep_last_(keep_last) {
  DT_CHECK(keep_last_ >= 1, "checkpoint keep_last is ", keep_last_, ", must be ≥ 1");
}

void CheckpointStore::check_writable(uint64_t need_bytes) const {
  const std::string what = "option 'checkpoint-dir': " + dir_ + ": ";
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    DT_USAGE(what, "exists and is not a folder");
  // Folders this check creates are removed again when it refuses: a refused
  // start leaves nothing behind.
  created_.clear();
  for (fs::path p = fs::absolute(dir_, ec); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created_.push_back(p);
    if (p == p.parent_path()) break;
  }
  auto refuse = [&](auto&&... why) {
    remove_created_folders();
    DT_USAGE(what, why...);
  };
  fs::create_directories(dir_, ec);
  if (ec) refuse("cannot create the folder: ", ec.message());
  if (!fs::is_directory(dir_, ec)) refuse("is not a folder");
  const std::string probe = (fs::path(dir_) / (".tmp-probe" + pid_suffix())).string();
  const std::string why = write_file_synced(probe, "dtrain checkpoint-dir probe\n");
  if (!why.empty()) refuse("cannot create files in it: ", why);
  ::unlink(probe.c_str());
  struct statvfs st {};
  if (::statvfs(dir_.c_str(), &st) != 0) refuse("statvfs failed: ", std::strerror(errno));
  const uint64_t free_bytes = uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
  if (free_bytes < need_bytes)
    refuse("only ", free_bytes, " bytes free; the checkpoints kept, and the one being written beside them, need ",
           need_bytes);
}

// Only names this code creates: .tmp-ckpt-*.h5.<pid>, .tmp-latest.<pid>,
// .tmp-probe.<pid> (a file of someone else's that starts with .tmp- stays).
static bool is_our_temporary(const std::string& name) {
  for (const char* prefix : {".tmp-ckpt-", ".tmp-latest.", ".tmp-probe."})
    if (name.starts_with(prefix)) return true;
  return false;
}

void CheckpointStore::lock(double wait_s) {
  if (lock_fd_) return;
  const std::string path = (fs::path(dir_) / ".lock").string();
  int fd = -1;
  auto open_lock = [&] {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) DT_USAGE("option 'checkpoint-dir': cannot open ", path, " to lock the folder: ", std::strerror(errno));
  };
  // Locked, but is it still the file at `path`? A holder that refused its
  // start removes the lock file before releasing it (release_lock_and_remove): a lock
  // taken on the removed file locks nothing, so open the new one and retry.
  auto still_there = [&] {
    struct stat held {}, now {};
    return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
           held.st_ino == now.st_ino;
  };
  open_lock();
  auto holder = [&] {
    char text[256] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    std::string who(text, n > 0 ? size_t(n) : 0);
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    return who;
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  int err = 0;  // of the last attempt; 0: locked
  for (bool said = false;; said = true) {
    err = ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
    if (err == 0 && !still_there()) {
      ::close(fd);
      open_lock();
      continue;
    }
    if (err != EWOULDBLOCK || std::chrono::steady_clock::now() >= give_up) break;
    if (!said)
      log::info("dtrain: ", dir_, " is locked (", holder(), "); waiting up to ", wait_s,
                " s for it (DTRAIN_CHECKPOINT_LOCK_WAIT)");
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (err != 0) {
    if (err == EWOULDBLOCK) {
      const std::string who = holder();
      ::close(fd);
      DT_USAGE("option 'checkpoint-dir': ", dir_, " is in use by another job (",
               who.empty() ? std::string("its ") + path + " is locked" : who,
               "): two jobs writing one folder overwrite and prune each other's checkpoints; wait for it to "
               "end, or give another folder");
    }
    ::close(fd);
    log::warn("option 'checkpoint-dir': cannot lock ", path, " (", std::strerror(err),
              ": a file system without flock?); a second job writing this folder at the same time would go unnoticed");
    return;
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  char text[512];
  const int len = std::snprintf(text, sizeof text, "held by pid %ld on %s since %lld (Unix time)\n",
                                static_cast<long>(::getpid()), host, static_cast<long long>(std::time(nullptr)));
  // Best effort: the lock is the flock, the text only names its holder.
  if (::ftruncate(fd, 0) == 0 && len > 0) (void)!::pwrite(fd, text, size_t(len), 0);
  lock_fd_ = std::shared_ptr<int>(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
}

void CheckpointStore::release_lock_and_remove() {
  if (!lock_fd_) return;
  // Removed while still held, then released: a waiter that locks the removed
  // file sees it gone and takes the next one (lock()).
  ::unlink((fs::path(dir_) / ".lock").c_str());
  lock_fd_.reset();
  remove_created_folders();
}

void CheckpointStore::remove_created_folders() const {
  std::error_code ec;
  for (const fs::path& p : created_) fs::remove(p, ec);  // innermost first; only empty folders go
  created_.clear();
}

int CheckpointStore::remove_stray_temporaries() const {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!is_our_temporary(e.path().filename().string()) || !e.is_regular_file(ec)) continue;
    std::error_code rm;
    if (fs::remove(e.path(), rm))
      ++removed;
    else if (rm)
      log::warn("cannot remove stray temporary ", e.path().string(), ": ", rm.message());
  }
  return removed;
}

bool CheckpointStore::writes_name(const std::string& name) {
  int64_t step = 0;
  return name == "latest" || name == ".lock" || name.starts_with(".tmp-") ||
         (parse_checkpoint_name(name, &step) && name == checkpoint_file_name(step));
}

void CheckpointStore::check_names_free() const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    int64_t step = 0;
    // Only the names write() makes (ckpt-%010lld.h5: 11 digits for a step of
    // 10 digits is another name).
    if (name != "latest" && !(parse_checkpoint_name(name, &step) && name == checkpoint_file_name(step))) continue;
    // rename(2) replaces a file, a link (not its target) or a special file
    // in place; only a folder refuses it (EISDIR).
    std::error_code st;
    if (e.is_symlink(st) || !e.is_directory(st)) continue;
    DT_USAGE("option 'checkpoint-dir': ", e.path().string(), " is a folder with a name this run writes (",
             name == "latest" ? std::string("the latest checkpoint's pointer")
                              : "the checkpoint of step " + std::to_string(step),
             "): its checkpoint would fail after the training it keeps; move it away");
  }
}

std::string CheckpointStore::write(int64_t step, const CheckpointState& s) const {
  KillPoints kill;
  const fs::path d(dir_);
  const std::string name = checkpoint_file_name(step);
  const std::string final_path = (d / name).string();
  TempName tmp((d / (".tmp-" + name + pid_suffix())).string());
  const std::string where = tmp.path();
  write_checkpoint_file(where, s, [&] { kill.pass(); });
  kill.pass();
  fsync_path(where, false);
  kill.pass();
  tmp.rename_to(final_path);
  kill.pass();
  fsync_path(dir_, true);
  kill.pass();

  // `latest` replaced the same way; until its rename it still names the previous one.
  TempName latest_tmp((d / (".tmp-latest" + pid_suffix())).string());
  const std::string why = write_file_synced(latest_tmp.path(), name + "\n");
  if (!why.empty()) DT_FAIL("cannot write ", latest_tmp.path(), ": ", why);
  kill.pass();
  latest_tmp.rename_to((d / "latest").string());
  kill.pass();
  fsync_path(dir_, true);
  kill.pass();

  // Pruning only after `latest` names the new file, and never that file. A
  // failure here loses nothing (the checkpoint is durable): a warning.
  std::vector<std::string> files = list();
  const size_t keep = size_t(keep_last_);
  for (size_t i = 0; i + keep < files.size(); ++i) {
    if (files[i] == final_path) continue;
    std::error_code ec;
    if (!fs::remove(files[i], ec) && ec)
      log::warn("cannot remove old checkpoint ", files[i], ": ", ec.message());
  }
  kill.pass();
  return final_path;
}

std::vector<std::string> CheckpointStore::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    int64_t step = 0;
    if (parse_checkpoint_name(e.path().filename().string(), &step) && e.is_regular_file(ec))
      found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

std::string CheckpointStore::find_latest_valid(std::vector<std::string>* skipped) const {
  auto skip = [&](const std::string& why) {
    if (skipped) skipped->push_back(why);
  };
  auto valid = [&](const std::string& path) {
    try {
      read_checkpoint(path);
      return true;
    } catch (const UsageError& e) {
      skip(e.what());  // names the file
      return false;
    }
  };
  const fs::path latest = fs::path(dir_) / "latest";
  std::string tried;
  std::error_code ec;
  if (fs::exists(latest, ec)) {
    std::FILE* f = std::fopen(latest.c_str(), "r");
    char buf[256] = {};
    const size_t n = f ? std::fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) std::fclose(f);
    std::string name(buf, n);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    int64_t step = 0;
    if (!parse_checkpoint_name(name, &step)) {
      skip(latest.string() + ": does not name a checkpoint file ('" + name + "')");
    } else {
      tried = (fs::path(dir_) / name).string();
      if (valid(tried)) return tried;
    }
  }
  const std::vector<std::string> files = list();
  for (auto it = files.rbegin(); it != files.rend(); ++it)
    if (*it != tried && valid(*it)) return *it;
  return "";
}

int64_t open_hdf5_objects() { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

}  // namespace dtrain::io
