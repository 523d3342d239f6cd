// comm/discovery.cpp — node discovery and the ping-pong (discovery.hpp).
#include "comm/discovery.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/median.hpp"

namespace dtrain::comm {

Comm::~Comm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && c_ != MPI_COMM_NULL) MPI_Comm_free(&c_);
}

Comm& Comm::operator=(Comm&& o) noexcept {
  if (this != &o) {
    Comm gone(c_);
    c_ = o.release();
  }
  return *this;
}

int Comm::rank() const {
  int r = 0;
  DT_CHECK_MPI(MPI_Comm_rank(c_, &r));
  return r;
}

int Comm::size() const {
  int s = 0;
  DT_CHECK_MPI(MPI_Comm_size(c_, &s));
  return s;
}

Comm duplicate(MPI_Comm c) {
  MPI_Comm d = MPI_COMM_NULL;
  DT_CHECK_MPI(MPI_Comm_dup(c, &d));
  return Comm(d);
}

Comm split_host(MPI_Comm c) {
  MPI_Comm host = MPI_COMM_NULL;
  DT_CHECK_MPI(MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  return Comm(host);
}

namespace {

// Each rank's node leader (the lowest world rank on its node), on every rank.
std::vector<int> node_leaders(MPI_Comm world, int ranks_per_node) {
  int rank = 0, size = 1;
  DT_CHECK_MPI(MPI_Comm_rank(world, &rank));
  DT_CHECK_MPI(MPI_Comm_size(world, &size));
  std::vector<int> leaders(static_cast<size_t>(size));
  if (ranks_per_node > 0) {
    for (int r = 0; r < size; ++r) leaders[static_cast<size_t>(r)] = r / ranks_per_node * ranks_per_node;
    return leaders;
  }
  int leader = rank;
  {
    const Comm shared = split_host(world);
    DT_CHECK_MPI(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, shared.get()));
  }
  DT_CHECK_MPI(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world));
  return leaders;
}

}  // namespace

int ranks_on_kernel(MPI_Comm c) {
  std::string id;
  {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, id);
  }
  uint64_t mine = id.empty() ? 0 : fnv1a(id.data(), id.size());
  int size = 1;
  DT_CHECK_MPI(MPI_Comm_size(c, &size));
  std::vector<uint64_t> all(static_cast<size_t>(size));
  DT_CHECK_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, c));
  const int host = split_host(c).size();
  if (mine == 0 || std::find(all.begin(), all.end(), uint64_t{0}) != all.end()) return host;
  return std::max(host, static_cast<int>(std::count(all.begin(), all.end(), mine)));
}

int other_node_rank(MPI_Comm world, int ranks_per_node) {
  const std::vector<int> l = node_leaders(world, ranks_per_node);
  for (size_t r = 1; r < l.size(); ++r)
    if (l[r] != l[0]) return static_cast<int>(r);
  return -1;
}

int same_node_rank(MPI_Comm world, int ranks_per_node) {
  const std::vector<int> l = node_leaders(world, ranks_per_node);
  for (size_t r = 1; r < l.size(); ++r)
    if (l[r] == l[0]) return static_cast<int>(r);
  return -1;
}

double pingpong_seconds(MPI_Comm c, int a, int b, size_t bytes, int iters, bool fastest) {
  DT_CHECK(iters >= 1, "ping-pong with ", iters, " iterations");
  int rank = 0;
  DT_CHECK_MPI(MPI_Comm_rank(c, &rank));
  constexpr size_t kPiece = size_t{1} << 30;  // MPI's int count, in bytes
  constexpr int kTag = 11;
  std::vector<char> buf(std::max<size_t>(bytes, 1));
  std::vector<double> t;
  for (int i = 0; i <= iters; ++i) {
    DT_CHECK_MPI(MPI_Barrier(c));
    const double t0 = MPI_Wtime();
    for (size_t off = 0; off < bytes || off == 0; off += kPiece) {  // one empty message for 0 bytes
      const int n = static_cast<int>(std::min(bytes - off, kPiece));
      if (rank == a) {
        DT_CHECK_MPI(MPI_Send(buf.data() + off, n, MPI_BYTE, b, kTag, c));
        DT_CHECK_MPI(MPI_Recv(buf.data() + off, n, MPI_BYTE, b, kTag, c, MPI_STATUS_IGNORE));
      } else if (rank == b) {
        DT_CHECK_MPI(MPI_Recv(buf.data() + off, n, MPI_BYTE, a, kTag, c, MPI_STATUS_IGNORE));
        DT_CHECK_MPI(MPI_Send(buf.data() + off, n, MPI_BYTE, a, kTag, c));
      }
      if (bytes == 0) break;
    }
    double dt = (MPI_Wtime() - t0) / 2;  // one way
    DT_CHECK_MPI(MPI_Bcast(&dt, 1, MPI_DOUBLE, a, c));
    if (i > 0) t.push_back(dt);
  }
  if (fastest) return *std::min_element(t.begin(), t.end());
  return median(t);
}

}  // namespace dtrain::comm
