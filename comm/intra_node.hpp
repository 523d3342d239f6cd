// comm/intra_node.hpp — intra-node reducers: the sum inside one node
// (DESIGN.md §1: hybrid reduces to the node leader and broadcasts back; the
// allreduce mode on one node allreduces there), one small interface with an
// ordered list of implementations (after NCCL's transport table: each
// candidate says whether it applies, the first that does is used):
//
//   1. "nccl"  the arena is on a CUDA GPU and NCCL is built in: NcclReducer
//              (nccl_reducer.hpp) over the node, on the device buffers.
//   2. "mpi"   always: MPI over the node communicator, on host memory. When
//              the arena is on a device whose memory MPI may touch (the
//              cpu-staged test device) it works on the arena itself, else on
//              the caller's host staging buffers (on_device() says which).
//
// The exchange (ps_client.cpp, exchange.cpp) calls the collectives where the
// reducer works on the device memory itself (on_device()); on host memory its
// own point-to-point node reduction does the same sums. The CPU run with the
// MPI reducer on cpu-staged memory thus walks the control flow of the NCCL run.
//
// Sum order: MPI — the leader adds the members' buffers to its own in
// local-rank order, ((r0 + r1) + r2) + …, exactly as the host hybrid leader
// does (ps_client.cpp), and allreduce is the workers' deterministic allreduce
// (allreduce.hpp: the same algorithm for the same count and rank count) over
// the node: a one-node allreduce gives the bits of the workers' allreduce. NCCL — NCCL's order (fixed for a fixed topology and count;
// not the MPI order).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dtrain::comm {

class IntraNodeReducer {
 public:
  virtual ~IntraNodeReducer() = default;
  virtual const char* name() const = 0;  // "nccl", "mpi"
  // true: the buffers are the arena's own (device) memory; false: host memory
  // (the caller stages device data through host buffers around each call).
  virtual bool on_device() const = 0;
  virtual int rank() const = 0;  // local rank; 0 is the node leader
  virtual int size() const = 0;

  // Collectives over the node: every member calls them in the same order with
  // the same count. Throw dtrain::Error on a transport failure.
  virtual void reduce_to_leader(float* buf, size_t count) = 0;      // leader's buf = Σ; members' buf unchanged
  virtual void broadcast_from_leader(float* buf, size_t count) = 0;  // everyone's buf = the leader's
  virtual void allreduce(float* buf, size_t count) = 0;              // everyone's buf = Σ, identical bits
};

struct IntraNodeOptions {
  MPI_Comm node_comm = MPI_COMM_NULL;  // the node's workers (Topology::node_comm())
  size_t max_chunk = (size_t{1} << 31) - 1;  // MPI messages are cut below this (elements)
  int cuda_device = -1;           // ≥ 0: the arena is on this CUDA device
  bool device_host_addressable = false;  // the arena's memory is host memory MPI may touch
  double timeout_s = 600;         // NCCL: the most one operation may take (0 = no limit)
  std::string prefer = "auto";    // "auto" (the list above), "nccl" or "mpi"
  // mpi: the allreduce's crossover, bytes (SIZE_MAX: comm/allreduce.hpp's),
  // the exchange's own (ExchangeOptions::latency_max_bytes), so that the
  // reducer and the workers' allreduce sum a bucket in the same order.
  size_t latency_max_bytes = SIZE_MAX;
};

// Collective over node_comm (duplicated inside). Throws UsageError when
// `prefer` names a reducer that does not apply here (e.g. "nccl" without NCCL
// or without a CUDA arena), naming what would.
std::unique_ptr<IntraNodeReducer> make_intra_node_reducer(const IntraNodeOptions& o);

// Whether NCCL is compiled into comm/ (DTRAIN_HAVE_NCCL).
bool nccl_available();

}  // namespace dtrain::comm
