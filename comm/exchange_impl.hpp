// comm/exchange_impl.hpp — the state behind Exchange (internal to comm/), in
// three parts with one owner each:
//
//   StepChannel  (step_channel.hpp)  the worker channel: the caller ⇄
//                communication-thread hand-off of a step (watermark, arena
//                pointers, done / error)
//   Staging      (staging.hpp)       where MPI reads and writes the arena:
//                identity for a host arena, host buffers for a device arena
//   serve_ps     (ps_server.cpp)     the server loop, with its own state
//
// and Impl itself: the communicators and reducers built once, the worker's
// communication thread and the two worker steps — run_step_allreduce
// (exchange.cpp; small steps run inline by the caller) and run_step_ps
// (ps_client.cpp, ps and hybrid), one implementation per mode for host and
// device arenas alike.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "comm/exchange.hpp"
#include "comm/intra_node.hpp"
#include "comm/allreduce.hpp"
#include "comm/staging.hpp"
#include "comm/step_channel.hpp"
#include "comm/transfer_trace.hpp"

namespace dtrain::comm {

namespace detail {
// The ranks that talk to the servers: every worker (ps) or every node leader
// (hybrid), in ascending world rank — the order of the servers' sums.
std::vector<int> senders(const Topology& topo, Mode mode);
bool is_sender(const Topology& topo, Mode mode);

// ps_server.cpp: the server half of the ps/hybrid protocol (ps_client.cpp)
// until every sender has stopped or asked for a checkpoint. params: the whole
// arena. server_comm: the servers only (the joint check of a step).
// tl: the timeline (null: off).
ServeEnd serve_ps(const Topology& topo, Mode mode, const ShardMap& map, MPI_Comm ps_comm, MPI_Comm server_comm,
                  size_t chunk, float* params, const ServeHooks& hooks, timeline::Buffer* tl);

// Control messages (tag kTagControl, ps_comm), one int64 per sender and step.
inline constexpr int64_t kCtrlStop = -1;
inline constexpr int64_t kCtrlCheckpoint = -2;
inline constexpr int64_t kCtrlCheckpointStop = -3;

// A server's status of one step, to each sender: [flags, ‖g‖₂] as doubles.
inline constexpr double kStatusSkipped = 1;    // flag bits
inline constexpr double kStatusSignalled = 2;
inline constexpr double kStatusResend = 4;  // skipped after speculative returns: every slice follows again
}  // namespace detail

struct Exchange::Impl {
  Impl(const Topology& t, const ExchangeOptions& o, size_t arena);
  ~Impl();  // frees the communicators; the thread is Exchange's to end

  const Topology& topo;
  ExchangeOptions opts;
  size_t arena;
  size_t chunk;  // clamped max_chunk_elems
  ShardMap map;

  MPI_Comm ps_comm = MPI_COMM_NULL;       // dup of the world: control, slices (ps, hybrid)
  MPI_Comm node_comm = MPI_COMM_NULL;     // dup of the node: hybrid member ⇄ leader
  MPI_Comm workers_comm = MPI_COMM_NULL;  // dup of the workers: sum_over_workers
  MPI_Comm server_comm = MPI_COMM_NULL;   // the servers only: the joint check of a step
  std::unique_ptr<detail::Allreduce> allreduce;  // workers: buckets, average_over_workers
  // Device arena only: the intra-node reducer (hybrid, and allreduce on one
  // node). The steps use it where it works on the device memory itself
  // (on_device(): NCCL, or MPI on cpu-staged memory); on host memory the steps'
  // own MPI transfers do its job, with the same sums.
  std::unique_ptr<IntraNodeReducer> reducer;
  detail::Staging staging;      // identity unless opts.device.enabled
  detail::StepChannel channel;  // workers

  // ps_client.cpp's buffers, kept across steps (receives are posted into them
  // and may outlive a failed step): a hybrid leader's receive buffer per node
  // member and the node sum; the control message in flight.
  std::vector<std::unique_ptr<float[]>> member_bufs;
  std::unique_ptr<float[]> node_sum;
  int64_t ctrl_msg = 0;
  // A sender's receive of each server's step status, and what it said
  // (written by the thread before the step is done, read after finish).
  std::vector<double> status_in;
  StepTimes status;

  // The timeline's transfers of the thread's step (transfer_trace.hpp), and
  // the world rank of each node-local rank (the peers of node traffic).
  detail::TransferTrace trace;
  std::vector<int> node_world;

  std::thread thread;  // workers: the communication thread

  void setup_device();  // reducer and staging of a device arena
  void thread_main();
  // The step of this mode, on the thread or inline. ready_grads: the arena's
  // gradients, all of them ready (an inline step); null: the thread waits
  // for the watermark.
  void run_step(int64_t st, float* ready_grads);
  void run_step_allreduce(int64_t st, float* ready_grads);  // exchange.cpp
  // An allreduce step on a host arena of at most max(bucket, inline) bytes,
  // or of one worker: finish_step runs it on the caller's thread
  // (exchange.hpp kInlineStepBytes).
  bool step_inline() const;
  void run_step_ps(int64_t st);  // ps_client.cpp: ps workers, hybrid leaders and members
  bool reducer_on_device() const { return reducer && reducer->on_device(); }
};

}  // namespace dtrain::comm
