// core/error.hpp — the one exception type of dtrain and the check macros.
//
// Every failure is reported as dtrain::Error carrying the call site
// (file:line), the rank and host that raised it (when known) and a message.
// The top level (engine/main.cpp, engine/exit.hpp) turns it into one message
// on stderr and an exit code: a usage error that every rank of an MPI job
// detects is printed once, by the lowest rank, and every rank exits 2 without
// an MPI_Abort; any other failure is printed by the rank that had it, naming
// rank and host, before the MPI_Abort that ends the job. Library code never
// calls exit().
//
// Check macros (after LBANN_ERROR / ggml's CUDA_CHECK_GEN):
//   DT_CHECK(cond, msg...)   a precondition; throws Error with the streamed msg
//   DT_FAIL(msg...)          throw unconditionally
//   DT_FAIL_SHARED(msg...)   throw a SharedError (a failure every worker meets)
//   DT_CHECK_MPI(call)       an MPI call returning MPI_SUCCESS (comm/ includes mpi.h)
//   DT_CHECK_H5(call)        an HDF5 call returning a negative value on failure
//   DT_CHECK_CUDA(call)      a CUDA runtime call (layers/cuda, comm/nccl_reducer)
//   DT_CHECK_CUDNN(call)     a cuDNN call (layers/cuda)
//   DT_CHECK_CUBLAS(call)    a cuBLAS call (layers/cuda)
//   DT_CHECK_NCCL(call)      an NCCL call (comm/nccl_reducer)
// The four GPU macros are one generic check (DT_CHECK_STATUS: a status that
// must equal the library's success value, its text from the library's own
// string function). They are macros only: this header includes no toolkit
// header, so core/ builds without CUDA, and they expand only in code that
// includes the library's header itself.
// Each message reads "rank R on HOST: <file>:<line>: <what>" (the rank part
// only in a job of more than one rank).
#pragma once

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dtrain {

// Exit codes of the dtrain binary (DESIGN.md §5).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a runtime failure (I/O, numerics, MPI)
inline constexpr int kExitUsage = 2;    // bad job file / option / input file layout
// Checkpointed on a signal (SIGUSR1/SIGTERM) or a time limit: the job is not
// done, requeue it and resume (EX_TEMPFAIL of sysexits.h; docs/reliability.md).
inline constexpr int kExitRequeue = 75;

class Error : public std::runtime_error {
 public:
  // kind: kExitUsage for bad input the user must fix, kExitFailure otherwise.
  Error(const std::string& what, int exit_code = kExitFailure)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A bad user input (job key, option, dataset layout): exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, kExitUsage) {}
};

// A runtime failure (exit 1) that every worker is likely to meet in the same
// step, such as a diverged loss (the workers hold the same parameters): world
// rank 0 (always a worker) prints it at once; any other rank waits
// kSharedErrorGraceS first, so that rank 0's abort ends it silently and the
// job prints one message, not one per worker (with Open MPI's own errors from
// the simultaneous aborts). A rank whose rank 0 did not fail prints after the
// wait. engine/exit.cpp.
class SharedError : public Error {
 public:
  explicit SharedError(const std::string& what) : Error(what, kExitFailure) {}
};
inline constexpr double kSharedErrorGraceS = 5.0;  // rank 0 may be seconds behind on a loaded node

// The rank printed in error messages; -1 until MPI (or the trainer) sets it.
// The host is this machine's name (gethostname), read once.
void set_error_rank(int rank);
int error_rank();
const std::string& error_host();
// "rank R on HOST: " once a rank is set, else "".
std::string rank_prefix();

// The failure record: on rank 0, once its metrics file exists, the trainer
// registers a function that appends {"kind":"failed","error":…,"exit_code":…}
// (engine/trainer.cpp, engine/metrics.hpp). Whoever prints a job-ending
// failure on this process — engine/exit.cpp, the watchdog, the exchange
// timeout — calls record_failure with the message just before. The first call
// of a process runs the function, later ones nothing; whatever the function
// throws is swallowed (the job is ending). A failure printed by another rank
// only (its own I/O error, say) ends rank 0 by MPI_Abort unrecorded.
// to it. exit_code: the code the job ends with (kExitFailure, kExitUsage).
void set_failure_recorder(std::function<void(const std::string& what, int exit_code)> fn);  // {} = none
void record_failure(const std::string& what, int exit_code = kExitFailure) noexcept;

namespace detail {
inline std::string concat() { return {}; }
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
std::string where(const char* file, int line);
}  // namespace detail

}  // namespace dtrain

#define DT_FAIL(...) \
  throw ::dtrain::Error(::dtrain::detail::where(__FILE__, __LINE__) + ::dtrain::detail::concat(__VA_ARGS__))

#define DT_CHECK(cond, ...)                                                                   \
  do {                                                                                        \
    if (!(cond))                                                                              \
      throw ::dtrain::Error(::dtrain::detail::where(__FILE__, __LINE__) + "check '" #cond     \
                            "' failed: " + ::dtrain::detail::concat(__VA_ARGS__));            \
  } while (0)

#define DT_FAIL_SHARED(...) \
  throw ::dtrain::SharedError(::dtrain::detail::where(__FILE__, __LINE__) + ::dtrain::detail::concat(__VA_ARGS__))

// Usage errors are the user's to fix: no source location, exit code 2.
#define DT_USAGE(...) throw ::dtrain::UsageError(::dtrain::detail::concat(__VA_ARGS__))

#define DT_CHECK_MPI(call)                                                                    \
  do {                                                                                        \
    int dt_rc_ = (call);                                                                      \
    if (dt_rc_ != MPI_SUCCESS) {                                                              \
      char dt_msg_[MPI_MAX_ERROR_STRING];                                                     \
      int dt_len_ = 0;                                                                        \
      MPI_Error_string(dt_rc_, dt_msg_, &dt_len_);                                            \
      throw ::dtrain::Error(::dtrain::detail::where(__FILE__, __LINE__) + #call " failed: " + \
                            std::string(dt_msg_, dt_len_));                                   \
    }                                                                                         \
  } while (0)

#define DT_CHECK_H5(call, ...)                                                                \
  ([&]() {                                                                                    \
    auto dt_rc_ = (call);                                                                     \
    if (dt_rc_ < 0)                                                                           \
      throw ::dtrain::Error(::dtrain::detail::where(__FILE__, __LINE__) + #call " failed: " + \
                            ::dtrain::detail::concat(__VA_ARGS__));                           \
    return dt_rc_;                                                                            \
  }())

// A library call whose status must equal `ok`; to_string(status) names the failure.
#define DT_CHECK_STATUS(call, ok, to_string)                                                \
  do {                                                                                      \
    auto dt_rc_ = (call);                                                                   \
    if (dt_rc_ != (ok))                                                                     \
      throw ::dtrain::Error(::dtrain::detail::where(__FILE__, __LINE__) + #call " failed: " + \
                            to_string(dt_rc_));                                             \
  } while (0)

#define DT_CHECK_CUDA(call) DT_CHECK_STATUS(call, cudaSuccess, cudaGetErrorString)
#define DT_CHECK_CUDNN(call) DT_CHECK_STATUS(call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
#define DT_CHECK_CUBLAS(call) DT_CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)
#define DT_CHECK_NCCL(call) DT_CHECK_STATUS(call, ncclSuccess, ncclGetErrorString)
