// core/format.hpp — numbers and booleans as a person reads and writes them.
//
// shortest(x): the shortest decimal text that reads back as the same value
// (std::to_chars without a precision: "0.05", not "0.0500000007"; "1e-05";
// "64"); used wherever dtrain writes a number a user will read or paste back
// (job files the tuner writes, --help defaults, messages). A float is printed
// as a float (0.05f → "0.05"), so the text re-parses to the identical float.
// boolean(b): "true" / "false", the spelling the job files accept.
// missing_path(p): p for a "no such file" message; a relative p gets the folder
// it was resolved against ("data/x.h5 (relative to /home/u/dtrain)").
// visible(v): v with its invisible bytes (controls, non-ASCII) as \xNN, for
// messages that quote what was typed ("0.05\x0c", "1\xc2\xa0").
#pragma once

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

namespace dtrain::format {

template <typename T>
std::string shortest(T x) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

inline std::string boolean(bool b) { return b ? "true" : "false"; }

inline std::string missing_path(const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  return ec ? p : p + " (relative to " + cwd.string() + ")";
}

// A byte below 0x20 other than tab, or 0x7f: refused in job files, option
// values and the folders named by environment variables.
inline bool is_control_character(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

// A form feed or a no-break space pasted after a value made "got '0.05'" look
// valid; an escape sequence in a name reached the terminal.
inline std::string visible(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace dtrain::format
