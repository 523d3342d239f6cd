// engine/options.cpp — see options.hpp.
#include "engine/options.hpp"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <sstream>

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

}  // namespace

std::string nearest_word(const std::string& word, const std::vector<std::string>& words) {
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (const std::string& w : words)
    if (const size_t d = edit_distance(word, w); d < best_d) {
      best_d = d;
      best = w;
    }
  return best_d <= std::max<size_t>(1, (word.size() + 1) / 4) ? best : std::string();
}

int option_style() {
  return po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
}

std::string nearest_option(const std::string& name, const po::options_description& desc) {
  // Case does not count: `LR = 0.1` in a job file is one edit from nothing else.
  auto lower = [](std::string t) {
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return t;
  };
  const std::string want = lower(strip_dashes(name));
  if (want.empty()) return {};
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (const auto& opt : desc.options()) {
    const std::string cand = lower(opt->long_name());
    if (cand.empty()) continue;
    size_t d = edit_distance(want, cand);
    // A prefix of a real option (an abbreviation, refused) is close too.
    if (cand.size() > want.size() && cand.compare(0, want.size(), want) == 0 && want.size() >= 3) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = opt->long_name();
    }
  }
  const size_t limit = std::max<size_t>(1, (want.size() + 1) / 4);  // 1 edit up to 6 letters, 2 up to 10, …
  return best_d <= limit ? best : std::string();
}

void rethrow_usage(const po::error& e, const std::string& where, const po::options_description& desc, bool job_file) {
  std::string hint;
  if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
    const std::string name = u->get_option_name();
    const std::string near = nearest_option(name, desc);
    if (!near.empty()) hint = job_file ? " (did you mean key '" + near + "'?)" : " (did you mean --" + near + "?)";
    // A name with invisible bytes (a no-break space pasted before a key) is
    // shown as \xNN: Boost's message printed them raw.
    // A long name (a pasted line) is cut at 120 bytes.
    if (visible(name) != name || name.size() > 120)
      DT_USAGE(where, "unrecognised option '", visible(name.substr(0, 120)), name.size() > 120 ? "…" : "", "'", hint);
  }
  DT_USAGE(where, e.what(), hint);
}

void refuse_option_like_values(const po::parsed_options& parsed, const std::string& where) {
  for (const po::option& opt : parsed.options) {
    // A word that is no option's value (`dtrain train --job j.ini extra`,
    // `--mean 0.5 0.3`): Boost dropped it and the run went on without it. An
    // empty word (an empty variable a script quoted) carries nothing: let be.
    if (opt.string_key.empty() && !opt.value.empty() && !opt.value.front().empty())
      DT_USAGE(where, "'", visible(opt.value.front()),
               "' is not an option or an option's value (options start with --; a list is one "
               "comma-separated value, such as --mean 0.5,0.3)");
    for (const std::string& v : opt.value)
      if (v.size() > 2 && v.starts_with("--") && !opt.string_key.empty())
        DT_USAGE(where, "option '", opt.string_key, "' got the value '", visible(v),
                 "', which looks like an option: was its value left empty (an unset shell variable)?");
  }
}

void refuse_control_characters(const po::parsed_options& parsed, const std::string& where) {
  for (const po::option& opt : parsed.options)
    for (const std::string& v : opt.value)
      if (const auto c = std::find_if(v.begin(), v.end(), is_control_character); c != v.end())
        DT_USAGE(where, "option '", opt.string_key, "' got '", visible(v), "', which holds the control character ",
                 visible(std::string(1, *c)), " (a value is printable text)");
}

namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }

// [+-]? (d+ (.d*)? | .d+) ([eE] [+-]? d+)? — what the options take as a number
// (no spaces, no hex, no suffix). *nonzero: a digit before the exponent is not 0.
bool is_decimal(const std::string& s, bool* nonzero) {
  size_t i = 0, n = s.size();
  *nonzero = false;
  if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  for (; i < n && digit(s[i]); ++i, ++digits) *nonzero |= s[i] != '0';
  if (i < n && s[i] == '.')
    for (++i; i < n && digit(s[i]); ++i, ++digits) *nonzero |= s[i] != '0';
  if (digits == 0) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (i == n || !digit(s[i])) return false;
    while (i < n && digit(s[i])) ++i;
  }
  return i == n;
}

// inf, infinity, nan, with a sign, any case: read as numbers (validate() says
// whether an option takes them: "must be a finite number").
bool is_inf_nan(const std::string& s) {
  std::string t = s;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.erase(0, 1);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return t == "inf" || t == "infinity" || t == "nan";
}

