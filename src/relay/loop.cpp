// The relay's loop: read the sink configuration when it changed, run one pass (a
// transaction of batches, pipeline.cpp), write the sink's log lines, wait for a commit's
// wake-up or outbox.poll_interval. After a failure it backs off, with no transaction open.
#include <algorithm>

#include "relay/relay.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_stats.hpp"
#include "pg/settings.hpp"
#include "relay/launcher.hpp"
#include "relay/replay.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
}

namespace outbox::pg::relay {

Relay::Relay(int slot, int worker)
    : slot_(slot),
      failures_(static_cast<uint64>(MyProcPid) * 2654435761u),
      report_(slot, worker),
      ownership_(slot, worker) {}

void Relay::run() {
  iteration_ = guard([] {
    return AllocSetContextCreate(TopMemoryContext, "outbox relay", ALLOCSET_DEFAULT_SIZES);
  });
  guard([&] { queue_.init(); });
  for (Batch& batch : batches_) {
    batch.memory = guard([] {
      return AllocSetContextCreate(TopMemoryContext, "outbox relay batch", ALLOCSET_DEFAULT_SIZES);
    });
  }
  report_.resume();
  report_.publish(WorkerState::kStarting);
  while (!ShutdownRequestPending) {
    start_iteration(iteration_);
    const Pause pause = step();
    // A database without the extension: the session told the launcher, and the relay exits.
    if (session_.absent()) break;
    session_.write_log();
    wait(pause);
  }
  session_.drop();  // flushes and closes the client library
}

// One pass; returns how long to wait before the next one, and for what.
Relay::Pause Relay::step() {
  try {
    const bool ready = session_.ensure(iteration_);
    if (session_.take_new_extension()) forget_extension();
    // Nothing to send with: configure_sink() and CREATE EXTENSION end the wait at their
    // commit (they call outbox._notify_relay()); poll_interval is the fallback.
    if (!ready) return {Pause::kForSink, settings.poll_interval_ms};
    // A replay left running by a restart wants its worker again (relay/replay.cpp).
    if (!replays_checked_) {
      replays_checked_ = true;
      if (report_.number() == 1) request_replay_worker_if_running(iteration_);
    }
    WorkerCounters& counters = report_.counters();
    const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
    if (now < counters.backoff_until) {
      return {Pause::kBackingOff, static_cast<int>((counters.backoff_until - now) / 1000) + 1};
    }
    // Under a stream of commits that would cost the relay more than its share of a core, they
    // gather (core/pacing.hpp): the loop waits, and the next pass sends them.
    const int64 gather_us =
        pacer_.wait_us(now, static_cast<int64>(settings.min_batch_interval_ms) * 1000);
    // A latch waits whole milliseconds: to the nearest, so a wait under half of one is none.
    if (gather_us >= 500) return {Pause::kGathering, static_cast<int>((gather_us + 500) / 1000)};
    // Before the fetch's snapshot: a commit it does not see sets the latch.
    wake_on_commit(true);
    pacer_.started(now);
    const int64_t cpu_before = pacing::thread_cpu_us();
    BatchResult result = run_transaction();
    pacer_.finished(pacing::thread_cpu_us() - cpu_before, result.full);
    // At shutdown the sink stops waiting: not an outage to log or back off from.
    if ((result.unavailable > 0 || result.abandoned) && ShutdownRequestPending) {
      return {Pause::kForEvents, 0};
    }
    // A new configuration came while a batch waited: the new sink takes it from the mark.
    if (result.unavailable > 0 && session_.changed()) {
      mark_.restart_tracking();
      return {Pause::kForEvents, 0};
    }
    // The whole stream backs off only when the sink delivered nothing: a pass that delivered
    // some events shows the destination is up, and what failed in it goes again from the mark
    // at once (docs/design.md, "Failures").
    if (result.unavailable > 0 && (result.acked == 0 || result.config_error)) {
      return {Pause::kBackingOff, back_off(result.first_unavailable, result.config_error)};
    }
    if (result.unavailable > 0) {
      mark_.restart_tracking();
      failures_.succeeded();
      counters.backoff_until = 0;
      report_.record_error(result.first_unavailable);
      report_.publish(WorkerState::kIdle);
      return {Pause::kForEvents, 0};
    }
    // Not sent while waiting for the standbys (a reload, a new sink): at once, from the mark.
    if (result.abandoned) {
      mark_.restart_tracking();
      return {Pause::kForEvents, 0};
    }
    failures_.succeeded();
    counters.backoff_until = 0;
    report_.publish(WorkerState::kIdle);
    if (result.full) return {Pause::kForEvents, 0};
    // Come back before poll_interval when something is due sooner: a retry (a held key's
    // event, after a rejection or a transient failure), or the check that finds late events
    // in the gaps when a commit woke this pass but the last check was too recent (a late
    // commit could otherwise wait that long).
    // (A relay that owns no shard fetched nothing: it has no retry of its own to wait for.)
    TimestampTz due = ownership_.owned() != 0 ? queue_.retry_check_at() : DT_NOEND;
    const TimestampTz late_due = mark_.skipped_check_due();
    if (late_due != 0) due = std::min(due, late_due);
    const TimestampTz now_after = guard([] { return GetCurrentTimestamp(); });
    const int64 wait_ms = std::max<int64>(0, due - now_after) / 1000 + 1;  // DT_NOEND: huge
    return {Pause::kForEvents,
            static_cast<int>(std::min<int64>(settings.poll_interval_ms, wait_ms))};
  } catch (const PgError& e) {
    abort_transaction();
    log_error(e.data());
    return {Pause::kBackingOff, back_off(e.what())};
  } catch (const std::exception& e) {
    abort_transaction();
    return {Pause::kBackingOff, back_off(e.what())};
  }
}

// Exponential back-off with jitter; no transaction is open while it runs.
int Relay::back_off(const std::string& error, bool at_max) {
  mark_.restart_tracking();
  const int delay_ms =
      failures_.failed(settings.retry_backoff_min_ms, settings.retry_backoff_max_ms, at_max);
  report_.record_error(error);
  RelayStatsDelta backoff;
  backoff.backoffs = 1;
  relay_stats_add(MyDatabaseId, session_.name().c_str(), backoff);
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  report_.counters().backoff_until = now + static_cast<TimestampTz>(delay_ms) * 1000;
  report_.publish(WorkerState::kBackoff);
  if (failures_.worth_a_log_line()) {
    guard([&] {
      ereport(LOG, (errmsg("outbox relay %d: %s; retrying in %d ms (failure %d)", report_.number(),
                           error.c_str(), delay_ms, failures_.count())));
    });
  }
  return delay_ms;
}

// Always on the latch, which a signal (reload, shutdown), a new sink configuration and the
// postmaster's death set. A commit that enqueued sets it only while the relay waits for
// events: with no sink there is nothing to send its events with, while commits gather the
// relay waits for them on purpose, and while it backs off it would only wait again. Then
// the committers skip the signal (a syscall each) and the relay does not wake for each of
// them.
void Relay::wait(Pause pause) {
  const bool for_events = pause.kind == Pause::kForEvents;
  wake_on_commit(for_events);
  guard([&] {
    if (pause.kind == Pause::kForSink) {
      pgstat_report_activity(STATE_IDLE, "outbox relay: waiting for a sink");
    } else if (for_events && pause.ms > 0) {
      pgstat_report_activity(STATE_IDLE, "outbox relay: waiting for events");
    } else if (pause.kind == Pause::kBackingOff) {
      pgstat_report_activity(STATE_IDLE, "outbox relay: backing off");
    }
    if (!for_events) {
      // An earlier commit's wake-up is of no use here: its events wait for a sink, or for
      // the batch after this wait, which sees them. What else ends the wait is checked once
      // the latch is reset.
      ResetLatch(MyLatch);
      CHECK_FOR_INTERRUPTS();
      if (ShutdownRequestPending || ConfigReloadPending || session_.changed()) return;
    }
    if (pause.ms > 0) {
      (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, pause.ms,
                      PG_WAIT_EXTENSION);
      ResetLatch(MyLatch);
    }
    CHECK_FOR_INTERRUPTS();
  });
}

// In the relay's shared-memory slot, read by every commit that enqueued (pg/relay_shmem.hpp).
void Relay::wake_on_commit(bool wake) {
  if (wake == wake_on_commit_) return;
  relay_worker_wake_on_commit(slot_, wake);
  wake_on_commit_ = wake;
}

}  // namespace outbox::pg::relay

