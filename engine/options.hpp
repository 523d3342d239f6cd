// engine/options.hpp — the one command-line reader of every dtrain subcommand
// (Boost.Program_options), so that they all behave alike:
//   * no prefix guessing: `--device` never silently means `--device-memory-gb`,
//     an abbreviation is an unknown option (exit 2);
//   * an unknown option or job-file key names the nearest valid one
//     ("unrecognised option '--minibtach' (did you mean --minibatch?)"), by
//     Damerau–Levenshtein distance (adjacent transpositions count 1), when
//     it is within a quarter of the name's length (at least 1 edit), or when
//     the name is a prefix of 3 or more letters of it;
//   * every po::error becomes a UsageError (exit 2) prefixed with where it
//     came from ("dtrain bench comm: ", "job file 'x.ini': ").
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "core/format.hpp"

namespace dtrain::engine {

namespace po = boost::program_options;

// Boost.Program_options style of every dtrain command: the default without guessing.
int option_style();

// The nearest long option name of `desc` to `name` (leading dashes ignored), or
// "" when none is close enough.
std::string nearest_option(const std::string& name, const po::options_description& desc);
// The one of `words` nearest to `word` (edit distance with transpositions, at
// most 1 up to 6 letters, 2 up to 10, …), or "" (an unknown command's "did you mean").
std::string nearest_word(const std::string& word, const std::vector<std::string>& words);

// Throws UsageError("<where><boost's message>[ (did you mean --x?)]"). With
// job_file, the suggestion is spelled as a key ("did you mean key 'x'?").
[[noreturn]] void rethrow_usage(const po::error& e, const std::string& where,
                                const po::options_description& desc, bool job_file = false);

// Throws UsageError when an option's value starts with "--": `--save-params
// $EMPTY --metrics m.jsonl` took "--metrics" as the file name and wrote a file
// of that name (a helper's finding, 2026-12-04). No dtrain value starts so.
// Also throws on a word that is no option's value (no positional option
// takes it): Boost dropped `dtrain train … extra` and `--mean 0.5 0.3`'s 0.3.
void refuse_option_like_values(const po::parsed_options& parsed, const std::string& where);

// Throws UsageError, naming the option and the value as typed, when a value
// of an option of numeric type is not one: not a decimal number (such as 0.01
// or 1e-4; no spaces, hex or suffixes) or integer, beyond the type's range, or
// a nonzero number the type holds as 0. `--lr 1e-50` was refused as "must be
// > 0, got 0", a value nobody typed, and `--comm-timeout 1e-5000` (0: no
// timeout) was taken (a helper's findings, 2026-12-04). inf and nan pass:
// validate() says whether the option takes them.
void refuse_bad_numbers(const po::parsed_options& parsed, const po::options_description& desc,
                        const std::string& where);

// Throws UsageError when a value holds a control character (a byte below
// 0x20 other than tab, or 0x7f), shown as \xNN: an escape sequence in
// `--run-name` reached the terminal in "outputs in …", a NUL in a job file cut
// a path short and made the run folder's mkdir loop forever. Called after
// refuse_bad_numbers, whose messages for numbers say more.
void refuse_control_characters(const po::parsed_options& parsed, const std::string& where);
using format::is_control_character;  // core/format.hpp

// The same reading of one number for the list and range options (mean, std,
// lr-milestones, rrc-scale; tune's candidates): "" when `text` is a float
// (a double, an int), else why not, as a clause ("which is not a decimal
// number …").
std::string float_problem(const std::string& text);
std::string double_problem(const std::string& text);
std::string int_problem(const std::string& text);

// `t` without the spaces and tabs around it ("0.08, 1" or "3 / 4" in a job file).
std::string trim_blanks(std::string t);

// The items of a comma-separated list, each trimmed (trim_blanks); an empty
// item, also a last one ("16,32," or "0.5,,1"), is kept as "" for the caller to
// refuse. "" has one empty item.
std::vector<std::string> list_items(const std::string& s);

// `v` with its invisible bytes spelled out as \xNN (core/format.hpp).
using format::visible;

// store + notify of a command line, through rethrow_usage on any error,
// refuse_option_like_values and refuse_bad_numbers.
// where: e.g. "dtrain report: ".
po::variables_map parse_command_line(const std::vector<std::string>& args, const po::options_description& desc,
                                     const std::string& where,
                                     const po::positional_options_description* pos = nullptr);

// Options given on the command line (not defaulted) that the chosen variant
// of a command does not read are refused, not ignored: each of `unread` that
// `vm` holds as given throws UsageError "<where>option 'K' is not read <why>".
// (dtrain data: --classes with imagefolder; bench io: --n without --chunking.)
void refuse_unread_options(const po::variables_map& vm, const std::vector<std::string>& unread,
                           const std::string& where, const std::string& why);

}  // namespace dtrain::engine