template <typename T>
std::string floating_problem(const std::string& v) {
  if (is_inf_nan(v)) return {};
  bool nonzero = false;
  if (!is_decimal(v, &nonzero)) return "which is not a decimal number (such as 0.01 or 1e-4)";
  const char* type = sizeof(T) == 4 ? "a float" : "a double";
  const T x = sizeof(T) == 4 ? static_cast<T>(std::strtof(v.c_str(), nullptr)) : static_cast<T>(std::strtod(v.c_str(), nullptr));
  if (std::isinf(x))
    return std::string("which is beyond ") + type + "'s largest magnitude (" + (sizeof(T) == 4 ? "3.4e38" : "1.8e308") + ")";
  if (x == T(0) && nonzero)
    return std::string("which ") + type + " holds as 0 (its smallest nonzero magnitude is " +
           (sizeof(T) == 4 ? "1.4e-45" : "4.9e-324") + ")";
  return {};
}

template <typename T>
std::string integer_problem(const std::string& v) {
  size_t i = v.size() > 0 && (v[0] == '+' || v[0] == '-') ? 1 : 0;
  if (i == v.size() || !std::all_of(v.begin() + static_cast<std::ptrdiff_t>(i), v.end(), digit))
    return "which is not an integer";
  errno = 0;
  bool fits;
  if (v[0] == '-') {
    const long long x = std::strtoll(v.c_str(), nullptr, 10);
    fits = errno != ERANGE && std::numeric_limits<T>::is_signed && x >= static_cast<long long>(std::numeric_limits<T>::min());
  } else {
    const unsigned long long x = std::strtoull(v.c_str(), nullptr, 10);
    fits = errno != ERANGE && x <= static_cast<unsigned long long>(std::numeric_limits<T>::max());
  }
  if (fits) return {};
  return "which is beyond the range of its type (" + std::to_string(std::numeric_limits<T>::min()) + " to " +
         std::to_string(std::numeric_limits<T>::max()) + ")";
}

// Why `v` is not a value of the option's numeric type, or "" (also for a
// value of no numeric type: Boost reads it).
template <typename T>
bool typed_problem(const po::value_semantic* sem, const std::string& v, std::string* why) {
  if (!dynamic_cast<const po::typed_value<T>*>(sem)) return false;
  if constexpr (std::is_floating_point_v<T>) *why = floating_problem<T>(v);
  else *why = integer_problem<T>(v);
  return true;
}


}  // namespace

std::string trim_blanks(std::string t) {
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  return t;
}

std::vector<std::string> list_items(const std::string& s) {
  std::vector<std::string> items;
  std::stringstream ss(s + ",");  // so a last empty item is one too
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(trim_blanks(item));
  return items;
}

std::string float_problem(const std::string& text) { return floating_problem<float>(text); }
std::string double_problem(const std::string& text) { return floating_problem<double>(text); }
std::string int_problem(const std::string& text) { return integer_problem<int>(text); }

void refuse_bad_numbers(const po::parsed_options& parsed, const po::options_description& desc,
                        const std::string& where) {
  for (const po::option& opt : parsed.options) {
    if (opt.string_key.empty() || opt.value.size() != 1) continue;
    const po::option_description* d = desc.find_nothrow(opt.string_key, false);
    if (!d) continue;
    const po::value_semantic* sem = d->semantic().get();
    const std::string& v = opt.value.front();
    std::string why;
    if (typed_problem<float>(sem, v, &why) || typed_problem<double>(sem, v, &why) || typed_problem<int>(sem, v, &why) ||
        typed_problem<int64_t>(sem, v, &why) || typed_problem<long long>(sem, v, &why) ||
        typed_problem<unsigned>(sem, v, &why) || typed_problem<uint64_t>(sem, v, &why) ||
        typed_problem<unsigned long long>(sem, v, &why)) {
      if (!why.empty()) DT_USAGE(where, "option '", opt.string_key, "' got '", visible(v), "', ", why);
    }
  }
}

void refuse_unread_options(const po::variables_map& vm, const std::vector<std::string>& unread,
                           const std::string& where, const std::string& why) {
  for (const std::string& key : unread)
    if (vm.count(key) && !vm[key].defaulted()) DT_USAGE(where, "option '", key, "' is not read ", why);
}

po::variables_map parse_command_line(const std::vector<std::string>& args, const po::options_description& desc,
                                     const std::string& where, const po::positional_options_description* pos) {
  po::variables_map vm;
  try {
    auto p = po::command_line_parser(args).options(desc).style(option_style());
    if (pos) p.positional(*pos);
    const po::parsed_options parsed = p.run();
    refuse_option_like_values(parsed, where);
    refuse_bad_numbers(parsed, desc, where);
    refuse_control_characters(parsed, where);
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    rethrow_usage(e, where, desc);
  }
  return vm;
}

}  // namespace dtrain::engine
