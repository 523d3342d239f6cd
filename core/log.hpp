// core/log.hpp — minimal logging to stdout/stderr, line by line.
//
// Batch jobs have no terminal: stdout is set line-buffered by the front end and
// every call here ends with a newline and a flush.
#pragma once

#include <cstdio>
#include <string>

#include "core/error.hpp"

namespace dtrain::log {

template <typename... Args>
void info(Args&&... args) {
  std::string s = detail::concat(std::forward<Args>(args)...);
  std::fprintf(stdout, "%s\n", s.c_str());
  std::fflush(stdout);
}

template <typename... Args>
void warn(Args&&... args) {
  std::string s = detail::concat(std::forward<Args>(args)...);
  std::fprintf(stderr, "dtrain: warning: %s%s\n", rank_prefix().c_str(), s.c_str());
  std::fflush(stderr);
}

// A warning about what every rank of a job finds alike — a property of a
// file they all open, such as a dataset's chunk layout: printed by rank 0 only
// (by any process whose rank is unknown, as before MPI starts or in a 1-rank
// job). A rank opening another file of that name (a node-local copy) with
// another layout is not heard; its warnings() still hold it.
template <typename... Args>
void warn_from_rank0(Args&&... args) {
  if (error_rank() > 0) return;
  warn(std::forward<Args>(args)...);
}

}  // namespace dtrain::log