void outbox_relay_main(Datum arg) {
  const int slot = DatumGetInt32(arg);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  BackgroundWorkerUnblockSignals();
  // The launcher found the database and passes its oid (relay/launcher.cpp).
  outbox::pg::relay::RelayStart start;
  memcpy(&start, MyBgworkerEntry->bgw_extra, sizeof(start));
  BackgroundWorkerInitializeConnectionByOid(start.database, InvalidOid, 0);
  // The worker after the relays is the replay worker (relay/replay.cpp); its starts and exits
  // are not the relays'.
  const bool replay = start.worker == outbox::pg::settings.workers;
  pgstat_report_appname(replay ? "outbox replay" : "outbox relay");
  // The relay's own commits (the published marks) need not wait for the WAL flush: if a
  // crash loses the last ones, those events are sent again, which at-least-once delivery
  // allows anyway. It saves an fsync per batch, which is most of a batch's latency.
  SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
  // The relay's plans are generic, made once and kept: planning a custom plan for every
  // batch cost up to a sixth of its time (the selectivity of each of 1000 ctids). No
  // sequential scan fits any of its queries (they all have an index or a TID scan), but
  // one made while a partition was new and empty would stay cached as it fills.
  SetConfigOption("enable_seqscan", "off", PGC_SUSET, PGC_S_OVERRIDE);
  // A disabled scan's cost (reading the sequence, a one-row table) would trigger JIT
  // compilation on every execution; the relay's queries are small anyway.
  SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);
  // Each statement needs a new snapshot: the low-water mark reads the sequence and then
  // needs a snapshot taken after it.
  SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
  outbox::pg::relay_worker_attach(slot);
  if (!replay) outbox::pg::relay_stats_started(MyDatabaseId);
  // A session that needs the database to itself (pg/database_commands.cpp) paused it before
  // this attached, or sends this relay SIGTERM: either way it leaves.
  if (outbox::pg::relay_database_paused(MyDatabaseId)) {
    outbox::pg::relay_worker_detach(slot, nullptr);
    if (!replay) outbox::pg::relay_stats_exited(MyDatabaseId, outbox::pg::RelayExit::kClean);
    proc_exit(0);
  }

  // Past this point errors are C++ exceptions. Anything that escapes the loop ends the
  // worker with exit code 1, and no other backend is disturbed (a death by signal would
  // restart them all); the launcher starts it again.
  int exit_code = 0;
  char why[256] = "";
  try {
    if (replay) {
      outbox::pg::relay::Replayer replayer(slot, start.worker);
      replayer.run();
    } else {
      outbox::pg::relay::Relay relay(slot, start.worker);
      relay.run();
    }
  } catch (const outbox::pg::PgError& e) {
    snprintf(why, sizeof(why), "stopped after an error: %s", e.what());
    outbox::pg::log_error(e.data());
    exit_code = 1;
  } catch (const std::exception& e) {
    snprintf(why, sizeof(why), "stopped after an unexpected error: %s", e.what());
    elog(LOG, "outbox relay %d: %s", start.worker + 1, why);
    exit_code = 1;
  } catch (...) {
    snprintf(why, sizeof(why), "stopped after an unexpected error");
    elog(LOG, "outbox relay %d: %s", start.worker + 1, why);
    exit_code = 1;
  }
  // outbox.status shows why it stopped.
  outbox::pg::relay_worker_detach(slot, why[0] != '\0' ? why : nullptr);
  if (!replay) {
    outbox::pg::relay_stats_exited(MyDatabaseId, exit_code == 0 ? outbox::pg::RelayExit::kClean
                                                                : outbox::pg::RelayExit::kError);
  }
  proc_exit(exit_code);
}
