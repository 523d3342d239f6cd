// engine/timeline.hpp — `--timeline FILE`: every rank's events of the first
// --timeline-steps steps of a run, in one Chrome-trace / Perfetto JSON file
// (the Trace Event Format; docs/timeline.md says how to open it and what each
// event means). Like Horovod's timeline and BytePS's trace.
//
// Recording (core/timeline.hpp): one preallocated Buffer per thread that
// records — a worker's main thread (step, loader wait, forward, backward,
// exchange wait, update, checkpoint) and its exchange thread (bucket
// allreduces, slice pushes and pulls, the hybrid leader's node traffic); a
// server's serving thread (receives, aggregation, the joint check, updates,
// sends, per slice). The window is steps [first_step, first_step + steps):
// the first steps this run trains (from the resume point on a resumed run).
// Events past a buffer's capacity are counted ("dropped" in the file), never
// allocated.
//
// Clocks: each rank's steady clock is mapped onto rank 0's. At construction
// and again in write(), rank 0 and every other rank in turn exchange
// kPings round trips over MPI (so ranks on other hosts and in other network
// namespaces are aligned alike); the round trip with the smallest time gives
// offset = t_rank0 − (t_send + t_recv) / 2, exact to within half that round
// trip (the reply's time lies between the send and the receive). Between the
// two measurements the offset is interpolated linearly (clock drift). The
// file states the bound: "otherData": {"clock_alignment_error_us": max over
// ranks of half the best round trip}, per rank in its process's args. On one
// machine it is a few µs; across a network, half its round-trip latency.
//
// Writing: write() is collective over the world; rank 0 receives one rank's
// events at a time (point to point: memory for one rank, no int-count limit of
// a Gatherv over all ranks) and streams the JSON into PATH.tmp.<pid> next to
// PATH, fsyncs it and renames it over PATH (atomic: a reader never sees a
// partial file).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "comm/topology.hpp"
#include "core/timeline.hpp"

namespace dtrain::engine {

// Events one buffer may need per step: a worker's main thread records ~7, its
// exchange thread a few per slice or bucket and peer, a server a few per slice
// and sender. parts: slices + buckets (an upper bound); peers: the most peers
// one rank talks to per part.
size_t timeline_events_per_step(size_t parts, int peers);

class Timeline {
 public:
  inline static constexpr int kPings = 20;
  inline static constexpr size_t kMaxEventsPerBuffer = size_t{1} << 21;  // 96 MiB

  // Collective over topo.world() (the first clock measurement). Buffers of
  // min(steps · per_step, kMaxEventsPerBuffer) events: two on a worker, one
  // on a server.
  Timeline(const comm::Topology& topo, int64_t first_step, int64_t steps, size_t per_step);
  ~Timeline();

  // The main thread's buffer (a server's serve() records into it too).
  timeline::Buffer* main() { return main_.get(); }
  // A worker's exchange thread; null on a server.
  timeline::Buffer* exchange() { return exchange_.get(); }

  // Collective over the world, after every recording thread is done: rank 0
  // writes `path` (ignored elsewhere). Throws Error when the file cannot be written.
  void write(const std::string& path);

  // > 0: the run's --compute-stand-in-ms, written into otherData
  // ("compute_stand_in_ms", with a note that the compute spans are the stand-in's).
  double compute_stand_in_ms = 0;

 private:
  struct Sync {
    int64_t local_ns = 0;   // this rank's clock at the measurement
    int64_t offset_ns = 0;  // rank 0's clock − this rank's clock
    int64_t rtt_ns = 0;     // the best round trip (rank 0: 0)
  };
  Sync sync();  // collective over comm_

  const comm::Topology& topo_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int64_t first_step_, steps_;
  std::unique_ptr<timeline::Buffer> main_, exchange_;
  Sync start_;
};

}  // namespace dtrain::engine
