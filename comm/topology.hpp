// comm/topology.hpp — roles and nodes of an MPI job (DESIGN.md §3).
//
// World ranks = W workers + N_ps parameter servers: the last N_ps world ranks
// are servers (N_ps = 0: allreduce mode). Workers are grouped into nodes by
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), or, with ranks_per_node = K > 0,
// into virtual nodes of K consecutive workers so the full hierarchy runs on one
// machine. The lowest worker rank of a node is its leader. Identity comes from
// MPI only, never from launcher variables.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace dtrain::comm {

struct TopologyOptions {
  int num_ps = 0;          // parameter-server ranks (the last ones)
  int ranks_per_node = 0;  // 0: real nodes (shared-memory domains); K > 0: virtual nodes of K workers
};

class Topology {
 public:
  // Collective over `world`. Throws UsageError naming the option ('ps',
  // 'ranks-per-node') on an impossible layout: num_ps < 0 or ≥ world size
  // (zero workers), K < 0, K not dividing W. Every rank reaches the same verdict.
  Topology(MPI_Comm world, const TopologyOptions& o);
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  MPI_Comm world() const { return world_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int num_workers() const { return num_workers_; }
  int num_servers() const { return num_servers_; }
  bool is_server() const { return rank_ >= num_workers_; }
  bool is_worker() const { return !is_server(); }
  int worker_index() const { return is_worker() ? rank_ : -1; }  // = world rank for workers
  int server_index() const { return is_server() ? rank_ - num_workers_ : -1; }
  int server_rank(int s) const { return num_workers_ + s; }  // world rank of server s

  // Node structure of the workers (servers belong to no node: node() == -1).
  int num_nodes() const { return num_nodes_; }
  int node() const { return node_; }
  int local_rank() const { return local_rank_; }  // index within the node
  int local_size() const { return local_size_; }
  bool is_leader() const { return is_worker() && local_rank_ == 0; }
  int leader_rank(int node) const { return leaders_.at(static_cast<size_t>(node)); }  // world rank
  // Ranks sharing this machine's cores, servers included (comm::ranks_on_kernel: the
  // shared-memory domain, or every emulated node on this kernel): thread and wait defaults.
  int ranks_on_host() const { return ranks_on_host_; }

  MPI_Comm workers() const { return workers_; }  // all workers; MPI_COMM_NULL on servers
  MPI_Comm node_comm() const { return node_comm_; }  // workers of this node; NULL on servers
  MPI_Comm leaders() const { return leaders_comm_; }  // node leaders; NULL elsewhere

  std::string describe() const;  // "5 ranks: 4 workers in 2 nodes of 2, 1 server"

 private:
  MPI_Comm world_;
  int rank_ = 0, size_ = 1, num_workers_ = 1, num_servers_ = 0;
  int num_nodes_ = 1, node_ = 0, local_rank_ = 0, local_size_ = 1, ranks_on_host_ = 1;
  std::vector<int> leaders_;     // world rank of each node's leader, by node
  std::vector<int> node_sizes_;  // workers per node, by node
  MPI_Comm workers_ = MPI_COMM_NULL, node_comm_ = MPI_COMM_NULL, leaders_comm_ = MPI_COMM_NULL;
};

// Stops with a clear message when the launcher started N singletons instead
// of one N-rank job (srun with a mismatched PMI plugin): SLURM_NTASKS is set
// and differs from the MPI world size, and the ranks were not started by
// mpirun (which may run fewer ranks than the allocation has tasks). Throws UsageError.
void check_launcher(int world_size);

}  // namespace dtrain::comm
