// tests/test_checkpoint.cpp — io/checkpoint: exact round trip, every way a
// file can be bad (each a UsageError naming the file, leaking no HDF5 object),
// keep_last pruning, the fallback of find_latest_valid, the start-up checks of
// check_writable, and the kill test: a writer SIGKILLed at each of its kill
// points (a forked child) never leaves a checkpoint that loads half-written.
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <chrono>
#include <thread>
#include <optional>

#include "io/checkpoint.hpp"
#include "io/h5_util.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::io::CheckpointState;
using dtrain::io::CheckpointStore;
using dtrain::io::open_hdf5_objects;
using dtrain::io::read_checkpoint;
using dtrain::test::TempDir;
using dtrain::test::usage_error_message;
namespace fs = std::filesystem;

namespace {

// A state with every kind of value; `step` makes states of two steps differ.
CheckpointState make_state(int64_t step) {
  CheckpointState s;
  s.ints = {{"step", step}, {"epoch", step / 7}, {"min", std::numeric_limits<int64_t>::min()}};
  s.reals = {{"lr", 0.05 / double(step)},
             {"neg_zero", -0.0},
             {"denormal", std::numeric_limits<double>::denorm_min()},
             {"inf", std::numeric_limits<double>::infinity()}};
  s.strings = {{"model", "lenet5"},
               {"empty", ""},
               {"bytes", std::string("a\0b\0", 4)},
               {"rng", std::string(100000, char('0' + step % 10))}};  // > 64 KiB attribute
  s.arrays["params"] = {{2, 3, 4}, {}};
  for (int i = 0; i < 24; ++i) s.arrays["params"].data.push_back(float(step) + 0.25f * float(i));
  s.arrays["params"].data[1] = -0.0f;
  s.arrays["params"].data[2] = std::numeric_limits<float>::denorm_min();
  s.arrays["momentum"] = {{1000}, std::vector<float>(1000, -1.5f * float(step))};
  s.arrays["scalar"] = {{}, {float(step)}};
  s.arrays["none"] = {{0, 5}, {}};
  return s;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void check_same(const CheckpointState& got, const CheckpointState& want) {
  CHECK(got.ints == want.ints);
  CHECK(got.strings == want.strings);
  REQUIRE(got.reals.size() == want.reals.size());
  for (const auto& [k, v] : want.reals) {
    INFO("real " << k);
    REQUIRE(got.reals.count(k) == 1);
    CHECK(same_bits(got.reals.at(k), v));
  }
  REQUIRE(got.arrays.size() == want.arrays.size());
  for (const auto& [k, a] : want.arrays) {
    INFO("array " << k);
    REQUIRE(got.arrays.count(k) == 1);
    const auto& g = got.arrays.at(k);
    CHECK(g.shape == a.shape);
    REQUIRE(g.data.size() == a.data.size());
    CHECK(std::memcmp(g.data.data(), a.data.data(), a.data.size() * sizeof(float)) == 0);
  }
}

// Files of `dir` named .tmp-* (the checkpoint writer's temporaries).
int count_dot_tmp(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(".tmp-")) ++n;
  return n;
}

// The file offset of /arrays/<name>'s bytes (contiguous datasets).
haddr_t array_offset(const std::string& path, const std::string& name) {
  auto fapl = dtrain::io::make_fapl_no_locking();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  REQUIRE(f >= 0);
  hid_t d = H5Dopen2(f, ("/arrays/" + name).c_str(), H5P_DEFAULT);
  REQUIRE(d >= 0);
  const haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  REQUIRE(off != HADDR_UNDEF);
  return off;
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = char(~c);
  f.seekp(at);
  f.write(&c, 1);
  REQUIRE(f);
}

// Opens a written checkpoint read-write to damage its HDF5 structure.
template <typename F>
void edit_h5(const std::string& path, F&& edit) {
  auto fapl = dtrain::io::make_fapl_no_locking();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.get());
  REQUIRE(f >= 0);
  edit(f);
  REQUIRE(H5Fclose(f) >= 0);
}

// The names of this process's threads (/proc/self/task/*/comm).
std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator("/proc/self/task")) {
    std::string name;
    std::getline(std::ifstream(e.path() / "comm"), name);
    names.push_back(name);
  }
  return names;
}

}  // namespace

