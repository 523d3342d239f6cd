// comm/intra_node.cpp — the MPI intra-node reducer, the NCCL adapter, and the
// ordered choice between them (intra_node.hpp).
//
// MPI reduce_to_leader protocol (node_comm duplicate, one tag): every member
// sends its buffer in chunks to local rank 0; the leader receives member m's
// chunks into a scratch buffer and adds them in m order after its own values.
// broadcast_from_leader: chunked MPI_Bcast from local rank 0.
#include "comm/intra_node.hpp"

#include <algorithm>
#include <vector>

#include "comm/chunked.hpp"
#include "comm/allreduce.hpp"
#include "core/error.hpp"
#ifdef DTRAIN_HAVE_NCCL
#include "comm/nccl_reducer.hpp"
#endif

namespace dtrain::comm {

namespace {

constexpr int kTagReduce = 7;

class MpiReducer final : public IntraNodeReducer {
 public:
  MpiReducer(MPI_Comm node, size_t max_chunk, size_t latency_max, bool on_device)
      : chunk_(detail::clamp_chunk(max_chunk)), on_device_(on_device) {
    DT_CHECK_MPI(MPI_Comm_dup(node, &comm_));
    DT_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
    DT_CHECK_MPI(MPI_Comm_size(comm_, &size_));
    allreduce_ = std::make_unique<detail::Allreduce>(comm_, chunk_, latency_max);
  }
  ~MpiReducer() override {
    allreduce_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  const char* name() const override { return "mpi"; }
  bool on_device() const override { return on_device_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void reduce_to_leader(float* buf, size_t count) override {
    if (size_ == 1 || count == 0) return;
    std::vector<MPI_Request> reqs;
    if (rank_ != 0) {
      detail::isend_chunked(buf, count, 0, kTagReduce, comm_, chunk_, reqs);
      detail::wait_all(reqs);
      return;
    }
    if (scratch_.size() < count) scratch_.resize(count);
    for (int m = 1; m < size_; ++m) {
      detail::irecv_chunked(scratch_.data(), count, m, kTagReduce, comm_, chunk_, reqs);
      detail::wait_all(reqs);
      for (size_t e = 0; e < count; ++e) buf[e] += scratch_[e];
    }
  }

  void broadcast_from_leader(float* buf, size_t count) override {
    if (size_ == 1) return;
    for (size_t off = 0; off < count; off += chunk_) {
      const int n = static_cast<int>(std::min(chunk_, count - off));
      DT_CHECK_MPI(MPI_Bcast(buf + off, n, MPI_FLOAT, 0, comm_));
    }
  }

  void allreduce(float* buf, size_t count) override {
    if (size_ == 1 || count == 0) return;
    allreduce_->allreduce(buf, count);
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  size_t chunk_;
  bool on_device_;
  std::vector<float> scratch_;
  std::unique_ptr<detail::Allreduce> allreduce_;
};

#ifdef DTRAIN_HAVE_NCCL
class NcclAdapter final : public IntraNodeReducer {
 public:
  NcclAdapter(MPI_Comm node, int device, double timeout_s) : r_(node, device, timeout_s > 0 ? timeout_s : 1e30) {}
  const char* name() const override { return "nccl"; }
  bool on_device() const override { return true; }
  int rank() const override { return r_.rank(); }
  int size() const override { return r_.size(); }
  void reduce_to_leader(float* buf, size_t count) override {
    if (count > 0) r_.reduce_to_leader(buf, count);
  }
  void broadcast_from_leader(float* buf, size_t count) override {
    if (count > 0) r_.broadcast_from_leader(buf, count);
  }
  void allreduce(float* buf, size_t count) override {
    if (count > 0) r_.allreduce(buf, count);
  }

 private:
  NcclReducer r_;
};
#endif

}  // namespace

bool nccl_available() {
#ifdef DTRAIN_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<IntraNodeReducer> make_intra_node_reducer(const IntraNodeOptions& o) {
  DT_CHECK(o.node_comm != MPI_COMM_NULL, "intra-node reducer without a node communicator");
  const bool nccl_applies = nccl_available() && o.cuda_device >= 0;
  const std::string& p = o.prefer;
  if (p != "auto" && p != "nccl" && p != "mpi")
    DT_USAGE("intra-node reducer '", p, "': expected auto, nccl or mpi");
  if (p == "nccl" && !nccl_applies)
    DT_USAGE("intra-node reducer 'nccl' does not apply: ",
             nccl_available() ? "the arena is not on a CUDA GPU" : "this build has no NCCL",
             " (the mpi reducer does)");
  if (nccl_applies && p != "mpi") {
#ifdef DTRAIN_HAVE_NCCL
    return std::make_unique<NcclAdapter>(o.node_comm, o.cuda_device, o.timeout_s);
#endif
  }
  // MPI works in place on the arena only when MPI may touch that memory.
  const bool in_place = o.cuda_device < 0 && o.device_host_addressable;
  return std::make_unique<MpiReducer>(o.node_comm, o.max_chunk, o.latency_max_bytes, in_place);
}

}  // namespace dtrain::comm
