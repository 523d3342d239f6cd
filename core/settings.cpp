// core/settings.cpp — environment reader (see settings.hpp for the list).
#include "core/settings.hpp"

#include <cstdlib>

#include "core/error.hpp"
#include "core/format.hpp"

namespace dtrain::settings {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get_text_or(const char* name, const std::string& fallback) {
  const std::string value = get_or(name, fallback);
  // A control character (an escape sequence) reached the terminal in messages
  // and became part of folder names ($DTRAIN_DATA_DIR).
  for (const char c : value)
    if (format::is_control_character(c))
      DT_USAGE("environment variable ", name, "='", format::visible(value), "' holds the control character ",
               format::visible(std::string(1, c)), " (a value is printable text)");
  return value;
}

std::string get_or(const char* name, const std::string& fallback) {
  auto v = get(name);
  return v ? *v : fallback;
}

std::optional<long> get_long(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0')
    DT_USAGE("environment variable ", name, "='", format::visible(*v), "' is not an integer");
  return x;
}

}  // namespace dtrain::settings