TEST_CASE("checkpoint round trip keeps ints, reals, strings and shaped arrays", "[checkpoint]") {
  TempDir dir;
  CheckpointStore store(dir.path().string(), 3);
  const CheckpointState s = make_state(120);
  const std::string path = store.write(120, s);
  CHECK(path == dir.file("ckpt-0000000120.h5"));
  CHECK(dtrain::io::checkpoint_file_name(120) == "ckpt-0000000120.h5");
  check_same(read_checkpoint(path), s);
  CHECK(count_dot_tmp(dir.path()) == 0);
  std::ifstream latest(dir.file("latest"));
  std::string name;
  latest >> name;
  CHECK(name == "ckpt-0000000120.h5");
  CHECK(open_hdf5_objects() == 0);
}

TEST_CASE("a flipped byte in a checkpoint array is a usage error naming the file and the array",
          "[checkpoint]") {
  TempDir dir;
  CheckpointStore store(dir.path().string(), 3);
  const std::string path = store.write(5, make_state(5));
  flip_byte(path, std::streamoff(array_offset(path, "momentum") + 1234));
  const int64_t before = open_hdf5_objects();
  CHECK_THAT(usage_error_message([&] { read_checkpoint(path); }),
             Contains(path) && Contains("/arrays/momentum") && Contains("crc32"));
  CHECK(open_hdf5_objects() == before);
}

