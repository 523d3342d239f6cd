// comm/nccl_reducer.hpp — the intra-node reducer over NCCL (GPU buffers).
//
// One NCCL communicator per node: local rank 0 of the node's MPI communicator
// (comm::Topology::node_comm()) makes the unique id and broadcasts it over that
// communicator; every rank then joins with its local rank on the device it was
// bound to (layers::cuda_device_for_local_rank, checked first with
// comm::check_device_binding). Compiled only when CUDA and NCCL are found
// (DTRAIN_HAVE_NCCL); the MPI reducer stays the CPU path.
//
// Hybrid step (DESIGN.md §1): reduce_to_leader() sums the node's gradients into
// the leader's buffer, the leader exchanges with the PS shards, then
// broadcast_from_leader() hands the new parameters back. allreduce(),
// reduce_scatter() and all_gather() serve the allreduce mode and a sharded
// leader exchange.
//
// Used by the exchange through the IntraNodeReducer interface (intra_node.hpp).
// Any thread may call the operations (one at a time).
//
// Ordering and errors: operations run on the reducer's own (blocking) CUDA
// stream, which waits for work queued earlier on the legacy default stream (the
// CUDA backend's) and is waited for by later default-stream work. Every call
// returns when its operation has finished; while waiting it polls
// ncclCommGetAsyncError and a deadline, and on an error or timeout aborts the
// communicator and throws dtrain::Error naming the operation and NCCL's
// message, so a dead peer ends the job instead of hanging it.
#pragma once

#include <mpi.h>

#include <cstddef>

struct ncclComm;
struct CUstream_st;

namespace dtrain::comm {

class NcclReducer {
 public:
  // Collective over node_comm. device: the CUDA device this rank drives.
  // timeout_s: the most one operation may take before the job is stopped.
  NcclReducer(MPI_Comm node_comm, int device, double timeout_s = 600.0);
  ~NcclReducer();
  NcclReducer(const NcclReducer&) = delete;
  NcclReducer& operator=(const NcclReducer&) = delete;

  int rank() const { return rank_; }  // local rank; 0 is the leader
  int size() const { return size_; }

  // All pointers are device pointers of `count` floats unless stated.
  void reduce_to_leader(float* buf, size_t count);      // leader's buf = Σ over the node
  void broadcast_from_leader(float* buf, size_t count);  // everyone's buf = leader's
  void allreduce(float* buf, size_t count);              // everyone's buf = Σ
  // send: size()·recv_count floats; recv: this rank's slice [rank·recv_count, +recv_count) of Σ
  void reduce_scatter(const float* send, float* recv, size_t recv_count);
  // send: send_count floats; recv: size()·send_count floats, rank r's block at r·send_count
  void all_gather(const float* send, float* recv, size_t send_count);

 private:
  void ready();  // the communicator is alive; this thread drives device_
  void wait(const char* what);
  void abort_comm();

  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
  double timeout_s_;
};

}  // namespace dtrain::comm
