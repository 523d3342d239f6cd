// comm/nccl_reducer.cpp — NcclReducer (nccl_reducer.hpp): communicator set-up
// over the node's MPI communicator, the collectives, and the polling wait that
// turns NCCL's asynchronous errors and hangs into an Error.
#include "comm/nccl_reducer.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "comm/wait.hpp"  // LiveTimer
#include "core/error.hpp"

namespace dtrain::comm {

NcclReducer::NcclReducer(MPI_Comm node_comm, int device, double timeout_s)
    : device_(device), timeout_s_(timeout_s) {
  DT_CHECK_MPI(MPI_Comm_rank(node_comm, &rank_));
  DT_CHECK_MPI(MPI_Comm_size(node_comm, &size_));
  ncclUniqueId id{};
  if (rank_ == 0) DT_CHECK_NCCL(ncclGetUniqueId(&id));
  DT_CHECK_MPI(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, node_comm));
  DT_CHECK_CUDA(cudaSetDevice(device_));
  cudaStream_t s = nullptr;
  DT_CHECK_CUDA(cudaStreamCreate(&s));  // blocking: ordered with the legacy default stream
  stream_ = s;
  ncclComm_t c = nullptr;
  DT_CHECK_NCCL(ncclCommInitRank(&c, size_, id, rank_));
  comm_ = c;
}

NcclReducer::~NcclReducer() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclReducer::abort_comm() {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclReducer::wait(const char* what) {
  // Not counting a time this process was stopped (a whole job suspended, LiveTimer).
  LiveTimer waited_for(timeout_s_ / 2);
  waited_for.start(std::chrono::steady_clock::now());
  for (;;) {
    const cudaError_t q = cudaStreamQuery(stream_);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) {
      abort_comm();
      DT_FAIL("NCCL ", what, ": CUDA error while waiting: ", cudaGetErrorString(q));
    }
    ncclResult_t async = ncclSuccess;
    DT_CHECK_NCCL(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      const char* l = ncclGetLastError(comm_);
      const std::string last = l != nullptr ? l : "";
      abort_comm();
      DT_FAIL("NCCL ", what, " failed asynchronously (local rank ", rank_, " of ", size_, "): ",
              ncclGetErrorString(async), last.empty() ? "" : " — ", last);
    }
    if (waited_for.elapsed(std::chrono::steady_clock::now()) > timeout_s_) {
      abort_comm();
      DT_FAIL("NCCL ", what, " did not finish within ", timeout_s_, " s (local rank ", rank_, " of ",
              size_, "): a peer is gone or stuck; communicator aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Every operation may come from another thread than the constructor's (the
// exchange's communication thread): the device is per thread in CUDA.
void NcclReducer::ready() {
  DT_CHECK(comm_ != nullptr, "NCCL communicator was aborted");
  DT_CHECK_CUDA(cudaSetDevice(device_));
}

void NcclReducer::reduce_to_leader(float* buf, size_t count) {
  ready();
  DT_CHECK_NCCL(ncclReduce(buf, buf, count, ncclFloat, ncclSum, 0, comm_, stream_));
  wait("reduce to leader");
}

void NcclReducer::broadcast_from_leader(float* buf, size_t count) {
  ready();
  DT_CHECK_NCCL(ncclBroadcast(buf, buf, count, ncclFloat, 0, comm_, stream_));
  wait("broadcast from leader");
}

void NcclReducer::allreduce(float* buf, size_t count) {
  ready();
  DT_CHECK_NCCL(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm_, stream_));
  wait("allreduce");
}

void NcclReducer::reduce_scatter(const float* send, float* recv, size_t recv_count) {
  ready();
  DT_CHECK_NCCL(ncclReduceScatter(send, recv, recv_count, ncclFloat, ncclSum, comm_, stream_));
  wait("reduce-scatter");
}

void NcclReducer::all_gather(const float* send, float* recv, size_t send_count) {
  ready();
  DT_CHECK_NCCL(ncclAllGather(send, recv, send_count, ncclFloat, comm_, stream_));
  wait("all-gather");
}

}  // namespace dtrain::comm
