// tests/mpi_main.cpp — Catch2 main for the MPI tests (after LBANN's
// MPICatchMain): MPI is initialised once; every rank runs every test case;
// rank 0 reports on stdout, other ranks write to a private file that is
// printed only when that rank failed; the exit code is non-zero on every rank
// when any rank failed. As in tests/catch_main.cpp, a test case that asserts
// nothing fails (on the rank where it asserted nothing), and so does a filter
// that matches no case. A world of one rank is refused: there every
// "identical on every rank", "disjoint shards" or "sum over workers" claim holds
// trivially, so the binary must run under mpiexec -n N with N >= 2.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "core/error.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dtrain::set_error_rank(rank);

  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  auto& cfg = session.configData();
  cfg.warnings = static_cast<Catch::WarnAbout::What>(cfg.warnings | Catch::WarnAbout::NoAssertions |
                                                     Catch::WarnAbout::NoTests);
  const bool listing = cfg.listTests || cfg.listTestNamesOnly || cfg.listTags || cfg.listReporters || cfg.showHelp;
  if (rc == 0 && size < 2 && !listing) {
    std::fprintf(stderr, "dtrain_mpi_tests: a world of %d rank checks nothing across ranks; "
                         "run under mpiexec -n N with N >= 2\n", size);
    MPI_Finalize();
    return 1;
  }
  std::string out;
  if (rc == 0 && rank != 0) {
    out = "/tmp/dtrain_mpi_tests." + std::to_string(::getpid()) + ".rank" + std::to_string(rank);
    session.configData().outputFilename = out;
  }
  int failed = rc != 0 ? 1 : session.run();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!out.empty()) {
    if (failed) {
      std::ifstream in(out);
      std::cerr << "---- rank " << rank << " of " << size << " failed:\n" << in.rdbuf() << std::flush;
    }
    std::remove(out.c_str());
  }
  if (rank == 0) std::printf("MPI tests on %d ranks: %s\n", size, any_failed ? "FAILED" : "passed");
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
