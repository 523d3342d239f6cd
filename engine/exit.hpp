// engine/exit.hpp — how a dtrain process ends when something failed: one
// message, the right exit code, no rank left behind (DESIGN.md §5 "Errors").
//
// The protocol, stated once (it is implemented in engine/exit.cpp):
//  * Usage errors (UsageError, exit code 2) are normally detected identically
//    by every rank, before any work: the same job file, the same checks. A rank
//    that catches one joins the *exit agreement*: a non-blocking MPI_MIN
//    allreduce of its world rank on a private duplicate of MPI_COMM_WORLD that
//    only failing ranks ever join. It completes only if every rank joined, i.e.
//    every rank failed: then the lowest rank prints its message (once for the
//    job) and every rank calls MPI_Finalize and exits 2 — no MPI_Abort, so no
//    abort banner. If it has not completed after `agreement_timeout_s` (a usage
//    error on some ranks only, e.g. one node's disk), the rank prints its own
//    message naming its rank and host, and calls MPI_Abort(2).
//  * Any other failure (a runtime Error or another exception) is printed at
//    once by the rank that had it, naming rank and host; stdout and stderr are
//    flushed and, after a short pause that lets mpirun forward the message
//    ahead of its own abort banner, MPI_Abort(1) ends every rank. A
//    SharedError (a failure every worker meets in the same step: a diverged
//    loss) is printed at once by rank 0 only; another rank waits
//    kSharedErrorGraceS first, and is ended by rank 0's abort meanwhile.
//  * Outside MPI, or in a 1-rank world: print, return the code.
#pragma once

#include <mpi.h>

#include <exception>
#include <functional>

namespace dtrain::engine {

// After MPI_Init (collective: duplicates `world` for the exit agreement).
void exit_init(MPI_Comm world);

// Call from a catch block with the caught exception. Prints what the protocol
// above says and returns the exit code; may not return (MPI_Abort).
// Before exit_init (no MPI): prints and returns.
int exit_on_error(std::exception_ptr e, double agreement_timeout_s = 10.0);

// A usage check that only rank 0 can make (its outputs): runs `check` on rank 0
// and broadcasts the outcome over `comm` (collective), so that a UsageError is
// thrown on every rank, with rank 0's message, and the exit agreement prints
// it once. Other exceptions of `check` propagate on rank 0 only.
void rank0_usage_check(MPI_Comm comm, const std::function<void()>& check);

// After exit_on_error returned under MPI: MPI_Finalize unless it aborted.
void exit_finalize();

}  // namespace dtrain::engine
