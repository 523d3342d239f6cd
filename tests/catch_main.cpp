// tests/catch_main.cpp — Catch2's main, alone in its translation unit (slow to compile).
//
// Every run fails, rather than passes, when it checks nothing: a test case (or a
// leaf SECTION) that ends without a single assertion fails (Catch2's
// `-w NoAssertions`: an early return, a loop that ran zero times, every check
// behind an `if` that did not hold), and a name filter that matches no test case
// fails too (`-w NoTests`: a ctest entry whose name Catch2 parses differently).
// A part skipped on purpose must say so with WARN and still make an assertion.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  Catch::Session session;
  const int rc = session.applyCommandLine(argc, argv);
  if (rc != 0) return rc;
  auto& cfg = session.configData();
  cfg.warnings = static_cast<Catch::WarnAbout::What>(cfg.warnings | Catch::WarnAbout::NoAssertions |
                                                     Catch::WarnAbout::NoTests);
  return session.run();
}
