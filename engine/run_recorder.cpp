// engine/run_recorder.cpp — RunRecorder (run_recorder.hpp).
#include "engine/run_recorder.hpp"

#include <unistd.h>

#include "core/format.hpp"
#include "io/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dtrain::engine {

namespace {

// A duration for a batch log: "42s", "7m05s", "3h07m".
std::string clock_text(double s) {
  const long t = std::lround(std::max(0.0, s));
  char buf[32];
  if (t < 60) std::snprintf(buf, sizeof buf, "%lds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  return buf;
}

}  // namespace

RunRecorder::RunRecorder(const std::string& metrics_path, bool rank0, int64_t planned_steps, int planned_epochs,
                         int64_t steps_per_epoch, double compute_stand_in_ms, bool append)
    : metrics_(metrics_path, append),
      rank0_(rank0),
      planned_steps_(planned_steps),
      planned_epochs_(planned_epochs),
      steps_per_epoch_(steps_per_epoch),
      stand_in_ms_(compute_stand_in_ms) {
  if (stand_in_ms_ > 0) stand_in_text_ = " (compute stand-in " + format::shortest(stand_in_ms_) + " ms)";
}

void RunRecorder::interval(const IntervalReport& r, const IntervalStats& s) {
  if (!rank0_) return;
  const int n = s.steps;
  const double dt = r.wall_s;
  double hidden = s.t_comm_busy > 0 ? 1.0 - s.t_comm / s.t_comm_busy : 0.0;
  nlohmann::json rec = {{"kind", "step"}, {"step", r.step}, {"epoch", r.epoch}, {"loss", r.loss}, {"lr", r.lr},
                        {"images_per_s", r.images_per_s}, {"t_compute_s", s.t_compute / n},
                        {"t_comm_s", s.t_comm / n}, {"t_io_wait_s", s.t_io / n},
                        {"t_comm_total_s", s.t_comm_busy / n}, {"comm_hidden_fraction", hidden},
                        {"io_wait_fraction", s.t_io / dt}, {"t_checkpoint_s", s.t_checkpoint / n},
                        {"grads_ready_bytes", s.grads_ready_bytes / n}, {"skipped_steps", s.skipped}};
  if (stand_in_ms_ > 0) rec["compute_stand_in_ms"] = stand_in_ms_;
  metrics_.write(rec);
  const double elapsed = this->elapsed();
  const int64_t done = r.step - first_step_;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(planned_steps_ - r.step) : 0.0;
  // Step in the epoch, then the run's step as in metrics.jsonl ("step") and error messages.
  std::printf("epoch %d/%d step %lld/%lld (run step %lld/%lld) loss %.4f lr %.4g %.0f img/s (T_C %.2f ms, comm %.2f ms exposed of %.2f, io wait %.2f ms = %.1f%%) elapsed %s ETA %s%s\n",
              r.epoch, planned_epochs_, static_cast<long long>(r.step_in_epoch), static_cast<long long>(steps_per_epoch_),
              static_cast<long long>(r.step), static_cast<long long>(planned_steps_), r.loss, r.lr, r.images_per_s, 1e3 * s.t_compute / n, 1e3 * s.t_comm / n, 1e3 * s.t_comm_busy / n,
              1e3 * s.t_io / n, 100.0 * s.t_io / dt, clock_text(elapsed).c_str(), clock_text(eta).c_str(),
              stand_in_text_.c_str());
  std::fflush(stdout);
}

void RunRecorder::epoch(int epoch, int64_t step, double test_loss, double test_accuracy, double test_top5_accuracy,
                        double epoch_time_s, bool at_resume) {
  if (!rank0_) return;
  nlohmann::json rec = {{"kind", "epoch"}, {"epoch", epoch}, {"step", step}, {"epoch_time_s", epoch_time_s},
                        {"rss_bytes", resident_bytes()}, {"hdf5_open_objects", io::open_hdf5_objects()}};
  if (at_resume) rec["at_resume"] = true;
  if (stand_in_ms_ > 0) rec["compute_stand_in_ms"] = stand_in_ms_;
  if (test_loss >= 0) {
    rec["test_loss"] = test_loss;
    rec["test_accuracy"] = test_accuracy;
    char top5[32] = "";
    if (test_top5_accuracy >= 0) {
      rec["test_top5_accuracy"] = test_top5_accuracy;
      std::snprintf(top5, sizeof top5, " (top-5 %.2f%%)", 100.0 * test_top5_accuracy);
    }
    if (at_resume)
      std::printf("epoch %d (its checkpoint, evaluated on resume): test accuracy %.2f%%%s test loss %.4f\n", epoch,
                  100.0 * test_accuracy, top5, test_loss);
    else
      std::printf("epoch %d done in %.1f s: test accuracy %.2f%%%s test loss %.4f\n", epoch, epoch_time_s,
                  100.0 * test_accuracy, top5, test_loss);
  } else {
    std::printf("epoch %d done in %.1f s%s\n", epoch, epoch_time_s, stand_in_text_.c_str());
  }
  metrics_.write(rec);
  std::fflush(stdout);
}

void RunRecorder::checkpoint(int64_t step, const std::string& path, uint64_t bytes, double snapshot_s,
                             double write_s) {
  if (!rank0_) return;
  metrics_.write({{"kind", "checkpoint"}, {"step", step}, {"path", path}, {"bytes", bytes},
                  {"t_snapshot_s", snapshot_s}, {"t_write_s", write_s}});
  std::printf("checkpoint of step %lld: %s (%.1f MB; %.3f s blocking, %.3f s written in the background)\n",
              static_cast<long long>(step), path.c_str(), static_cast<double>(bytes) / 1e6, snapshot_s, write_s);
  std::fflush(stdout);
}

uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace dtrain::engine
