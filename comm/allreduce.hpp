// comm/allreduce.hpp — the workers' deterministic allreduce (sum of a float
// range over a communicator, in place), its algorithm picked by message size
// as NCCL and MPI libraries pick theirs (internal to comm/, but for
// time_allreduce_algorithms at the end, which `dtrain bench comm
// --algorithms` prints):
//
//   recursive doubling   count·4 ≤ latency_max_bytes(n): ⌈log2 n⌉ exchanges of
//                        the whole range (+ 2 when n is not a power of two),
//                        few messages — the latency algorithm (allreduce.cpp)
//   ring                 above: 2(n−1) messages of range/n each, pipelined —
//                        the bandwidth algorithm (ring_allreduce.hpp)
//
// Both are deterministic with a fixed order of addition for a given
// (n, count), and every rank ends with identical bits. Their orders differ
// (IEEE addition is not associative), so the choice is a pure function of
// (n, count) — a table, never a timing — and every rank of a communicator
// picks the same algorithm for the same call. Sums of one range by the two
// algorithms agree to rounding.
//
// The crossover (latency_max_bytes, bytes per call), measured with
// `mpirun -np N build/dtrain bench comm --algorithms` (N = 2 --bind-to core;
// 3, 4, 5 --oversubscribe) on this project's 2-core development VM, Open MPI
// 4.1.4 over shared memory (vader, CMA single copy), the algorithms
// interleaved call by call, medians of 100–200 calls, idle machine
// (bench/README.md, "Exchange", has the tables). Recursive doubling was
// faster in every run up to 64 KiB (at 64 KiB, µs, recursive doubling / ring:
// n = 2  10.7–12.1 / 13.0–13.4, n = 3  36–44 / 51–56, n = 4  49–74 / 74–102,
// n = 5  85–151 / 129–172); at 128 KiB neither won consistently (within 5%
// in 8 of 11 runs), and from 256 KiB the ring won in all runs but one (n = 2:
// 2 stages of half the bucket, pipelined):  n = 2 … 5 → 64 KiB.
// Not measured above 5 ranks; on a network the per-message latency is larger,
// which moves the crossover up (NCCL and Open MPI switch from their latency
// algorithms at tens to hundreds of KiB on InfiniBand): re-measure on a
// cluster with `--algorithms` before changing the table.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "comm/discovery.hpp"
#include "comm/ring_allreduce.hpp"

namespace dtrain::comm::detail {

// The largest call (bytes) that recursive doubling runs over n ranks; the
// ring runs anything larger. From the table above.
size_t latency_max_bytes(int ranks);

// Recursive doubling's piece: 1000 floats = 4000 bytes, so a piece and its
// match header stay below OpenMPI's shared-memory eager limit (vader: 4 KiB
// including the header; openib's and UCX's are larger) and travel without a
// rendezvous; a 4 KiB call as one message took 5.9 µs, as two pieces 2.3 µs
// (2 ranks, same run).
inline constexpr size_t kLatencyPieceFloats = 1000;

enum class AllreduceAlgo { recursive_doubling, ring };
const char* algo_name(AllreduceAlgo a);

// Recursive doubling with the non-power-of-two fold (Thakur, Rabenseifner &
// Gropp 2005, §4.1): n ranks, p = the largest power of two ≤ n, r = n − p.
//   fold     ranks 2i and 2i+1, i < r: 2i sends x to 2i+1, which keeps
//            x_{2i} + x_{2i+1}; 2i then sits out. The p ranks left get
//            virtual ranks v (2i+1 → i, and rank q ≥ 2r → q − r).
//   doubling for d = 1, 2, 4 … < p: v exchanges its whole x with v xor d,
//            and both keep x_lower + x_higher (the lower virtual rank's
//            operand first: one fixed order per pair, the same on both).
//   unfold   2i+1 sends the result to 2i.
// The sum is a balanced tree over the folded pairs, fixed for a given n;
// both partners of every exchange compute the same expression, so every rank
// ends with identical bits. Transfers are cut into max_chunk pieces (chunked.hpp).
class RecursiveDoubling {
 public:
  // Duplicates comm (collective). Every transfer is cut into pieces of at
  // most min(piece, max_chunk) floats, nearly equal, so that small ones stay
  // below the transport's eager limit (kLatencyPieceFloats).
  RecursiveDoubling(MPI_Comm comm, size_t max_chunk, size_t piece = kLatencyPieceFloats);
  void allreduce(float* x, size_t count);  // collective; scratch grows to the largest count

 private:
  void cut(size_t count);
  void send(const float* x, size_t count, int peer, int tag);
  void recv(float* x, size_t count, int peer, int tag);
  void exchange(float* x, size_t count, int peer, int tag, bool send_too, bool x_first);

  Comm dup_;  // this protocol's duplicate of the communicator
  const MPI_Comm comm_;
  const int rank_, size_;
  size_t piece_;
  std::vector<float> tmp_;
  std::vector<size_t> bounds_;  // the pieces of the current transfer
  std::vector<MPI_Request> reqs_;
};

// The choice between the two, over one communicator.
class Allreduce {
 public:
  // Collective over comm. latency_max_bytes: the crossover; the default
  // (SIZE_MAX) takes the table's value for comm's size (tests pass their own).
  Allreduce(MPI_Comm comm, size_t max_chunk, size_t latency_max = SIZE_MAX);
  AllreduceAlgo algorithm(size_t count) const {
    return count * sizeof(float) <= latency_max_ ? AllreduceAlgo::recursive_doubling : AllreduceAlgo::ring;
  }
  // x[0, count) ← Σ over the ranks, identical bits on every rank.
  void allreduce(float* x, size_t count);
  size_t latency_max() const { return latency_max_; }  // bytes

 private:
  size_t latency_max_;
  RecursiveDoubling rd_;
  RingAllreduce ring_;
};

}  // namespace dtrain::comm::detail

namespace dtrain::comm {

// MPI_Allreduce, recursive doubling and the ring on `c`, interleaved call by
// call (one warm-up round, then `iters` rounds): the median seconds of one
// in-place sum of `count` floats, each call timed on the slowest rank.
// Collective over `c`; the same figures on every rank.
struct AllreduceTimes {
  double mpi = 0, recursive_doubling = 0, ring = 0;
  bool picks_recursive_doubling = false;  // the table's choice for this count on c
};
AllreduceTimes time_allreduce_algorithms(MPI_Comm c, size_t count, int iters);

}  // namespace dtrain::comm
