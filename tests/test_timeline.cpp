// tests/test_timeline.cpp — the timeline's event buffer (core/timeline.hpp):
// the step window, the fixed capacity (events past it are counted, not
// stored), spans, and the exchange's transfer bookkeeping (comm/transfer_trace.hpp).
#include <catch2/catch.hpp>

#include <string>

#include "comm/transfer_trace.hpp"
#include "core/timeline.hpp"
#include "engine/timeline.hpp"

using dtrain::timeline::Buffer;
using dtrain::timeline::Kind;
using dtrain::timeline::Span;

TEST_CASE("timeline buffer records the step window only", "[timeline]") {
  Buffer b(100, /*first_step=*/5, /*steps=*/3);
  for (int64_t s = 0; s < 12; ++s)
    if (Buffer* tl = b.for_step(s)) tl->add(Kind::step, 10 * s, 10 * s + 5, s);
  REQUIRE(b.size() == 3);
  REQUIRE(b.data()[0].step == 5);
  REQUIRE(b.data()[2].step == 7);
  REQUIRE(b.dropped() == 0);
  REQUIRE(!b.in_window(4));
  REQUIRE(b.in_window(7));
  REQUIRE(!b.in_window(8));
}

TEST_CASE("timeline buffer never grows past its capacity", "[timeline]") {
  Buffer b(4, 0, 1000);
  for (int i = 0; i < 10; ++i) b.add(Kind::push, i, i + 1, 0, 64, i, 3);
  REQUIRE(b.capacity() == 4);
  REQUIRE(b.size() == 4);
  REQUIRE(b.dropped() == 6);
  REQUIRE(b.data()[3].index == 3);  // the first four are kept
  REQUIRE(b.data()[3].bytes == 64);
  REQUIRE(b.data()[3].peer == 3);
}

TEST_CASE("timeline span records its lifetime, and nothing with a null buffer", "[timeline]") {
  Buffer b(8, 0, 10);
  {
    Span s(&b, Kind::forward, 2);
    Span off(nullptr, Kind::backward, 2);
  }
  REQUIRE(b.size() == 1);
  REQUIRE(b.data()[0].kind == Kind::forward);
  REQUIRE(b.data()[0].t1_ns >= b.data()[0].t0_ns);
  REQUIRE(std::string(dtrain::timeline::kind_name(Kind::server_update)) == "server update");
  REQUIRE(std::string(dtrain::timeline::kind_category(Kind::loader_wait)) == "io");
}

TEST_CASE("timeline transfer trace ends a transfer with its last request", "[timeline]") {
  Buffer b(16, 0, 10);
  dtrain::comm::detail::TransferTrace t;
  t.reset(&b, 1);
  t.untraced(1);                       // request 0: a control message
  t.open(Kind::push, 2, 800, 0, 4);    // requests 1, 2: two chunks of one slice
  t.open(Kind::pull, 1, 800, 0, 4);    // request 3
  t.open(Kind::pull, 0, 0, 1, 4);      // an empty slice: recorded at once
  REQUIRE(b.size() == 1);
  t.completed(0);
  t.completed(1);
  REQUIRE(b.size() == 1);              // the push still has a chunk in flight
  t.completed(2);
  REQUIRE(b.size() == 2);
  REQUIRE(b.data()[1].kind == Kind::push);
  REQUIRE(b.data()[1].bytes == 800);
  t.close_all();                       // the pull ends now
  REQUIRE(b.size() == 3);
  REQUIRE(b.data()[2].kind == Kind::pull);
  REQUIRE(b.data()[2].step == 1);
  t.reset(nullptr, 2);                 // off: nothing is stored
  t.open(Kind::push, 1, 8, 0, 4);
  t.completed(0);
  t.close_all();
  REQUIRE(b.size() == 3);
}

TEST_CASE("timeline capacity per step grows with parts and peers", "[timeline]") {
  REQUIRE(dtrain::engine::timeline_events_per_step(0, 1) >= 7);
  REQUIRE(dtrain::engine::timeline_events_per_step(3, 5) > dtrain::engine::timeline_events_per_step(3, 2));
}
