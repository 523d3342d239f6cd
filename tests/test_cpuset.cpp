// tests/test_cpuset.cpp — CPU sets in list notation (core/cpuset.hpp), the
// text of the start-up placement table's "cpus" column, and the affinity
// calls behind it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cpuset.hpp"
#include "core/error.hpp"

using dtrain::cpuset::cpu_ranges;

TEST_CASE("cpu_ranges writes consecutive CPUs as ranges", "[cpuset]") {
  REQUIRE(cpu_ranges({}) == "none");
  REQUIRE(cpu_ranges({5}) == "5");
  REQUIRE(cpu_ranges({0, 1}) == "0-1");
  REQUIRE(cpu_ranges({0, 1, 2, 3, 8}) == "0-3,8");
  REQUIRE(cpu_ranges({0, 2, 4}) == "0,2,4");
  REQUIRE(cpu_ranges({0, 1, 2, 3, 64, 65, 66, 67}) == "0-3,64-67");  // a core's hyperthreads
  REQUIRE(cpu_ranges({7, 3, 1, 2, 7, 9}) == "1-3,7,9");              // any order, duplicates
  REQUIRE(cpu_ranges({1023, 1024, 1025}) == "1023-1025");           // past CPU_SETSIZE
  REQUIRE_THROWS_AS(cpu_ranges({-1, 0}), dtrain::Error);
}

TEST_CASE("thread_cpus reads back what set_thread_cpus wrote", "[cpuset]") {
  const std::vector<int> all = dtrain::cpuset::thread_cpus();
  REQUIRE(!all.empty());
  REQUIRE(std::is_sorted(all.begin(), all.end()));
  dtrain::cpuset::set_thread_cpus({all.front()});
  REQUIRE(dtrain::cpuset::thread_cpus() == std::vector<int>{all.front()});
  REQUIRE(cpu_ranges(dtrain::cpuset::thread_cpus()) == std::to_string(all.front()));
  dtrain::cpuset::set_thread_cpus(all);
  REQUIRE(dtrain::cpuset::thread_cpus() == all);
  REQUIRE_THROWS_AS(dtrain::cpuset::set_thread_cpus({}), dtrain::Error);
}
