// tests/config_test_util.hpp — the message of the UsageError that
// `dtrain train` arguments must raise (tests of engine/config).
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "engine/config.hpp"

namespace dtrain::test {

// parse_train_args(args) must throw UsageError (exit code 2); returns its message.
inline std::string usage_message(const std::vector<std::string>& args) {
  engine::TrainConfig c;
  try {
    engine::parse_train_args(args, c);
  } catch (const UsageError& e) {
    REQUIRE(e.exit_code() == 2);
    return e.what();
  }
  FAIL("no UsageError for the arguments");
  return "";
}

}  // namespace dtrain::test