TEST_CASE("bad checkpoint files are usage errors naming the file and leak no HDF5 object",
          "[checkpoint]") {
  TempDir dir;
  CheckpointStore store(dir.path().string(), 3);
  const std::string good = store.write(7, make_state(7));
  const std::string bad = dir.file("bad.h5");
  // Catch2 here fails a SECTION without an assertion: each one checks itself.
  auto refused = [&](const std::string& expect) {
    const int64_t before = open_hdf5_objects();
    CHECK_THAT(usage_error_message([&] { read_checkpoint(bad); }),
               Contains(bad) && Contains(expect));
    CHECK(open_hdf5_objects() == before);
    CHECK_NOTHROW(read_checkpoint(good));
  };
  SECTION("missing file") { refused("no such file"); }
  SECTION("truncated file") {
    fs::copy_file(good, bad);
    fs::resize_file(bad, fs::file_size(good) / 2);
    refused("truncated");
  }
  SECTION("not an HDF5 file") {
    std::ofstream(bad) << "step=7\n";
    refused("not an HDF5 file");
  }
  SECTION("an HDF5 file that is not a checkpoint") {
    hid_t f = H5Fcreate(bad.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(H5Fclose(f) >= 0);
    refused("not a dtrain checkpoint");
  }
  SECTION("no complete flag") {
    fs::copy_file(good, bad);
    edit_h5(bad, [](hid_t f) { REQUIRE(H5Adelete(f, "complete") >= 0); });
    refused("incomplete");
  }
  SECTION("an array of the wrong dtype") {
    fs::copy_file(good, bad);
    edit_h5(bad, [](hid_t f) {
      REQUIRE(H5Ldelete(f, "/arrays/params", H5P_DEFAULT) >= 0);
      hsize_t dims[1] = {4};
      hid_t sp = H5Screate_simple(1, dims, nullptr);
      H5Dclose(H5Dcreate2(f, "/arrays/params", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT));
      H5Sclose(sp);
    });
    refused("float64");
  }
  SECTION("an attribute of the wrong rank") {
    fs::copy_file(good, bad);
    edit_h5(bad, [](hid_t f) {
      REQUIRE(H5Adelete(f, "step") >= 0);
      hsize_t dims[1] = {2};
      hid_t sp = H5Screate_simple(1, dims, nullptr);
      const int64_t v[2] = {1, 2};
      hid_t a = H5Acreate2(f, "step", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, H5T_NATIVE_INT64, v);
      H5Aclose(a);
      H5Sclose(sp);
    });
    refused("rank is 1");
  }
  SECTION("an array without its crc32") {
    fs::copy_file(good, bad);
    edit_h5(bad, [](hid_t f) {
      REQUIRE(H5Adelete_by_name(f, "/arrays/scalar", "crc32", H5P_DEFAULT) >= 0);
    });
    refused("crc32");
  }
}

TEST_CASE("keep_last prunes the oldest checkpoints, never the one latest names", "[checkpoint]") {
  TempDir dir;
  CheckpointStore store(dir.path().string(), 2);
  for (int64_t step : {10, 20, 30, 40, 50}) store.write(step, make_state(step));
  CHECK(store.list() ==
        std::vector<std::string>{dir.file("ckpt-0000000040.h5"), dir.file("ckpt-0000000050.h5")});
  // A write of an older step (a run resumed from an earlier checkpoint): it is
  // what latest names, so it stays though two newer steps exist.
  store.write(5, make_state(5));
  CHECK(store.list() == std::vector<std::string>{dir.file("ckpt-0000000005.h5"),
                                                 dir.file("ckpt-0000000040.h5"),
                                                 dir.file("ckpt-0000000050.h5")});
  CHECK(store.find_latest_valid() == dir.file("ckpt-0000000005.h5"));
  // Names that only resemble a checkpoint are neither listed nor pruned.
  std::ofstream(dir.file("ckpt-12.h5")) << "x";
  std::ofstream(dir.file("ckpt-0000000001.h5.bak")) << "x";
  CHECK(store.list().size() == 3);
}

TEST_CASE("find_latest_valid falls back from a corrupt latest checkpoint and reports the skip",
          "[checkpoint]") {
  TempDir dir;
  CheckpointStore store(dir.path().string(), 3);
  std::vector<std::string> skipped;
  CHECK(store.find_latest_valid(&skipped).empty());  // an empty folder: none, no error
  CHECK(skipped.empty());
  const std::string p10 = store.write(10, make_state(10));
  const std::string p20 = store.write(20, make_state(20));
  flip_byte(p20, std::streamoff(array_offset(p20, "params") + 8));
  CHECK(store.find_latest_valid(&skipped) == p10);
  REQUIRE(skipped.size() == 1);
  CHECK_THAT(skipped[0], Contains(p20) && Contains("crc32"));

  SECTION("latest missing: the newest valid file") {
    fs::remove(dir.file("latest"));
    skipped.clear();
    CHECK(store.find_latest_valid(&skipped) == p10);
    CHECK(skipped.size() == 1);
  }
  SECTION("latest naming no checkpoint") {
    std::ofstream(dir.file("latest")) << "garbage\n";
    skipped.clear();
    CHECK(store.find_latest_valid(&skipped) == p10);
    REQUIRE(skipped.size() == 2);
    CHECK_THAT(skipped[0], Contains("latest") && Contains("garbage"));
  }
  SECTION("nothing valid left") {
    fs::resize_file(p10, 100);
    skipped.clear();
    CHECK(store.find_latest_valid(&skipped).empty());
    CHECK(skipped.size() == 2);
  }
  CHECK(open_hdf5_objects() == 0);
}

TEST_CASE("a failed or refused checkpoint write leaves no temporary and the previous latest",
          "[checkpoint]") {
  TempDir dir;
  CheckpointStore store(dir.path().string(), 3);
  const std::string p10 = store.write(10, make_state(10));
  CheckpointState bad = make_state(20);
  auto refused = [&] {
    CHECK_THROWS_AS(store.write(20, bad), dtrain::Error);
    CHECK(count_dot_tmp(dir.path()) == 0);
    CHECK(store.list() == std::vector<std::string>{p10});
    CHECK(store.find_latest_valid() == p10);
    CHECK(open_hdf5_objects() == 0);
  };
  SECTION("shape and data disagree (after the file was created)") {
    bad.arrays["params"].shape = {5};
    refused();
  }
  SECTION("a key in two maps") {
    bad.reals["step"] = 1.0;
    refused();
  }
  SECTION("a reserved key") {
    bad.ints["complete"] = 0;
    refused();
  }
  SECTION("a '/' in an array name") {
    bad.arrays["a/b"] = {{1}, {1.0f}};
    refused();
  }
}

TEST_CASE("a writer SIGKILLed at any kill point leaves the previous or the new checkpoint",
          "[checkpoint]") {
  constexpr size_t kArrays = 4;  // > 2, so that some kill points fall between arrays
  REQUIRE(make_state(10).arrays.size() == kArrays);
  const int points = dtrain::io::checkpoint_kill_points(kArrays);
  REQUIRE(points >= 10);
  ::unsetenv("DTRAIN_CKPT_KILL_AT");  // the parent's writes must not be killed
  // The child only writes and dies (_exit or SIGKILL: no atexit handler, no
  // stdio flush). Other threads exist when OMP_NUM_THREADS > 1: the BLAS
  // library starts its idle worker pool when it is loaded (and shuts it down
  // around fork, pthread_atfork). None of them uses HDF5, whose lock is the
  // only one the child needs, so the fork is safe; the WARN says they exist.
  const auto threads = thread_names();
  std::string joined;
  for (const auto& t : threads) joined += " " + t;
  if (threads.size() > 1) WARN("forking with " << threads.size() << " threads:" << joined);
  int first_new = 0;  // the first kill point after which step 20 is found
  // n = points + 1: the count is exact, that child writes to the end and exits 0.
  for (int n = 1; n <= points + 1; ++n) {
    INFO("kill point " << n << " of " << points);
    TempDir dir;
    CheckpointStore store(dir.path().string(), 1);
    const std::string p10 = store.write(10, make_state(10));
    REQUIRE(open_hdf5_objects() == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setenv("DTRAIN_CKPT_KILL_AT", std::to_string(n).c_str(), 1);
      try {
        store.write(20, make_state(20));
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);  // not killed: fewer kill points than checkpoint_kill_points says
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    if (n == points + 1) {
      CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
      continue;
    }
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);

    for (const std::string& f : store.list()) CHECK_NOTHROW(read_checkpoint(f));
    std::vector<std::string> skipped;
    const std::string found = store.find_latest_valid(&skipped);
    REQUIRE_FALSE(found.empty());
    CHECK(skipped.empty());
    const CheckpointState s = read_checkpoint(found);
    const int64_t step = s.ints.at("step");
    REQUIRE((step == 10 || step == 20));
    check_same(s, make_state(step));
    // Step 20 only once its file is in place, and from then on at every later point.
    if (step == 10) CHECK(first_new == 0);
    if (step == 20) CHECK(fs::exists(dir.file("ckpt-0000000020.h5")));
    if (step == 20 && first_new == 0) first_new = n;
    if (n == 1) CHECK(step == 10);
    if (n == points) CHECK(store.list() == std::vector<std::string>{found});  // pruned

    const int stray = count_dot_tmp(dir.path());
    CHECK(store.remove_stray_temporaries() == stray);
    CHECK(count_dot_tmp(dir.path()) == 0);
    CHECK(store.remove_stray_temporaries() == 0);
    if (n == 1) CHECK(stray == 1);
  }
  // checkpoint.hpp's order: `latest` is renamed at the third point from the
  // end (then D fsynced, then pruned); before it, latest names step 10.
  CHECK(first_new == points - 2);
}

TEST_CASE("check_writable refuses unusable checkpoint folders", "[checkpoint]") {
  TempDir dir;
  const std::string plain = dir.file("plain");
  std::ofstream(plain) << "x";
  auto refused = [](const std::string& folder, uint64_t need) {
    const std::string msg =
        usage_error_message([&] { CheckpointStore(folder, 1).check_writable(need); });
    CHECK_THAT(msg, Contains("option 'checkpoint-dir': " + folder));
    return msg;
  };
  SECTION("a path under a regular file") {
    CHECK_THAT(refused(plain + "/ckpt", 0), Contains("cannot create the folder"));
  }
  SECTION("a regular file") { CHECK_THAT(refused(plain, 0), Contains("not a folder")); }
  SECTION("a folder where no file can be created (root ignores permission bits)") {
    CHECK_THAT(refused("/proc", 0), Contains("cannot create files"));
  }
  SECTION("not enough free space") {
    const uint64_t need = std::numeric_limits<uint64_t>::max();
    CHECK_THAT(refused(dir.file("ok"), need),
               Contains("bytes free") && Contains(std::to_string(need)));
  }
}

TEST_CASE("check_writable creates the checkpoint folder and leaves no probe behind",
          "[checkpoint]") {
  TempDir dir;
  const fs::path folder = dir.path() / "a" / "b" / "ckpt";
  CheckpointStore store(folder.string(), 1);
  store.check_writable(1 << 20);
  REQUIRE(fs::is_directory(folder));
  CHECK(fs::is_empty(folder));
  store.check_writable(0);  // an existing folder is fine too
  CHECK(fs::is_empty(folder));
}

// A folder named like a future checkpoint made the run's last checkpoint fail
// after the whole training, and the job ended before writing its parameters
// (a helper's finding): refused before any work, naming it.
TEST_CASE("a folder holding a checkpoint's name is refused before any work", "[checkpoint]") {
  TempDir dir;
  CheckpointStore store(dir.path().string(), 2);
  store.write(10, make_state(10));
  // Files, links and look-alike names are no obstacle to the renames.
  std::ofstream(dir.file("ckpt-12.h5")) << "x";
  fs::create_directory(dir.file("ckpt-0000000001.h5.d"));
  fs::create_symlink(dir.file("nowhere"), dir.file("ckpt-0000000030.h5"));
  fs::create_directory(dir.file("ckpt-00000000500.h5"));  // 11 digits: not a name write() makes for step 500
  CHECK_NOTHROW(store.check_names_free());
  for (const char* name : {"ckpt-0000000500.h5", "latest"}) {
    DYNAMIC_SECTION(name) {
      if (std::string(name) == "latest") fs::remove(dir.file(name));
      fs::create_directory(dir.file(name));
      const std::string msg = usage_error_message([&] { store.check_names_free(); });
      CHECK_THAT(msg, Contains("option 'checkpoint-dir': " + dir.file(name) + " is a folder"));
      // Without the check the write fails on it (EISDIR): what the check saves.
      CHECK_THROWS_AS(store.write(std::string(name) == "latest" ? 20 : 500, make_state(20)), dtrain::Error);
    }
  }
}

// Two jobs on one folder overwrote and pruned each other's checkpoints, and the
// second removed the first one's in-flight temporary (a helper's finding): the
// folder is locked for a job's life (CheckpointStore::lock, flock on D/.lock).
TEST_CASE("a checkpoint folder is locked for one job: a second is refused naming the holder", "[checkpoint]") {
  TempDir dir;
  const std::string folder = (dir.path() / "ck").string();
  std::optional<CheckpointStore> first(std::in_place, folder, 2);
  first->check_writable(0);
  first->lock();
  first->lock();  // again by the holder: nothing changes
  {
    CheckpointStore copy = *first;  // a copy shares the lock
  }
  CheckpointStore second(folder, 2);
  const std::string msg = usage_error_message([&] { second.lock(); });
  INFO(msg);
  CHECK_THAT(msg, Contains(folder) && Contains("in use by another job") &&
                      Contains("held by pid " + std::to_string(::getpid())));
  first.reset();  // the first job ends: the folder is free
  second.lock();
  // A forked process (another job) is refused while this one holds it.
  const pid_t pid = ::fork();
  if (pid == 0) {
    CheckpointStore other(folder, 2);
    try {
      other.lock();
    } catch (const dtrain::UsageError&) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
}

// A requeued job may find its dead predecessor's lock until a network file
// server's lease ends: lock(wait_s) retries, and takes the folder once it is free.
TEST_CASE("a checkpoint folder lock held for a while is taken when released, within the wait", "[checkpoint]") {
  TempDir dir;
  const std::string folder = (dir.path() / "ck").string();
  std::optional<CheckpointStore> first(std::in_place, folder, 2);
  first->check_writable(0);
  first->lock();
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    first.reset();
  });
  CheckpointStore second(folder, 2);
  const auto t0 = std::chrono::steady_clock::now();
  second.lock(20);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  release.join();
  CHECK(waited >= 1.0);
  CHECK(waited < 15.0);
  CheckpointStore third(folder, 2);
  CHECK_THAT(usage_error_message([&] { third.lock(1); }), Contains("in use by another job"));
}

