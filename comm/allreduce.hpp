// comm/allreduce.hpp — the workers' deterministic allreduce (sum of a float
// range over a communicator, in place), its algorithm picked by message size
// as NCCL and MPI libraries pick theirs (internal to comm/, but for
// `dtrain bench comm --algorithms`, which times both):
//
//   recursive doubling   count·4 ≤ latency_max_for(n): ⌈log2 n⌉ exchanges of
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
// The crossover (kLatencyMaxBytes, bytes per call) comes from
// `mpirun -np N build/dtrain bench comm --algorithms` (N = 2 --bind-to core;
// 3, 4, 5 --oversubscribe) on this project's 2-core development VM, Open MPI
// 4.1.4 over shared memory (vader, CMA single copy), the algorithms
// interleaved call by call, medians of 100 calls; bench/README.md,
// "Exchange", has the table. Recursive doubling was faster than the ring up
// to 64 KiB in every case but two, at 3 oversubscribed ranks, where the ring
// was ahead by under 5% (8 KiB: 18.6 vs 18.9 µs; 64 KiB: 61.8 vs 64.7 µs);
// from 128 KiB the ring was faster at every world size. Hence one crossover,
// 64 KiB, for 3 … 5 ranks (2 ranks: below). Not measured above 5 ranks; on a network the per-message
// latency is larger, which moves the crossover up (NCCL and Open MPI switch
// from their latency algorithms at tens to hundreds of KiB on InfiniBand):
// re-measure on a cluster with `--algorithms` before changing it.
//
// Two ranks are the exception (kLatencyMaxBytes2, 16 KiB): on an Emerald
// Rapids Xeon (2026-12-06, np 2, medians of 100 calls, µs, MPI / rec. doubling
// / ring) 32 KiB 14.7 / 15.4 / 11.5 and 64 KiB 22.0 / 26.5 / 16.0 — recursive
// doubling behind MPI_Allreduce, the ring ahead; on the EPYC of the table the
// ring is still ahead of MPI_Allreduce there (32 KiB 10.0 / 9.8, 64 KiB 14.1 /
// 13.5: 1.02–1.04×, where recursive doubling was 1.14–1.54× — the EPYC gives up
// up to 3.3 µs a call at 32 KiB so that the Xeon stops losing 4.5 at 64), and
// with two ranks both algorithms add the same two numbers in each element
// (a + b = b + a), so the switch changes no bits. At 3 and more ranks
// 64 KiB stays: there the ring lost to MPI_Allreduce at 64 KiB on the EPYC
// (np 4 109.8 against 95.0, np 5 169.6 against 153.4) and recursive doubling
// on the Xeon (np 3 59.9 against 47.2, np 4 117.3 against 88.3; its ring 43.9
// and 92.6): no one crossover is ahead on both CPUs at 64 KiB.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/discovery.hpp"
#include "comm/ring_allreduce.hpp"

namespace dtrain::comm::detail {

// The largest call (bytes) that recursive doubling runs; the ring runs
// anything larger. From the measurements above.
inline constexpr size_t kLatencyMaxBytes = size_t{64} << 10;   // 3 and more ranks (and 1)
inline constexpr size_t kLatencyMaxBytes2 = size_t{16} << 10;  // 2 ranks
// The crossover of a communicator of `ranks` ranks, bytes.
inline size_t latency_max_for(int ranks) { return ranks == 2 ? kLatencyMaxBytes2 : kLatencyMaxBytes; }

// Recursive doubling's piece: 1000 floats = 4000 bytes, so a piece and its
// match header stay below Open MPI's shared-memory eager limit (vader: 4 KiB
// including the header; openib's and UCX's are larger) and travel without a
// rendezvous.
inline constexpr size_t kLatencyPieceFloats = 1000;

enum class AllreduceAlgo { recursive_doubling, ring };
const char* algo_name(AllreduceAlgo a);
// The algorithm of a call of `bytes` with the crossover `latency_max` (bytes).
inline AllreduceAlgo algorithm_for(size_t bytes, size_t latency_max) {
  return bytes <= latency_max ? AllreduceAlgo::recursive_doubling : AllreduceAlgo::ring;
}

// Recursive doubling with the non-power-of-two fold (Thakur, Rabenseifner &
// Gropp 2005, §4.1): n ranks, p = the largest power of two ≤ n, r = n − p.
//   fold     ranks 2i and 2i+1, i < r: 2i sends x to 2i+1, which keeps
//            x_{2i} + x_{2i+1}; 2i then sits out. The p ranks left get
//            virtual ranks v (2i+1 → i, and rank q ≥ 2r → q − r).
//   doubling for d = 1, 2, 4 … < p: v exchanges its whole x with v xor d,
//            and both keep x + x_partner (IEEE addition is commutative:
//            the same bits on both partners).
//   unfold   2i+1 sends the result to 2i.
// The sum is a balanced tree over the folded pairs, fixed for a given n;
// both partners of every exchange compute the same expression, so every rank
// ends with identical bits. Transfers are cut into pieces (chunked.hpp).
class RecursiveDoubling {
 public:
  // Duplicates comm (collective). Every transfer is cut into pieces of
  // min(piece, max_chunk) floats, so that they stay below the transport's
  // eager limit (kLatencyPieceFloats).
  RecursiveDoubling(MPI_Comm comm, size_t max_chunk, size_t piece = kLatencyPieceFloats);
  void allreduce(float* x, size_t count);  // collective; scratch grows to the largest count
  int size() const { return size_; }        // ranks of the communicator

 private:
  void exchange(float* x, size_t count, int peer, int tag, bool send_too);

  Comm dup_;  // this protocol's duplicate of the communicator
  const MPI_Comm comm_;
  const int rank_, size_;
  size_t piece_;
  std::vector<float> tmp_;
  std::vector<MPI_Request> reqs_;
};

// The choice between the two, over one communicator.
class Allreduce {
 public:
  // Collective over comm. latency_max: the crossover, bytes; SIZE_MAX:
  // latency_max_for(the communicator's size) (tests pass their own,
  // through ExchangeOptions).
  Allreduce(MPI_Comm comm, size_t max_chunk, size_t latency_max = SIZE_MAX);
  AllreduceAlgo algorithm(size_t count) const { return algorithm_for(count * sizeof(float), latency_max_); }
  // x[0, count) ← Σ over the ranks, identical bits on every rank.
  void allreduce(float* x, size_t count);
  size_t latency_max() const { return latency_max_; }  // bytes

 private:
  RecursiveDoubling rd_;
  RingAllreduce ring_;
  size_t latency_max_;  // after rd_: initialised from its size
};

}  // namespace dtrain::comm::detail
