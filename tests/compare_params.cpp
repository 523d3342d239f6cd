// tests/compare_params.cpp — compares the /params of two --save-params files:
// prints ‖a − b‖ / ‖a‖ (relative L2) and exits 1 when it exceeds the tolerance.
// usage: dtrain_compare_params A.h5 B.h5 TOLERANCE
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "io/float_arrays.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s A.h5 B.h5 TOLERANCE\n", argv[0]);
    return 2;
  }
  try {
    auto a = dtrain::io::load_float_array(argv[1], "params");
    auto b = dtrain::io::load_float_array(argv[2], "params");
    if (a.size() != b.size()) {
      std::fprintf(stderr, "different sizes: %zu vs %zu\n", a.size(), b.size());
      return 1;
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      double d = static_cast<double>(a[i]) - b[i];
      num += d * d;
      den += static_cast<double>(a[i]) * a[i];
    }
    double rel = std::sqrt(num / den);
    double tol = std::atof(argv[3]);
    std::printf("relative L2 difference %.3e (tolerance %.1e): %s\n", rel, tol, rel <= tol ? "ok" : "TOO LARGE");
    return rel <= tol && std::isfinite(rel) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