// A refused start wrote nothing but left its D/.lock (a walkthrough's finding):
// it is removed while still held. A job that waited on the removed file must
// not then count as holding the folder beside the job that took the new one.
TEST_CASE("a refused start removes its lock file and a waiter on the removed file locks the new one", "[checkpoint]") {
  TempDir dir;
  const fs::path folder = dir.path() / "a" / "ck";
  const std::string lock_file = (folder / ".lock").string();
  {
    CheckpointStore refused(folder.string(), 2);
    refused.check_writable(0);
    refused.lock();
    REQUIRE(fs::exists(lock_file));
    refused.release_lock_and_remove();
    CHECK_FALSE(fs::exists(lock_file));
    CHECK_FALSE(fs::exists(dir.path() / "a"));  // the folders check_writable made, empty, go too
  }
  fs::create_directories(folder);  // an existing folder: release_lock_and_remove keeps it
  CheckpointStore first(folder.string(), 2);
  first.check_writable(0);
  first.lock();
  CheckpointStore other(folder.string(), 2);
  other.release_lock_and_remove();  // holds no lock: never removes another job's
  CHECK(fs::exists(lock_file));
  std::string waiter_msg = "took the lock";
  std::thread waiter([&] {
    CheckpointStore w(folder.string(), 2);
    waiter_msg = usage_error_message([&] { w.lock(6); });  // opens the current .lock, waits on it
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the waiter has opened the file by then
  first.release_lock_and_remove();  // the waiter's file is gone
  CheckpointStore next(folder.string(), 2);
  try {
    next.lock();  // a new .lock, held
  } catch (...) {
    waiter.join();
    throw;
  }
  waiter.join();
  CHECK_THAT(waiter_msg, Contains("in use by another job"));
}
