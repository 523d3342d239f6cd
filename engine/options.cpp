// engine/options.cpp — see options.hpp.
#include "engine/options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>

#include "core/error.hpp"

namespace dtrain::engine {

namespace {

// Optimal string alignment distance (Damerau–Levenshtein with adjacent transpositions).
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string strip_dashes(std::string s) {
  s.erase(0, s.find_first_not_of('-'));
  auto eq = s.find('=');  // "--minibtach=16"
  if (eq != std::string::npos) s.erase(eq);
  return s;
}

// What an option of this value type accepts, for "the argument … is
// invalid": Boost says the same for "abc" and for 1e300 given to a float.
template <typename T>
bool names_type(const po::value_semantic* sem, std::string* out) {
  if (!dynamic_cast<const po::typed_value<T>*>(sem)) return false;
  if constexpr (std::is_floating_point_v<T>)
    *out = std::string("a number of magnitude at most ") + (sizeof(T) == 4 ? "3.4e38" : "1.8e308");
  else
    *out = "an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
           std::to_string(std::numeric_limits<T>::max());
  return true;
}

std::string accepted_values(const std::string& name, const po::options_description& desc) {
  const po::option_description* d = desc.find_nothrow(strip_dashes(name), false);
  if (!d) return {};
  const po::value_semantic* sem = d->semantic().get();
  std::string t;
  if (names_type<float>(sem, &t) || names_type<double>(sem, &t) || names_type<int>(sem, &t) ||
      names_type<int64_t>(sem, &t) || names_type<long long>(sem, &t) || names_type<unsigned>(sem, &t) ||
      names_type<uint64_t>(sem, &t) || names_type<unsigned long long>(sem, &t))
    return " (it takes " + t + ")";
  return {};
}

}  // namespace

int option_style() {
  return po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
}

std::string nearest_option(const std::string& name, const po::options_description& desc) {
  const std::string want = strip_dashes(name);
  if (want.empty()) return {};
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (const auto& opt : desc.options()) {
    const std::string& cand = opt->long_name();
    if (cand.empty()) continue;
    size_t d = edit_distance(want, cand);
    // A prefix of a real option (an abbreviation, refused) is close too.
    if (cand.size() > want.size() && cand.compare(0, want.size(), want) == 0 && want.size() >= 3) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = cand;
    }
  }
  const size_t limit = std::max<size_t>(1, (want.size() + 1) / 4);  // 1 edit up to 6 letters, 2 up to 10, …
  return best_d <= limit ? best : std::string();
}

void rethrow_usage(const po::error& e, const std::string& where, const po::options_description& desc, bool job_file) {
  std::string hint;
  if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
    const std::string near = nearest_option(u->get_option_name(), desc);
    if (!near.empty()) hint = job_file ? " (did you mean key '" + near + "'?)" : " (did you mean --" + near + "?)";
  } else if (const auto* v = dynamic_cast<const po::invalid_option_value*>(&e)) {
    hint = accepted_values(v->get_option_name(), desc);
  }
  DT_USAGE(where, e.what(), hint);
}

void refuse_option_like_values(const po::parsed_options& parsed, const std::string& where) {
  for (const po::option& opt : parsed.options)
    for (const std::string& v : opt.value)
      if (v.size() > 2 && v.starts_with("--") && !opt.string_key.empty())
        DT_USAGE(where, "option '", opt.string_key, "' got the value '", v,
                 "', which looks like an option: was its value left empty (an unset shell variable)?");
}

namespace {

// True, with the type's smallest nonzero magnitude in *smallest, when `v` is a
// plain nonzero number that an option of floating type T stores as 0.
template <typename T>
bool rounds_to_zero(const po::value_semantic* sem, const std::string& v, std::string* smallest) {
  if (!dynamic_cast<const po::typed_value<T>*>(sem)) return false;
  char* end = nullptr;
  const long double x = std::strtold(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(x) || x == 0.0L) return false;
  if (static_cast<T>(x) != T(0)) return false;
  *smallest = sizeof(T) == 4 ? "1.4e-45" : "4.9e-324";
  return true;
}

}  // namespace

void refuse_underflowing_numbers(const po::parsed_options& parsed, const po::options_description& desc,
                                 const std::string& where) {
  for (const po::option& opt : parsed.options) {
    if (opt.string_key.empty() || opt.value.size() != 1) continue;
    const po::option_description* d = desc.find_nothrow(opt.string_key, false);
    if (!d) continue;
    const po::value_semantic* sem = d->semantic().get();
    std::string smallest;
    const std::string& v = opt.value.front();
    if (rounds_to_zero<float>(sem, v, &smallest))
      DT_USAGE(where, "option '", opt.string_key, "' got '", v, "', which a float holds as 0 (its smallest nonzero magnitude is ",
               smallest, ")");
    if (rounds_to_zero<double>(sem, v, &smallest))
      DT_USAGE(where, "option '", opt.string_key, "' got '", v, "', which a double holds as 0 (its smallest nonzero magnitude is ",
               smallest, ")");
  }
}

po::variables_map parse_command_line(const std::vector<std::string>& args, const po::options_description& desc,
                                     const std::string& where, const po::positional_options_description* pos) {
  po::variables_map vm;
  try {
    auto p = po::command_line_parser(args).options(desc).style(option_style());
    if (pos) p.positional(*pos);
    const po::parsed_options parsed = p.run();
    refuse_option_like_values(parsed, where);
    refuse_underflowing_numbers(parsed, desc, where);
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    rethrow_usage(e, where, desc);
  }
  return vm;
}

}  // namespace dtrain::engine
