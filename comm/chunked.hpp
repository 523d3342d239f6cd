// comm/chunked.hpp — point-to-point transfers of float ranges cut into chunks
// (internal to comm/).
//
// Every transfer of `count` floats is posted as ⌈count / max_chunk⌉ messages
// of at most max_chunk elements (max_chunk ≤ INT_MAX, so MPI's int counts
// never overflow; offsets are size_t). All chunks of one range share a tag:
// MPI's non-overtaking rule matches them in order, so sender and receiver only
// have to agree on (peer, tag, count, max_chunk). A zero count posts nothing.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <vector>

#include "comm/wait.hpp"
#include "core/error.hpp"

namespace dtrain::comm::detail {

// The chunk limit actually used: the option clamped to MPI's int count.
inline size_t clamp_chunk(size_t max_chunk) {
  if (max_chunk == 0) DT_USAGE("the message chunk limit (max_chunk_elems) must be at least 1 element");
  return std::min(max_chunk, static_cast<size_t>(INT_MAX));
}

inline size_t num_chunks(size_t count, size_t max_chunk) { return (count + max_chunk - 1) / max_chunk; }

// The PS protocol's piece: a sender pushes each slice's gradients in pieces
// of this many floats (the chunk limit if smaller), the server sums and
// squares each piece as it arrives, updates the slice and returns its new
// parameters in the same pieces, each sent as soon as it is updated
// (ps_client.cpp, ps_server.cpp). 64 Ki floats = 256 KiB: the exposed tail of
// a step is one piece's transfer (~25 µs at 10 GB/s) rather than a slice's
// (up to 4 MiB).
inline constexpr size_t kPsPieceFloats = size_t{1} << 16;
inline size_t ps_piece(size_t max_chunk) { return std::min(max_chunk, kPsPieceFloats); }

inline void isend_chunked(const float* p, size_t count, int peer, int tag, MPI_Comm comm, size_t max_chunk,
                          std::vector<MPI_Request>& out) {
  for (size_t off = 0; off < count; off += max_chunk) {
    const int n = static_cast<int>(std::min(max_chunk, count - off));
    MPI_Request r;
    DT_CHECK_MPI(MPI_Isend(p + off, n, MPI_FLOAT, peer, tag, comm, &r));
    out.push_back(r);
  }
}

inline void irecv_chunked(float* p, size_t count, int peer, int tag, MPI_Comm comm, size_t max_chunk,
                          std::vector<MPI_Request>& out) {
  for (size_t off = 0; off < count; off += max_chunk) {
    const int n = static_cast<int>(std::min(max_chunk, count - off));
    MPI_Request r;
    DT_CHECK_MPI(MPI_Irecv(p + off, n, MPI_FLOAT, peer, tag, comm, &r));
    out.push_back(r);
  }
}

// Tags of the PS protocol (one duplicated communicator per protocol, so these
// never meet other traffic). Control: 0. Slice i of a step of parity p:
// gradients (towards the server) and parameters (back to the senders).
inline constexpr int kTagControl = 0;
inline int tag_grad(size_t slice, int64_t step) { return 1 + static_cast<int>(slice * 4 + (step & 1) * 2); }
inline int tag_param(size_t slice, int64_t step) { return 2 + static_cast<int>(slice * 4 + (step & 1) * 2); }
inline size_t max_tag_for(size_t num_slices) { return num_slices * 4 + 2; }
// Above every slice tag: a server's per-step status to a sender (its order is
// kept by MPI's non-overtaking rule: one per step, each awaited), and the
// slices a server sends to world rank 0 for a checkpoint (params, momentum).
enum class ExtraTag { status = 1, ckpt_params = 2, ckpt_momentum = 3 };
inline int tag_extra(size_t num_slices, ExtraTag t) { return static_cast<int>(max_tag_for(num_slices)) + static_cast<int>(t); }
inline size_t max_extra_tag_for(size_t num_slices) { return max_tag_for(num_slices) + 3; }

}  // namespace dtrain::comm::detail
