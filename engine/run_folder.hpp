// engine/run_folder.hpp — where a training run writes, and the promise that it
// never overwrites an earlier run's files (DESIGN.md §5 "Outputs").
//
// By default every run gets its own folder: RUNS_DIR/<run-name>/<n>/ with n =
// 1, 2, … (one more than the largest number there; made with mkdir, so two
// runs started at once never share one), and RUNS_DIR/<run-name>/latest, a
// relative symbolic link to the newest (replaced atomically by rename). It
// holds metrics.jsonl (step and epoch records, then the run record line that
// `dtrain report` reads), params.h5 (the final parameters) and, with
// --timeline auto, timeline.json (engine/timeline.hpp; the timeline is off by
// default). <run-name> is
// the job file's name without .ini ("fashion_lenet"), or "train" without one.
//
// An output given explicitly (--metrics F, --save-params F, --timeline F) goes to F instead;
// an F that exists is refused (exit 2, naming the key and the file) unless
// --overwrite true; --metrics-append true continues an existing metrics file
// instead (each start of a requeued job adds its records). "" turns an output off. A run folder is made only when at
// least one output is left at its default ("auto").
//
// Nothing is written before validation: check_outputs() only looks (and
// proves the nearest existing folder takes a file by creating and removing a
// probe there); make_outputs() — called by rank 0 once every rank has passed
// validation — creates the folders.
#pragma once

#include <cstddef>
#include <string>

#include "engine/config.hpp"

namespace dtrain::engine {

inline constexpr const char* kAutoOutput = "auto";

struct RunOutputs {
  std::string dir;          // the run folder ("" when every output is explicit or off)
  std::string metrics;      // "" = none
  std::string save_params;  // "" = none
  std::string timeline;     // "" = none (off)
};

// The run name: cfg.run_name, else the job file's stem, else "train".
std::string run_name(const TrainConfig& cfg);

// Validation only (throws UsageError naming the key and the file). Every rank may call it.
void check_outputs(const TrainConfig& cfg);

// One output file of any command (dtrain data, tune, train): `path` must not
// exist unless `overwrite` (then it must be a regular file), and the nearest
// existing folder above it must be a folder that takes a new file. Throws
// UsageError "<where>option '<key>': …". Writes nothing (a probe file is made
// and removed). `reserved`: the bytes the longest name written beside it adds
// to its file name (a temporary "<name>.tmp.<pid>": kTemporarySuffixBytes; 0
// for a file opened in place); the name plus those must fit NAME_MAX (255), or
// the write failed after all the work ("File name too long").
inline constexpr size_t kTemporarySuffixBytes = 12;  // ".tmp." and a pid of up to 7 digits (pid_max ≤ 2^22)
void check_new_output(const std::string& where, const char* key, const std::string& path, bool overwrite,
                      const std::string& alternative = "choose another file",
                      size_t reserved = kTemporarySuffixBytes);

// An output file whose folder must exist already (dtrain data synth and
// imagefolder do not make folders): throws UsageError "<where>option '<key>':
// the folder 'D' of PATH does not exist: make it first" (or: is not a folder,
// is a link to nothing). Nothing when PATH has no folder part.
void check_output_folder(const std::string& where, const char* key, const std::string& path);

// Creates the run folder and the parent folders of explicit outputs; returns
// the resolved paths. Throws Error when the file system refuses (after a
// successful check_outputs: a race or a full disk).
RunOutputs make_outputs(const TrainConfig& cfg);

}  // namespace dtrain::engine
