// tests/test_cuda_net.cpp — [cuda] cases across ranks: device binding and the
// NCCL reducer over MPI_COMM_WORLD (run plain: one rank; under mpiexec -n G
// with G GPUs: a real node reduction; with more ranks than GPUs the binding
// check must refuse, naming both ranks, and the NCCL case is not run).
// A whole training step of lenet5/resnet20 on CUDA against the reference is in
// the backend table (tests/backend_ops.cpp).
#include <mpi.h>

#include <cstdint>
#include <string>

#include "comm/device_binding.hpp"
#include "tests/cuda_test_util.hpp"
#ifdef DTRAIN_HAVE_NCCL
#include "comm/nccl_reducer.hpp"
#endif

namespace dtrain::layers::test {
namespace {

TEST_CASE("cuda: device binding (local rank mod devices; duplicate GPUs refused)", "[cuda]") {
  const int count = cuda_device_count();
  for (int r = 0; r < 2 * count + 1; ++r) CHECK(cuda_device_for_local_rank(r) == r % count);
  CHECK(cuda_device_key(0).rfind("GPU-", 0) == 0);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int dev = cuda_device_for_local_rank(rank);
  if (size <= count) {
    CHECK_NOTHROW(comm::check_device_binding(MPI_COMM_WORLD, dev, cuda_device_key(dev)));
    DT_CUDA_SKIPPED_PART("the refusal of a shared GPU needs more ranks (" << size << ") than GPUs (" << count
                         << "): run under mpiexec -n " << count + 1
                         << " (the check itself runs with made-up keys in test_mpi_device_binding)");
  } else {
    try {
      comm::check_device_binding(MPI_COMM_WORLD, dev, cuda_device_key(dev));
      FAIL("two ranks on one GPU were accepted");
    } catch (const UsageError& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("ranks 0 (local rank 0") != std::string::npos);
      CHECK(m.find("same GPU") != std::string::npos);
    }
  }
}

#ifdef DTRAIN_HAVE_NCCL
TEST_CASE("nccl: reduce to leader, broadcast, allreduce, reduce-scatter, all-gather", "[cuda][nccl]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > cuda_device_count()) {
    DT_CUDA_SKIPPED_PART("more ranks (" << size << ") than GPUs (" << cuda_device_count()
                                        << "): the NCCL case needs one GPU per rank; not run");
    return;
  }
  // One rank: its sums and broadcast are copies, which a no-op would pass too;
  // reduce-scatter and all-gather still move data between buffers.
  if (size == 1)
    DT_CUDA_SKIPPED_PART("1 rank: NCCL's allreduce, reduce and broadcast over one rank are copies, "
                         "their sums are not checked; run under mpiexec -n G with G >= 2 GPUs");
  const int dev = cuda_device_for_local_rank(rank);
  CudaOptions o = quiet_options();
  o.device = dev;
  Both b(o);
  comm::NcclReducer red(MPI_COMM_WORLD, dev, 60.0);
  REQUIRE(red.size() == size);
  const size_t n = 1000;
  const float tri = float(size * (size + 1) / 2);  // Σ (r + 1)
  float* buf = b.zeros(n);
  b.gpu->fill(buf, n, float(rank + 1));
  red.allreduce(buf, n);
  CHECK(b.down(buf, n) == Vec(n, tri));
  b.gpu->fill(buf, n, float(rank + 1));
  red.reduce_to_leader(buf, n);
  if (rank == 0) CHECK(b.down(buf, n) == Vec(n, tri));
  if (rank == 0) b.gpu->fill(buf, n, 42.0f);
  red.broadcast_from_leader(buf, n);
  CHECK(b.down(buf, n) == Vec(n, 42.0f));
  float* all = b.zeros(n * size_t(size));
  b.gpu->fill(all, n * size_t(size), float(rank + 1));
  float* mine = b.zeros(n);
  red.reduce_scatter(all, mine, n);
  CHECK(b.down(mine, n) == Vec(n, tri));
  b.gpu->fill(mine, n, float(rank));
  red.all_gather(mine, all, n);
  const Vec got = b.down(all, n * size_t(size));
  for (int r = 0; r < size; ++r) CHECK(got[size_t(r) * n] == float(r));
}
#endif

}  // namespace
}  // namespace dtrain::layers::test
