// comm/discovery.hpp — what the machine looks like to MPI: which ranks share a
// host (node discovery, the one place that calls MPI_Comm_split_type) and how
// fast a link between two ranks is (the ping-pong of the tuner and of
// `dtrain bench comm`).
#pragma once

#include <mpi.h>

#include <cstddef>

namespace dtrain::comm {

// An owning MPI communicator: freed on destruction (unless MPI is finalized).
class Comm {
 public:
  Comm() = default;
  explicit Comm(MPI_Comm c) : c_(c) {}
  ~Comm();
  Comm(Comm&& o) noexcept : c_(o.release()) {}
  Comm& operator=(Comm&& o) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  MPI_Comm get() const { return c_; }
  MPI_Comm release() {  // the caller owns it now
    MPI_Comm c = c_;
    c_ = MPI_COMM_NULL;
    return c;
  }
  int rank() const;  // in this communicator; Error on MPI_COMM_NULL
  int size() const;

 private:
  MPI_Comm c_ = MPI_COMM_NULL;
};

// A duplicate of `c` (collective over `c`): a protocol's own message space.
Comm duplicate(MPI_Comm c);

// The ranks of `c` that share this rank's host (shared-memory domain),
// ordered as in `c`. Collective over `c`. Throws Error on an MPI failure.
Comm split_host(MPI_Comm c);

// Ranks of `c` that run on this rank's kernel: the same
// /proc/sys/kernel/random/boot_id (one per booted kernel, the same in every
// namespace). More than split_host(c).size() when emulated nodes (network +
// UTS namespaces, scripts/emulated-cluster.sh) share one machine's cores.
// Collective over `c`; split_host(c).size() where boot_id cannot be read.
int ranks_on_kernel(MPI_Comm c);

// World ranks, by rank 0's node (collective over `world`): the first rank on
// another node, and the first rank other than 0 on rank 0's node; −1 when there
// is none. ranks_per_node > 0: virtual nodes of that many consecutive ranks;
// 0: real nodes (split_host).
int other_node_rank(MPI_Comm world, int ranks_per_node);
int same_node_rank(MPI_Comm world, int ranks_per_node);

// Ping-pong between ranks a and b of `c` (collective over `c`; the other ranks
// wait): one-way time of a `bytes` message (any size: sent in pieces of at most
// 1 GiB), the median (the upper one of an even count) of `iters`
// round trips after one warm-up, or the fastest
// with `fastest`. Seconds, the same figure on every rank. Throws Error on an
// MPI failure.
double pingpong_seconds(MPI_Comm c, int a, int b, size_t bytes, int iters, bool fastest = false);

}  // namespace dtrain::comm
