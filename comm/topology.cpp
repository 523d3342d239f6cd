// comm/topology.cpp — roles, nodes and communicators of an MPI job
// (DESIGN.md §3; the contract is in topology.hpp).
//
// Construction is collective over `world` and goes:
//   1. validate the layout from (world size, options) alone, after checking
//      with one allreduce that every rank was given the same options, so every
//      rank throws the same UsageError or none does;
//   2. workers = the first W = size − N_ps ranks (MPI_Comm_split);
//   3. nodes: virtual nodes of K consecutive workers, or the shared-memory
//      domains of the workers (split_host over `workers`, discovery.hpp);
//   4. leaders: one allgather over the world of "my leader's world rank" (−1
//      on servers) numbers the nodes by their leader, so servers know them too;
//   5. ranks_on_host: a shared-memory split of the whole world.
// The topology keeps a duplicate of `world`, so its traffic never meets the
// caller's.
#include "comm/topology.hpp"

#include <algorithm>
#include <sstream>

#include "comm/discovery.hpp"
#include "core/error.hpp"
#include "core/settings.hpp"

namespace dtrain::comm {

namespace {

void free_comm(MPI_Comm& c) {
  if (c == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&c);
  c = MPI_COMM_NULL;
}

// Same options on every rank? (min == max over the world for both values)
bool options_agree(MPI_Comm world, const TopologyOptions& o) {
  int v[4] = {o.num_ps, o.ranks_per_node, -o.num_ps, -o.ranks_per_node};
  int r[4];
  DT_CHECK_MPI(MPI_Allreduce(v, r, 4, MPI_INT, MPI_MIN, world));
  return r[0] == -r[2] && r[1] == -r[3];
}

}  // namespace

Topology::Topology(MPI_Comm world, const TopologyOptions& o) {
  int wr = 0, ws = 1;
  DT_CHECK_MPI(MPI_Comm_rank(world, &wr));
  DT_CHECK_MPI(MPI_Comm_size(world, &ws));

  // 1. Validation: a function of (ws, o) only, identical on every rank.
  if (!options_agree(world, o))
    DT_USAGE("options 'ps' and 'ranks-per-node' differ between ranks (every rank must get the same job file and "
             "command line)");
  if (o.num_ps < 0) DT_USAGE("option 'ps' = ", o.num_ps, ": the number of parameter-server ranks cannot be negative");
  if (o.num_ps >= ws)
    DT_USAGE("option 'ps' = ", o.num_ps, " leaves no worker in a world of ", ws,
             " rank(s): the last 'ps' ranks are servers, so 'ps' must be below the world size");
  const int nw = ws - o.num_ps;
  if (o.ranks_per_node < 0)
    DT_USAGE("option 'ranks-per-node' = ", o.ranks_per_node, " is negative (0 = real nodes, K > 0 = virtual nodes)");
  if (o.ranks_per_node > 0 && nw % o.ranks_per_node != 0)
    DT_USAGE("option 'ranks-per-node' = ", o.ranks_per_node, " does not divide the ", nw, " worker(s) (", ws,
             " ranks − 'ps' = ", o.num_ps, ")");

  DT_CHECK_MPI(MPI_Comm_dup(world, &world_));
  rank_ = wr;
  size_ = ws;
  num_workers_ = nw;
  num_servers_ = o.num_ps;

  // 2. Workers.
  DT_CHECK_MPI(MPI_Comm_split(world_, is_worker() ? 0 : MPI_UNDEFINED, rank_, &workers_));

  // 3. Nodes of the workers.
  if (is_worker()) {
    if (o.ranks_per_node > 0) {
      DT_CHECK_MPI(MPI_Comm_split(workers_, rank_ / o.ranks_per_node, rank_, &node_comm_));
    } else {
      node_comm_ = split_host(workers_).release();
    }
    DT_CHECK_MPI(MPI_Comm_rank(node_comm_, &local_rank_));
    DT_CHECK_MPI(MPI_Comm_size(node_comm_, &local_size_));
  } else {
    local_rank_ = -1;
    local_size_ = 0;
  }

  // 4. Leaders, known on every rank. The split key is the world rank, so
  // local rank 0 is the lowest worker rank of the node.
  int my_leader = -1;
  if (is_worker()) {
    my_leader = rank_;
    DT_CHECK_MPI(MPI_Bcast(&my_leader, 1, MPI_INT, 0, node_comm_));
  }
  std::vector<int> leader_of(static_cast<size_t>(size_));
  DT_CHECK_MPI(MPI_Allgather(&my_leader, 1, MPI_INT, leader_of.data(), 1, MPI_INT, world_));
  for (int l : leader_of)
    if (l >= 0) leaders_.push_back(l);
  std::sort(leaders_.begin(), leaders_.end());
  leaders_.erase(std::unique(leaders_.begin(), leaders_.end()), leaders_.end());
  num_nodes_ = static_cast<int>(leaders_.size());
  node_sizes_.assign(leaders_.size(), 0);
  for (int l : leader_of)
    if (l >= 0) ++node_sizes_[static_cast<size_t>(std::lower_bound(leaders_.begin(), leaders_.end(), l) - leaders_.begin())];
  node_ = is_worker() ? static_cast<int>(std::lower_bound(leaders_.begin(), leaders_.end(), my_leader) - leaders_.begin())
                      : -1;
  DT_CHECK_MPI(MPI_Comm_split(world_, is_leader() ? 0 : MPI_UNDEFINED, rank_, &leaders_comm_));

  // 5. Ranks sharing this machine's cores, servers included (emulated nodes on one
  // kernel included: their ranks compete for the same cores).
  ranks_on_host_ = ranks_on_kernel(world_);
}

Topology::~Topology() {
  free_comm(leaders_comm_);
  free_comm(node_comm_);
  free_comm(workers_);
  free_comm(world_);
}

std::string Topology::describe() const {
  std::ostringstream os;
  os << size_ << (size_ == 1 ? " rank: " : " ranks: ") << num_workers_ << (num_workers_ == 1 ? " worker" : " workers")
     << " in " << num_nodes_ << (num_nodes_ == 1 ? " node" : " nodes") << " of ";
  auto [lo, hi] = std::minmax_element(node_sizes_.begin(), node_sizes_.end());
  if (lo == node_sizes_.end()) os << 0;
  else if (*lo == *hi) os << *lo;
  else os << *lo << "–" << *hi;
  os << ", " << num_servers_ << (num_servers_ == 1 ? " server" : " servers");
  return os.str();
}

void check_launcher(int world_size) {
  // Under mpirun (e.g. `salloc -n 8` then `mpirun -np 4`) the allocation's task
  // count need not match: mpirun, not srun, made the world.
  if (settings::started_by_mpirun()) return;
  auto n = settings::slurm_ntasks();
  if (!n || *n == world_size) return;
  DT_USAGE("SLURM_NTASKS=", *n, " but MPI reports a world of ", world_size, world_size == 1 ? " rank" : " ranks",
           ": the tasks did not join one ", *n, "-rank MPI job (srun with a PMI plugin that does not match this "
           "MPI build starts ", *n, " singletons of 1 rank each). Run with `srun --mpi=pmix` (or pmi2; "
           "`srun --mpi=list` shows the choices) or launch with mpirun inside the allocation");
}

}  // namespace dtrain::comm
