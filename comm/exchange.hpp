// comm/exchange.hpp — the gradient exchange: one interface, three modes
// (DESIGN.md §1, §3).
//
//   allreduce  every worker allreduces gradient buckets across all workers
//              (the baseline); the engine applies SGD locally.
//   ps         every worker pushes gradient slices to the servers that own
//              them (ShardMap) and pulls the updated parameter slices.
//   hybrid     workers reduce to their node leader, leaders push/pull to the
//              servers, leaders broadcast the new parameters in the node.
//              Only node leaders talk to servers.
//
// Worker protocol per step (called by the engine's training loop; small
// allreduce steps run inside finish_step on the caller's thread, see
// kInlineStepBytes):
//   begin_step(step)                 before backward
//   grads_ready(begin, end)          from the Net's GradReadyFn, as layers finish
//                                    backward (descending ranges of the arena);
//                                    ready buckets leave at once (overlap)
//   finish_step(params, grads)       waits for the step's traffic (at most
//                                    step_timeout_s: a stalled or dead peer
//                                    becomes an Error, never a hang); afterwards
//                                    allreduce: grads = Σ_workers grads
//                                    ps/hybrid: params = the servers' new params
//                                    (with a device arena: in device memory)
// Server protocol: serve(params, rule) until every sender called stop().
// Sums are taken in a fixed order, so results are deterministic; every
// transfer is cut into chunks of at most max_chunk_elems elements; offsets
// and counts are size_t. The wire protocols, each stated once where it is
// implemented: allreduce in exchange.cpp, ps/hybrid in ps_client.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/shard.hpp"
#include "comm/topology.hpp"

namespace dtrain::timeline {
class Buffer;  // core/timeline.hpp
}

