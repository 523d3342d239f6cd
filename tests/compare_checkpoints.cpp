// tests/compare_checkpoints.cpp — bitwise comparison of two checkpoint files
// (io/checkpoint.hpp), for the resume tests.
// usage: dtrain_compare_checkpoints A.h5 B.h5 [ARRAY ...]
// Both files are read and verified (crc32 per array); the arrays named (all
// of A's when none is named) must have the same shape and the same bytes.
// Prints one line per array; exits 0 when all are equal, 1 when one differs,
// 2 when a file does not read. Also prints each file's step, and for an array
// that differs the L2 norm of the difference (the clipping test reads it).
// usage: dtrain_compare_checkpoints --without-inputs IN.h5 DIR
// writes IN's checkpoint into the folder DIR without its "input:KEY" strings
// (what a dtrain before 2026-12-05 wrote), for the resume tests; prints its path.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--without-inputs") == 0) {
    try {
      dtrain::io::CheckpointState s = dtrain::io::read_checkpoint(argv[2]);
      std::erase_if(s.strings, [](const auto& e) { return e.first.starts_with("input:"); });
      const dtrain::io::CheckpointStore store(argv[3], 1);
      store.check_writable(0);
      std::printf("%s\n", store.write(s.ints.at("step"), s).c_str());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s A.h5 B.h5 [ARRAY ...]\n", argv[0]);
    return 2;
  }
  try {
    const dtrain::io::CheckpointState a = dtrain::io::read_checkpoint(argv[1]);
    const dtrain::io::CheckpointState b = dtrain::io::read_checkpoint(argv[2]);
    std::printf("steps: %lld vs %lld\n", static_cast<long long>(a.ints.at("step")),
                static_cast<long long>(b.ints.at("step")));
    std::vector<std::string> names;
    for (int i = 3; i < argc; ++i) names.emplace_back(argv[i]);
    if (names.empty())
      for (const auto& [name, arr] : a.arrays) names.push_back(name);
    int differ = 0;
    for (const std::string& n : names) {
      auto ia = a.arrays.find(n), ib = b.arrays.find(n);
      if (ia == a.arrays.end() || ib == b.arrays.end()) {
        std::printf("%s: missing in %s\n", n.c_str(), ia == a.arrays.end() ? argv[1] : argv[2]);
        ++differ;
        continue;
      }
      const auto& x = ia->second.data;
      const auto& y = ib->second.data;
      size_t first = x.size();
      if (ia->second.shape == ib->second.shape)
        for (size_t i = 0; i < x.size(); ++i)
          if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) {
            first = i;
            break;
          }
      const bool same = ia->second.shape == ib->second.shape && first == x.size();
      if (same) std::printf("%s: %zu values, bitwise equal\n", n.c_str(), x.size());
      else if (ia->second.shape != ib->second.shape) std::printf("%s: shapes differ\n", n.c_str());
      else {
        double d2 = 0;
        for (size_t i = 0; i < x.size(); ++i) d2 += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
        std::printf("%s: differs first at index %zu (%.9g vs %.9g); L2 norm of the difference %.9g\n", n.c_str(),
                    first, x[first], y[first], std::sqrt(d2));
      }
      differ += same ? 0 : 1;
    }
    return differ == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
