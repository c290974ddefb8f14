// The loop the relay and the replay worker share (worker_loop.hpp): the top of an
// iteration, the back-off, the wait.
#include "relay/worker_loop.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_stats.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
}

namespace outbox::pg::relay {

WorkerLoop::WorkerLoop(Role role, Report& report, const SinkSession& session)
    : role_(role),
      report_(report),
      session_(session),
      failures_(static_cast<uint64>(MyProcPid) * 2654435761u) {}

void WorkerLoop::start_iteration(MemoryContext iteration) {
  const bool reload = guard([&] {
    MemoryContextSwitchTo(iteration);
    MemoryContextReset(iteration);
    if (!ConfigReloadPending) return false;
    ConfigReloadPending = false;
    ProcessConfigFile(PGC_SIGHUP);
    return true;
  });
  if (reload) ++reloads_;
}

int WorkerLoop::back_off(const std::string& error, bool at_max) {
  const int delay_ms =
      failures_.failed(settings.retry_backoff_min_ms, settings.retry_backoff_max_ms, at_max);
  report_.record_error(error);
  // The database's statistics count the relays' back-offs (pg/relay_stats.hpp).
  if (role_ == Role::kRelay) {
    RelayStatsDelta backoff;
    backoff.backoffs = 1;
    relay_stats_add(MyDatabaseId, session_.name().c_str(), backoff);
  }
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  report_.counters().backoff_until = now + static_cast<TimestampTz>(delay_ms) * 1000;
  report_.publish(WorkerState::kBackoff);
  if (failures_.worth_a_log_line()) {
    const std::string who = role_ == Role::kRelay
                                ? "outbox relay " + std::to_string(report_.number())
                                : std::string("outbox replay");
    guard([&] {
      ereport(LOG, (errmsg("%s: %s; retrying in %d ms (failure %d)", who.c_str(), error.c_str(),
                           delay_ms, failures_.count())));
    });
  }
  return delay_ms;
}

int WorkerLoop::backoff_left_ms(TimestampTz now) {
  const TimestampTz until = report_.counters().backoff_until;
  return now < until ? static_cast<int>((until - now) / 1000) + 1 : 0;
}

void WorkerLoop::wait(int ms, const char* activity, Earlier earlier) {
  guard([&] {
    if (activity != nullptr) pgstat_report_activity(STATE_IDLE, activity);
    if (earlier == Earlier::kReset) {
      ResetLatch(MyLatch);
      CHECK_FOR_INTERRUPTS();
      if (ShutdownRequestPending || ConfigReloadPending || session_.changed()) return;
    }
    if (ms > 0) {
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
                      PG_WAIT_EXTENSION);
      ResetLatch(MyLatch);
    }
    CHECK_FOR_INTERRUPTS();
  });
}

}  // namespace outbox::pg::relay
