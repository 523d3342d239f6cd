// tests/cuda_main.cpp — main of dtrain_cuda_tests, the [cuda] Catch2 cases.
//
// Without a CUDA device it runs nothing and exits 77 with "no CUDA device: N
// tests skipped"; ctest registers the binary with SKIP_RETURN_CODE 77, so the
// cases are listed as skipped, never as passed (Catch2 v2 has no SKIP).
// With a device, MPI is initialised once (the NCCL and device-binding cases
// use MPI_COMM_WORLD; ctest runs it plain and under mpiexec -n 2, tests/cuda.cmake),
// every rank runs the cases, and the exit code is non-zero on every rank when
// any rank failed.
// As in tests/catch_main.cpp, a case that asserts nothing fails; a part that
// cannot run here (too few GPUs for the ranks, one rank where a sum needs
// several) is declared with DT_CUDA_SKIPPED_PART (tests/cuda_test_util.hpp):
// a WARN, and a count printed at the end as "SKIPPED-PART: N".
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "core/error.hpp"
#include "layers/cuda/cuda_backend.hpp"
#include "tests/cuda_test_util.hpp"

int main(int argc, char** argv) {
  const int devices = dtrain::layers::cuda_device_count();
  if (devices == 0) {
    const size_t n = Catch::getRegistryHub().getTestCaseRegistry().getAllTests().size();
    std::printf("no CUDA device: %zu tests skipped\n", n);
    return 77;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  dtrain::set_error_rank(rank);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::printf("rank %d: %d CUDA device(s) visible\n", rank, devices);
  if (rank == 0 && size > devices)
    std::printf("%d ranks on %d GPU(s): the cases that need one GPU per rank (nccl collectives, the nccl "
                "intra-node reducer, the allreduce layout of the CUDA-arena exchange) are not run; the "
                "binding check must refuse two ranks on one GPU\n", size, devices);
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  auto& cfg = session.configData();
  cfg.warnings = static_cast<Catch::WarnAbout::What>(cfg.warnings | Catch::WarnAbout::NoAssertions |
                                                     Catch::WarnAbout::NoTests);
  int failed = rc != 0 ? 1 : (session.run() != 0 ? 1 : 0);
  const int skipped = dtrain::layers::test::skipped_parts();
  if (skipped > 0)
    std::printf("rank %d: SKIPPED-PART: %d part(s) of the [cuda] cases did not run here (warnings above)\n", rank,
                skipped);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
