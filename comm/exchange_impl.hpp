// comm/exchange_impl.hpp — the state behind Exchange (internal to comm/):
// shared by exchange.cpp (construction, the communication thread, the
// allreduce step, collectives), ps_client.cpp (the worker side of ps/hybrid)
// and ps_server.cpp (the server loop).
#pragma once

#include <chrono>

#include <mpi.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/exchange.hpp"
#include "comm/intra_node.hpp"
#include "comm/ring_allreduce.hpp"

namespace dtrain::comm {

struct Exchange::Impl {
  Impl(const Topology& t, const ExchangeOptions& o, size_t arena);
  ~Impl();

  const Topology& topo;
  ExchangeOptions opts;
  size_t arena;
  size_t chunk;  // clamped max_chunk_elems
  ShardMap map;

  MPI_Comm ps_comm = MPI_COMM_NULL;       // dup of the world: control, slices (ps, hybrid)
  MPI_Comm node_comm = MPI_COMM_NULL;     // dup of the node: hybrid reduce / broadcast
  MPI_Comm workers_comm = MPI_COMM_NULL;  // dup of the workers: sum_over_workers
  std::unique_ptr<detail::RingAllreduce> ring;  // workers: buckets, average_over_workers

  // Device arena (opts.device.enabled; device_step.cpp): the intra-node
  // reducer (hybrid, and allreduce on one node) and the host staging buffers
  // of gradients and parameters (arena-sized; null where this rank needs none).
  std::unique_ptr<IntraNodeReducer> reducer;
  struct HostFree {
    std::function<void(void*)> release;
    void operator()(float* p) const;
  };
  std::unique_ptr<float, HostFree> stage_g, stage_p;

  // Hybrid leader: one receive buffer per other node member, and the node sum.
  std::vector<std::unique_ptr<float[]>> member_bufs;
  std::unique_ptr<float[]> node_sum;
  int64_t ctrl_msg = 0;  // the control message in flight (its buffer)

  // ---- worker step state, shared by the caller and the communication thread
  std::mutex mu;
  std::condition_variable cv_work;  // caller → thread: a step, ready ranges, quit
  std::condition_variable cv_done;  // thread → caller: the step is done
  bool quit = false;
  bool exited = false;              // the thread has left its loop
  bool in_step = false;             // between begin_step and finish_step's return
  bool step_done = false;
  bool broken = false;              // a step failed: no further steps
  bool stopped = false;
  uint64_t step_seq = 0;            // begin_step count (the thread runs each once)
  int64_t step = 0;
  float* params = nullptr;
  float* grads = nullptr;
  size_t ready_lo = 0;              // [ready_lo, arena) is ready
  std::map<size_t, size_t> pending; // ready ranges above a gap: end → begin
  std::exception_ptr error;
  // When the step's first gradient range was reported (grads_ready); StepTimes.busy_s
  // runs from here to the end of finish_step.
  std::chrono::steady_clock::time_point first_ready{};
  bool any_ready = false;
  std::thread thread;

  // Communication thread.
  void thread_main();
  void run_step();
  void run_step_allreduce();
  void run_step_ps();  // ps_client.cpp: ps workers, hybrid leaders and members
  // device_step.cpp: every mode with a device arena.
  void setup_device();
  void run_step_device();
  void device_allreduce();
  void device_ps();
  // Returns once [target, arena) is ready and the arena pointers are known;
  // lo: the caller's watermark, updated.
  void wait_ready_to(size_t target, size_t& lo, float*& p, float*& g);
  // Waits (at most timeout_s; < 0: no limit) until ranges below `below`
  // are ready; returns the current watermark (arena while the arena pointers
  // are unknown). Throws Cancelled when the Exchange is being destroyed.
  size_t wait_ready(size_t below, double timeout_s);
  struct Cancelled {};

  bool is_sender() const;  // talks to the servers: a ps worker, a hybrid leader
  std::vector<int> senders() const;  // world ranks of all senders, ascending

  void serve(float* params, const UpdateRule& rule);  // ps_server.cpp
};

}  // namespace dtrain::comm
