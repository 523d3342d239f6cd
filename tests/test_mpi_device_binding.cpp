// tests/test_mpi_device_binding.cpp — comm::check_device_binding on the CPU:
// the all-gather and duplicate check run without a GPU, with made-up device keys
// (the GPU side, layers::cuda_device_key, is covered by the [cuda] tests).
#include <mpi.h>

#include <catch2/catch.hpp>
#include <string>

#include "comm/device_binding.hpp"
#include "core/error.hpp"

namespace dtrain::comm {

TEST_CASE("device binding: distinct GPUs pass, a shared GPU names both ranks", "[mpi][device]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK_NOTHROW(check_device_binding(MPI_COMM_WORLD, rank, "GPU-fake-" + std::to_string(rank)));
  REQUIRE(size >= 2);  // a shared GPU needs two ranks (tests/mpi_main.cpp refuses a 1-rank world too)
  // the last rank lands on rank 0's GPU
  const int dev = rank == size - 1 ? 0 : rank;
  try {
    check_device_binding(MPI_COMM_WORLD, dev, "GPU-fake-" + std::to_string(dev));
    FAIL("a shared GPU was accepted");
  } catch (const UsageError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("ranks 0 (local rank 0, device 0) and " + std::to_string(size - 1)) !=
          std::string::npos);
    CHECK(m.find("GPU-fake-0") != std::string::npos);
  }
}

}  // namespace dtrain::comm
