// engine/server_loop.cpp — ServerLoop (server_loop.hpp). Servers always run
// on the CPU backend: the arena's slices live in host memory.
#include "engine/server_loop.hpp"

#include "core/error.hpp"
#include "engine/preemption.hpp"

namespace dtrain::engine {

void ServerLoop::run() {
  comm::ServeHooks hooks;
  // What each update does besides the Sgd's step: the step's report, an
  // injected failure, a test's signal.
  auto before = [this](size_t b, int64_t step) {
    job_.report_step(step);
    if (job_.failures.hits_server(step, job_.rank()) && job_.failures.fire())
      DT_FAIL("injected failure at step ", step, " on parameter server ", job_.topo.server_index(),
              " (DTRAIN_FAIL_AT_STEP)");
    if (b == first_begin_) maybe_raise_test_signal(step, job_.rank());
  };
  hooks.rule = [this, before](float* p, const float* g, size_t b, size_t e, int64_t step) {
    before(b, step);
    job_.sgd->step(p, g, job_.schedule.at(step), b, e);
    last_step_ = step;
  };
  hooks.rule_into = [this, before](const float* const* in, float* const* out, const float* g, size_t b, size_t e,
                                   int64_t step) {
    before(b, step);
    job_.sgd->step_into(in[0], in[1], out[0], out[1], g, job_.schedule.at(step), b, e);
    last_step_ = step;
  };
  for (const comm::Slice& sl : ex_.shard_map().slices())  // this server's first slice: once per step
    if (sl.server == job_.topo.server_index()) {
      first_begin_ = sl.begin;
      break;
    }
  hooks.clip_norm = job_.cfg.clip_grad_norm;
  // Update and return each piece before the step's joint check (ps mode, no
  // clipping); the rule writes the parameters and the Sgd's momentum, so both
  // are double-buffered (rule_into) and a rolled-back step keeps the old
  // generation of both (comm::ServeHooks).
  hooks.speculate = true;
  hooks.state = {job_.sgd->momentum_state()};
  hooks.signalled = [] { return stop_signal() != 0; };
  for (;;) {
    const comm::ServeEnd end = ex_.serve(job_.net->params().data(), hooks);
    if (end == comm::ServeEnd::stopped) return;
    ckpt_.serve_side(ex_);
    if (end == comm::ServeEnd::checkpoint_and_stop) {
      requeue_ = true;
      return;
    }
  }
}

}  // namespace dtrain::engine
