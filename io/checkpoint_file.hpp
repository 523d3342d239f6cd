// io/checkpoint_file.hpp — one checkpoint file's HDF5 layout (the "File
// layout" of checkpoint.hpp), internal to io/: CheckpointStore::write calls
// write_checkpoint_file for step 1 of its protocol; read_checkpoint
// (checkpoint.hpp) is its reading side, in the same file.
#pragma once

#include <functional>
#include <string>

#include "io/checkpoint.hpp"

namespace dtrain::io {

// Creates `path` (truncating a stale one) and writes `s` into it: format and
// version, then each array (kill_point() after the file is created and after
// each array), the state attributes (kill_point()), "complete" = 1
// (kill_point()); closes it. No fsync, no rename: the caller's protocol.
// Throws dtrain::Error naming `path` on a write failure or a bad key (empty,
// reserved, the same key in two maps, '/' in an array name); the caller
// removes the file.
void write_checkpoint_file(const std::string& path, const CheckpointState& s,
                           const std::function<void()>& kill_point);

}  // namespace dtrain::io
