// core/timeline.cpp — the names and categories of timeline events (timeline.hpp).
#include "core/timeline.hpp"

namespace dtrain::timeline {

namespace {

struct Names {
  const char* name;
  const char* category;
};

// Indexed by Kind; categories: compute, io, step, comm (transfers), server, checkpoint.
constexpr Names kNames[] = {
    {"step", "step"},
    {"loader wait", "io"},
    {"forward", "compute"},
    {"backward", "compute"},
    {"exchange wait", "comm"},
    {"update", "compute"},
    {"checkpoint", "checkpoint"},
    {"compute stand-in", "compute"},
    {"exchange step", "comm"},
    {"allreduce bucket", "comm"},
    {"push", "comm"},
    {"pull", "comm"},
    {"member recv", "comm"},
    {"node sum", "compute"},
    {"member send", "comm"},
    {"node reduce", "comm"},
    {"node bcast", "comm"},
    {"server step", "step"},
    {"server recv", "comm"},
    {"aggregate", "server"},
    {"joint check", "server"},
    {"server update", "server"},
    {"server send", "comm"},
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(Kind::kCount));

}  // namespace

const char* kind_name(Kind k) {
  const auto i = static_cast<size_t>(k);
  return i < static_cast<size_t>(Kind::kCount) ? kNames[i].name : "?";
}

const char* kind_category(Kind k) {
  const auto i = static_cast<size_t>(k);
  return i < static_cast<size_t>(Kind::kCount) ? kNames[i].category : "?";
}

}  // namespace dtrain::timeline
