// io/image_store.hpp — the writer of `dtrain data imagefolder`: both layouts of
// docs/data-formats.md (raw and jpeg), written resumably.
//
// Files while a conversion runs (F = the output):
//   F.partial              HDF5, the dataset as far as it got, with attributes
//                          `resume_key` (which conversion made it) and
//                          `progress` (int64 [4]: inputs done, samples stored,
//                          report bytes, jpeg bytes — as of the last checkpoint)
//   F.partial.jpeg         jpeg layout only: the JPEG bytes, concatenated
//   F.skipped.txt.partial  the report so far: one "PATH<TAB>REASON" line per
//                          input that was not stored
// Space for all M inputs is allocated when F.partial is created (raw: the
// images; jpeg: offsets, shapes, labels), so writing samples changes no HDF5
// metadata. A checkpoint writes the buffered samples, fsyncs F.partial, the
// byte file and the report, and only then records `progress` (one attribute
// rewritten in place, flushed). A run killed at any point leaves the progress of
// its last checkpoint, and everything that checkpoint counts is on disk; a
// later run with the same resume key reopens the files, truncates the byte file
// and the report to the recorded lengths and continues from `inputs done`.
//
// commit(): raw — F.partial is renamed to F as it is, then F's datasets are
// shrunk to the samples stored (skipped inputs leave no gap: samples are
// packed in input order) and `progress` is removed. jpeg — F is written afresh
// (temporary name, renamed) from F.partial and F.partial.jpeg, which are then
// removed. Last, the report is renamed to F.skipped.txt (it is written even
// when empty). F keeps `resume_key` (which conversion made it) and gets
// `report_bytes` (its report's length). A file with `progress` is unfinished:
// readers refuse it.
//
// Threads: one thread uses a writer. Errors: UsageError when a partial file
// belongs to another conversion or cannot be reopened; Error on a write failure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/image_codec.hpp"

namespace dtrain::io {

enum class StoreLayout { raw, jpeg };

struct StoreSpec {
  std::string path;                      // F
  StoreLayout layout = StoreLayout::raw;
  int size = 0;                          // S
  int quality = 0;                       // jpeg layout: the JPEG quality (an attribute)
  int64_t inputs = 0;                    // M, the number of candidate inputs
  std::vector<std::string> class_names;  // [classes]
  std::string resume_key;                // identifies the conversion (options + file list)
};

struct StoreProgress {
  int64_t inputs_done = 0;   // inputs handled (stored or skipped), in input order
  int64_t samples_done = 0;  // samples stored
  int64_t report_bytes = 0;  // bytes of the report file
  int64_t jpeg_bytes = 0;    // bytes of F.partial.jpeg
};

class ImageStoreWriter {
 public:
  // Creates or reopens the partial files. kill_point: called in each checkpoint
  // after the samples are written and before they are recorded (a test hook).
  explicit ImageStoreWriter(const StoreSpec& spec, std::function<void(int64_t stored_this_run)> kill_point = {});
  ~ImageStoreWriter();  // without commit(): closes, keeps the partial files
  ImageStoreWriter(const ImageStoreWriter&) = delete;
  ImageStoreWriter& operator=(const ImageStoreWriter&) = delete;

  bool resumed() const;               // an earlier run's partial files were reopened
  const StoreProgress& progress() const;  // counts including buffered, uncheckpointed inputs

  // The next input, stored. raw: image is S×S; jpeg: jpeg holds the encoded
  // image of height × width (shorter side S).
  void add_raw(const RgbImage& image, int32_t label);
  void add_jpeg(std::vector<uint8_t> jpeg, int height, int width, int32_t label);
  // The next input, not stored: a report line.
  void add_skipped(const std::string& path, const std::string& reason);
  // Bytes buffered since the last checkpoint (the caller checkpoints by size too).
  int64_t buffered_bytes() const;
  void checkpoint();
  // After all M inputs: the final files (see the file comment). Returns the
  // size of F in bytes. Throws UsageError when no sample was stored (the
  // report is still renamed; F.partial files are removed).
  int64_t commit();

  // A run of this conversion (spec.resume_key) stopped after F took its name
  // and F.partial was gone: raw before F was shrunk and lost `progress`,
  // either layout before the report was renamed. Finishes it and returns true;
  // false when F.partial exists (the caller resumes it: its commit writes F
  // again), F.skipped.txt.partial is absent or not the length F records
  // (`report_bytes`), or F is not this conversion's. Error on a failed write.
  static bool finish_interrupted(const StoreSpec& spec);
  // Whether `path` is an HDF5 file made by this conversion (its `resume_key`).
  static bool owns(const std::string& path, const StoreSpec& spec);

  static std::string partial_path(const std::string& path) { return path + ".partial"; }
  static std::string report_path(const std::string& path) { return path + ".skipped.txt"; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain::io