namespace dtrain::comm {

enum class Mode { allreduce, ps, hybrid };
Mode parse_mode(const std::string& s);  // UsageError naming option 'mode' otherwise
const char* mode_name(Mode m);

// Where the arena lives. By default in host memory, and the pointers given to
// begin_step/finish_step are host pointers. With `enabled`, they are device
// pointers (a GPU's, or the cpu-staged test device's): the exchange never
// reads them itself but stages through its own host buffers (host_alloc:
// pinned on CUDA; this OpenMPI is not CUDA-aware) with download/upload, slice
// by slice (bucket by bucket) as grads_ready reports them. Inside a node it
// reduces with an IntraNodeReducer where one works on the device memory
// (intra_node.hpp: NCCL on a CUDA device, MPI on cpu-staged memory), else with
// the host protocol on the staged copies. The same step code serves host and
// device arenas (staging.hpp). The hooks are called from the
// communication thread; each returns when its copy is complete and is ordered
// after the device work queued before the range was reported ready.
struct DeviceArena {
  bool enabled = false;
  int cuda_device = -1;            // ≥ 0: a CUDA device (the NCCL reducer applies)
  bool host_addressable = false;   // the device memory is host memory MPI may touch (cpu-staged)
  std::function<void(const float* dev, float* host, size_t count)> download;
  std::function<void(const float* host, float* dev, size_t count)> upload;
  std::function<void*(size_t bytes)> host_alloc;  // staging buffers; null: plain new
  std::function<void(void*)> host_free;           // matches host_alloc
  std::string node_reducer = "auto";              // auto | nccl | mpi (intra_node.hpp)
};

// Allreduce steps that run on the caller's thread: a step whose arena is at
// most one bucket, or at most this many bytes, runs inside finish_step
// (no hand-off to the communication thread). One bucket cannot overlap
// backward anyway (it is ready when backward ends), and below this size the
// hand-off costs more than overlapping buckets could hide: `dtrain bench
// comm`'s allreduce column on the 2-core development VM, before (dae0cfc,
// every step through the thread) and after (bench/README.md, "Exchange"):
// 4 KiB 8 → 1 µs, 64 KiB 19 → 12 µs, 256 KiB 40 → 37 µs. The default
// bucket (1 MiB) is larger than this, so this limit decides only for
// bucket_bytes below 256 KiB.
inline constexpr size_t kInlineStepBytes = size_t{256} << 10;

struct ExchangeOptions {
  Mode mode = Mode::allreduce;
  size_t bucket_bytes = size_t{1} << 20;          // allreduce buckets (fusion size)
  // Allreduce: a host arena of at most max(bucket_bytes, inline_step_bytes)
  // bytes, or of a single worker, is exchanged inline (above).
  size_t inline_step_bytes = kInlineStepBytes;
  // Allreduce: buckets of at most this many bytes use recursive doubling,
  // larger ones the ring (comm/allreduce.hpp); SIZE_MAX: that header's
  // latency_max_for(the workers' communicator size).
  size_t latency_max_bytes = SIZE_MAX;
  size_t max_chunk_elems = (size_t{1} << 31) - 1;  // every transfer is cut below this
  size_t max_slice = size_t{1} << 20;              // ShardMap slice size, floats
  size_t min_slice = size_t{1} << 14;              // ShardMap floor, floats
  double step_timeout_s = 600;  // finish_step gives up (Error) after this long; 0 = wait forever
  DeviceArena device;           // default: the arena is host memory
  // --timeline (core/timeline.hpp): where the exchange records its transfers,
  // written only by the thread that runs them — a worker's communication
  // thread (or the caller, inside finish_step, for an inline step; the two
  // never run at once), a server's serve(). Null: nothing is recorded (the default).
  timeline::Buffer* timeline = nullptr;
};

// The optimizer as a server sees it: applies one update to the range
// [begin, end) (floats) of the arena. params and grads point at the start of
// the WHOLE arena; grads holds the sum of the step's contributions (the
// engine's loss scale makes it the global-batch mean gradient). step counts
// from 0. The rule owns its optimizer state (momentum).
using UpdateRule = std::function<void(float* params, const float* grads, size_t begin, size_t end, int64_t step)>;

// The same update out of place, for a speculating server: reads the old
// values from in, writes the new ones to out, for [begin, end) of each arena:
// in[0]/out[0] the parameters, in[1 + i]/out[1 + i] the rule's state arena
// ServeHooks::state[i] (each out arena is the other generation of its in
// arena: they never overlap). Whole-arena pointers, as UpdateRule's. Must
// write every element of [begin, end) in every out arena (an element the rule
// does not update is copied from in: out holds the generation before last),
// bitwise what UpdateRule leaves in place from the same values.
using UpdateIntoRule = std::function<void(const float* const* in, float* const* out, const float* grads,
                                          size_t begin, size_t end, int64_t step)>;

// What the servers do with a step's summed gradient (ps/hybrid). The check is
// joint: after every slice of the step is summed, the servers exchange
// (non-finite?, Σ g² of their slices) and all take the same decision — every
// server skips the step, or none does. Without speculation a server updates
// and returns its slices only after that decision, so a step's pulls wait for
// all of its pushes. With speculation (ps mode, no clipping) it updates and
// returns each piece as soon as the piece is summed and finite. It keeps two
// generations of the parameters and the rule's state (the caller's arenas and
// its own): a step reads the current one and writes the other (rule_into), so
// the old values stay where they were and nothing is copied aside; the step
// becomes current when the joint check keeps it. A step that the check skips
// is rolled back for free — its generation dropped, every slice returned again
// from the current one (status flag kStatusResend, ps_client.cpp) — so the
// parameters and the state after any step are bitwise those of the
// non-speculative protocol (docs/reliability.md). serve() leaves the current
// values in the caller's arenas whenever it returns normally (after an Error
// they may be in its own).
struct ServeHooks {
  UpdateRule rule;
  // Speculate (see above) when the mode is ps and clip_norm is 0; hybrid and
  // clipping (the scale needs the whole step's norm) always wait for the check.
  // Needs rule_into (serve() throws Error otherwise).
  bool speculate = false;
  // The rule's state besides the parameters: arenas indexed like them (the
  // Sgd's momentum), double-buffered with them while speculating. A rule with
  // state it does not list here must leave speculate false.
  std::vector<float*> state;
  UpdateIntoRule rule_into;  // the rule out of place; used only while speculating
  // > 0: the summed gradient is scaled by min(1, clip_norm / ‖g‖₂) before the
  // update (global-norm clipping, Pascanu et al. 2013); ‖g‖ over all servers.
  double clip_norm = 0;
  // Polled once per step: true when this server was asked to stop (a signal).
  // Reported to the senders in the step's status (StepTimes::peer_signalled).
  std::function<bool()> signalled;
};

// Why serve() returned.
enum class ServeEnd {
  stopped,              // every sender called stop()
  checkpoint,           // every sender called request_checkpoint(false): send_server_state, then serve again
  checkpoint_and_stop,  // request_checkpoint(true): send_server_state, then the job ends (requeue)
};

struct StepTimes {
  double exposed_s = 0;  // time finish_step blocked: communication not hidden
  double busy_s = 0;     // from the step's first grads_ready to the end of finish_step (≥ exposed_s;
                         // = exposed_s for an inline step, which works only inside finish_step)
  // ps/hybrid, on the senders (every ps worker, the hybrid node leaders); false elsewhere:
  bool skipped = false;         // the servers found a non-finite summed gradient and skipped the update
  bool peer_signalled = false;  // a server reported a stop request (ServeHooks::signalled)
  double grad_norm = -1;        // ‖summed gradient‖₂ the servers measured (−1: not known here)
};

class Exchange {
 public:
  // Collective over the topology's world. arena_floats: parameters (= gradients).
  Exchange(const Topology& topo, const ExchangeOptions& o, size_t arena_floats);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  Mode mode() const;
  bool servers_update() const { return mode() != Mode::allreduce; }
  const ShardMap& shard_map() const;

