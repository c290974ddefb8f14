// The loop both workers of a database run, the relay (relay.hpp) and the replay worker
// (replay.hpp): the top of each iteration, the back-off after a failure, the wait on the latch;
// and the process both run it in (worker_main.cpp: one setup, two entry points).
#pragma once

#include <string>

#include "core/pacing.hpp"
#include "pg/postgres.hpp"
#include "relay/session.hpp"

extern "C" {
#include "postmaster/interrupt.h"
}

namespace outbox::pg::relay {

// What a worker process is: its entry point says (outbox_relay_main, outbox_replay_main).
enum class Role { kRelay, kReplay };

class WorkerLoop {
 public:
  // `report` and `session` are the worker's own; they outlive the loop's use of them.
  WorkerLoop(Role role, Report& report, const SinkSession& session);

  // Until a shutdown, or until `pass` returns false (nothing left to do): each pass in
  // `iteration`, emptied, with a reload applied first.
  template <typename Pass>
  void run(MemoryContext iteration, Pass pass) {
    while (!ShutdownRequestPending) {
      start_iteration(iteration);
      if (!pass()) return;
    }
  }

  // One more failure in a row: the error reported, the back-off's end published, a log line
  // at the first failure and then at doubling counts. Returns the wait, exponential with
  // jitter; `at_max`: retry_backoff_max at once (a configuration error is not fixed in a
  // moment). No transaction is open while it runs.
  int back_off(const std::string& error, bool at_max = false);
  // Moves at each reload the loop applied: the relay reads the queue after one.
  uint32 reloads() const { return reloads_; }
  // A pass that went through: the next failure waits the shortest back-off again.
  void succeeded() { failures_.succeeded(); }
  // What is left of the back-off at `now`, rounded up; 0 when it is over.
  int backoff_left_ms(TimestampTz now);

  // Whether a wake-up that came before the wait (the latch already set) ends it.
  enum class Earlier { kEndsWait, kReset };
  // Waits up to `ms` on the latch, which a signal (reload, shutdown), a new sink
  // configuration and the postmaster's death set. `activity` (unless null) shows in
  // pg_stat_activity. With Earlier::kReset an earlier wake-up is reset, and what else ends
  // the wait is checked first.
  void wait(int ms, const char* activity, Earlier earlier);

 private:
  // The top of an iteration: `iteration` emptied and made current, a reload applied.
  void start_iteration(MemoryContext iteration);

  const Role role_;
  Report& report_;
  const SinkSession& session_;
  // Failed passes in a row: the back-off.
  pacing::Failures failures_;
  uint32 reloads_ = 0;
};

}  // namespace outbox::pg::relay
