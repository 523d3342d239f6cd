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

}  // namespace dtrain::log