  // Start-up, collective over the world: world rank 0 (a worker) sends its
  // parameters to every other rank (workers and servers). Host memory always
  // (the caller stages a device arena), as for the two collectives below.
  void broadcast_params(float* params);
  // The intra-node reducer of a device arena ("nccl", "mpi"); "" otherwise.
  std::string node_reducer() const;

  // Worker side (see the protocol above). Throws Error on a transport failure.
  // params/grads: the arena, as later passed to finish_step. Give them here so
  // buckets can leave during backward; without them (nullptr) the step's
  // traffic starts only in finish_step (correct, but nothing overlaps).
  // Ranges reported by grads_ready may be read (and, in ps/hybrid, their
  // params overwritten) by the communication thread until finish_step returns.
  void begin_step(int64_t step, float* params = nullptr, float* grads = nullptr);
  void grads_ready(size_t begin, size_t end);
  StepTimes finish_step(float* params, float* grads);
  // Tells the servers that this sender will send no more steps.
  void stop();

  // Checkpoint of the servers' state (ps/hybrid), between steps, called by
  // every worker: the senders ask every server for its slices (and_stop: the
  // servers then leave serve() for good; nobody calls stop()); world rank 0
  // receives each server's slices of the parameters and of the optimizer
  // state into params_out and state_out (host, the whole arena; ignored
  // elsewhere). A no-op in allreduce mode.
  void request_checkpoint(bool and_stop, float* params_out, float* state_out);
  // Server side of request_checkpoint, after serve() returned checkpoint or
  // checkpoint_and_stop: sends its slices of params and state to world rank 0.
  void send_server_state(const float* params, const float* state);

  // Server side: runs the step loop on the server's slices until every sender
  // has stopped or asked for a checkpoint. params: the whole arena (after
  // broadcast_params).
  ServeEnd serve(float* params, const ServeHooks& hooks);
  ServeEnd serve(float* params, const UpdateRule& rule) { return serve(params, ServeHooks{rule, false, {}, nullptr, 0, nullptr}); }

  // Collective over the workers: x ← mean over workers (batch-norm running
  // statistics before evaluation and saving), and x ← Σ over workers
  // (evaluation counts). No-ops with one worker.
  void average_over_workers(float* x, size_t count);
  void sum_over_workers(double* x, size_t count);
  // sum_over_workers of a few doubles (count ≤ 2^31 − 1) as part of a step,
  // after finish_step: under the step's --comm-timeout (a peer that never
  // joins ends the job as a stalled exchange does, StepChannel::abort_stalled).
  void sum_over_workers_in_step(double* x, size_t count);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain::comm
