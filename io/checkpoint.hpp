// io/checkpoint.hpp — checkpoint files: one HDF5 file per checkpoint, written
// atomically, verified on load (DESIGN.md §5 "Checkpoints").
//
// Folder layout (D = --checkpoint-dir):
//   D/ckpt-<step, 10 digits>.h5   one checkpoint, taken after <step> steps
//   D/latest                      text: the file name of the newest complete one
//   D/.tmp-*                      temporaries of an interrupted write (removed
//                                 by remove_stray_temporaries at the next start)
//
// Write protocol (CheckpointStore::write), each step a kill point:
//   1. D/.tmp-ckpt-<step>.h5.<pid> created; every array written as a dataset
//      with attribute "crc32" (zlib crc32 of its bytes); root attributes hold
//      the ints/reals/strings and "complete" = 1, written last
//   2. the file closed, fsync(file)
//   3. rename to D/ckpt-<step>.h5, fsync(D)
//   4. D/.tmp-latest.<pid> written with the name, fsync, renamed to D/latest,
//      fsync(D)
//   5. checkpoints beyond the newest keep_last removed (oldest first)
// A reader therefore sees either the previous checkpoint or the new one, never
// half of one: a name ckpt-*.h5 only ever appears for a fsynced, complete file.
//
// Kill points (DTRAIN_CKPT_KILL_AT=N, core/settings.hpp: the N-th point this
// process passes while the variable is set raises SIGKILL), in order: the
// temporary created; after each array; the state attributes; "complete"; the
// file closed; fsynced; renamed; D fsynced; the latest temporary written and
// fsynced; renamed to D/latest; D fsynced; old checkpoints pruned.
//
// File layout: root attributes "format" = "dtrain-checkpoint", "version" = 1,
// one attribute per CheckpointState int (int64), real (double) and string;
// datasets /arrays/<name> float32 (contiguous) with the shape given and
// attribute crc32 (uint32, zlib crc32 of the row-major little-endian bytes).
// State keys share the root's one namespace: a key may stand in one of ints,
// reals, strings only, and not be "format", "version" or "complete"; array
// names have no '/'. Strings are stored byte-exact (fixed length, NULLPAD).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtrain::io {

struct FloatArray {
  std::vector<int64_t> shape;  // row-major; product = data.size()
  std::vector<float> data;
};

// Everything one checkpoint holds. The engine decides the keys (engine/checkpoint.cpp).
struct CheckpointState {
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> reals;
  std::map<std::string, std::string> strings;
  std::map<std::string, FloatArray> arrays;
};

// The name of the checkpoint file of `step` ("ckpt-0000000120.h5").
std::string checkpoint_file_name(int64_t step);

// Reads and verifies one checkpoint file. Throws dtrain::UsageError naming the
// file (and the array or attribute) when it cannot be opened (missing,
// truncated, not HDF5), is not a dtrain checkpoint, is incomplete, or an
// array's crc32 does not match its bytes.
CheckpointState read_checkpoint(const std::string& path);

// One checkpoint folder.
class CheckpointStore {
 public:
  // keep_last ≥ 1: the number of complete checkpoints kept.
  CheckpointStore(std::string dir, int keep_last);

  const std::string& dir() const { return dir_; }

  // Before any work (DESIGN.md §5, exit 2): creates the folder if needed and
  // proves it writable by writing, fsyncing and removing a probe file, and
  // checks that the filesystem has at least `need_bytes` free (statvfs).
  // Throws UsageError naming the folder (option 'checkpoint-dir').
  void check_writable(uint64_t need_bytes) const;

  // Takes the folder for this job: an exclusive flock(2) on D/.lock, held
  // while this store (or a copy) lives, the holder's host, pid and start time
  // written into it. Two jobs writing one folder (the same job submitted
  // twice, a requeue while the first still runs) removed each other's
  // in-flight temporaries and overwrote and pruned each other's checkpoints
  // (a helper's finding, 2026-12-04). Throws UsageError naming the folder
  // and the holder when another process holds it. A file system without
  // flock (some parallel ones; Lustre's localflock locks per node only): a
  // warning, and no lock. Held by another, it retries each second for up to
  // wait_s seconds first (saying so once): on a network file system the lock
  // of a job whose node died lasts until the server's lease ends, and a
  // requeued job must not be refused for its own predecessor. Call after
  // check_writable (the folder exists), before remove_stray_temporaries.
  void lock(double wait_s = 0);

  // A start refused after lock(): removes D/.lock (a refused start writes
  // nothing) and releases it, and the folders check_writable created if they
  // are empty; no-op when this store holds no lock (the lock
  // of another job is never removed). A process waiting for the lock then
  // finds its file gone and locks the new one (lock() checks that the file
  // it locked is still D/.lock).
  void release_lock_and_remove();

  // Removes D/.tmp-* left by an interrupted write; returns how many.
  int remove_stray_temporaries() const;

  // Before any work: throws UsageError naming the entry when a folder holds
  // a name this store writes — `latest` or ckpt-<step>.h5 of any step (a
  // file, link or special file there is replaced by the rename). The rename
  // would fail (EISDIR) at the first (or a later, or the run's last) checkpoint,
  // after the training it was to keep (a helper's finding, 2026-12-04: the
  // run's final checkpoint failed on such a folder, and the job ended before
  // writing its parameters).
  void check_names_free() const;

  // A name this store writes or keeps in its folder: `latest`, `.lock`, a
  // `.tmp-` temporary or ckpt-<step>.h5 of any step (another entry there by
  // that name is replaced, or fails the write).
  static bool writes_name(const std::string& name);

  // Writes `s` as the checkpoint of `step` with the protocol above; returns the
  // final path. Throws dtrain::Error naming the file on any I/O failure (the
  // temporary is removed; the previous checkpoint stays the latest).
  std::string write(int64_t step, const CheckpointState& s) const;

  // The checkpoint files present, ascending by step (names only checked, not
  // contents).
  std::vector<std::string> list() const;

  // The newest checkpoint that reads and verifies: first the one `latest`
  // names, else the files of list() from the newest down. Every file skipped
  // is reported in `skipped` (path and why). Returns "" when there is none.
  std::string find_latest_valid(std::vector<std::string>* skipped = nullptr) const;

 private:
  std::string dir_;
  int keep_last_;
  std::shared_ptr<int> lock_fd_;  // lock(): the open D/.lock, closed (unlocked) with the last copy
  mutable std::vector<std::filesystem::path> created_;  // check_writable: folders it made, innermost first
  // Removes created_ (only folders still empty) and forgets them: a refused start leaves none.
  void remove_created_folders() const;
};

// How many kill points a write of a state with `arrays` arrays passes
// (arrays + 11), for the tests that kill the writer at each one.
int checkpoint_kill_points(size_t arrays);

// The number of HDF5 objects (files, groups, datasets, attributes, types)
// this process holds open: constant across a healthy run (no leak).
int64_t open_hdf5_objects();

}  // namespace dtrain::io
