// engine/metrics.hpp — the JSON Lines metrics file (the trainer prints the
// human progress line itself).
//
// DESIGN.md §5: rank 0 writes one JSON object per log interval
//   {"kind":"step","step","epoch","loss","lr","images_per_s","t_compute_s","t_comm_s","t_io_wait_s",
//    "t_comm_total_s","comm_hidden_fraction","io_wait_fraction"}
// and one per epoch
//   {"kind":"epoch","epoch","step","test_loss","test_accuracy","epoch_time_s"}
// (test_accuracy is top-1; "test_top5_accuracy" beside it with ≥ 10 classes).
// When the job fails and rank 0 prints the failure (core/error.hpp
// record_failure), a last line
//   {"kind":"failed","error","exit_code","wall_s"}
// (the message as printed, without "dtrain: error: "; the job's exit code;
// seconds since the run folder was made) stands in place of the
// {"kind":"run"} record of a finished run.
// Times are seconds per step averaged over the interval (T_C, exposed T_O,
// I/O wait); epochs are numbered from 1, as on stdout; t_comm_total_s is the whole exchange time (hidden + exposed),
// comm_hidden_fraction = 1 − t_comm_s / t_comm_total_s, io_wait_fraction = the
// interval's I/O wait ÷ its wall time; images_per_s counts images of all workers.
// Also per step: t_checkpoint_s, skipped_steps, and grads_ready_bytes (the
// gradient bytes rank 0 handed to the exchange per step: the whole arena, 4·P,
// when every range was reported; 0 in a 1-rank job). A compute stand-in run
// (--compute-stand-in-ms, engine/compute_stand_in.hpp) adds
// "compute_stand_in_ms" to its step, epoch and run records; its loss is 0.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dtrain::engine {

// Each record is one line, written whole or not at all: when a write fails (a
// full disk, a quota) the file is cut back to its last whole record, so a later
// run can append after it, and Error is thrown naming the file, the record's
// kind and errno — the job ends (exit 1) rather than train on without its
// record (a helper's finding, 2026-12-04: the writes were unchecked and a run
// on a full disk ended exit 0 with its metrics cut mid-record).
// What --metrics-append does with a metrics file's last line when it lacks its
// newline (`line`: that line, whole): a whole record ({"kind": "…", …}) is kept
// and completed with a newline; the start of a record cut by a killed writer,
// or a tail of zero bytes (a crash before the data reached the disk), is cut
// off; anything else (another file's text) makes the file no metrics file.
enum class MetricsTail { complete, cut, foreign };
MetricsTail metrics_tail(const std::string& line);
// A whole line of a metrics file: a JSON object with a string "kind", or blank.
bool is_metrics_line(const std::string& line);

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // path "" = no file (write() does nothing); append: continue an existing
  // file instead of truncating it — a last line without a newline (a writer
  // killed mid-record) is cut off first, with a warning showing it. Throws
  // UsageError if it cannot be opened.
  explicit MetricsWriter(const std::string& path, bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const nlohmann::json& record);  // one line; Error as above

  // Appends one record to the file at `path` (the run record at a job's end),
  // as write() does. Throws Error if it cannot be opened or written.
  static void append_record(const std::string& path, const nlohmann::json& record);
  // As append_record, but returns false without writing when another record
  // of this process was being written for longer than wait_s seconds (the
  // failure record, from whichever thread ends the job: it must not wait on
  // a stuck write).
  static bool try_append_record(const std::string& path, const nlohmann::json& record, double wait_s);

 private:
  static void append_locked(const std::string& path, const nlohmann::json& record);
  void cut_partial_last_line();
  std::string path_;
  int fd_ = -1;
};

}  // namespace dtrain::engine
