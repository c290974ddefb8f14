// The relay's loop (the shared skeleton: worker_loop.hpp): read the sink configuration when
// it changed, run one pass (a transaction of batches, pipeline.cpp; skipped while idle,
// idle.cpp), write the sink's log lines, wait for a commit's wake-up or
// outbox.poll_interval. After a failure it backs off, with no transaction open.
#include <algorithm>

#include "relay/relay.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "relay/replay.hpp"

namespace outbox::pg::relay {

Relay::Relay(int slot, int worker) : slot_(slot), report_(slot, worker), ownership_(slot, worker) {}

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
  loop_.run(iteration_, [&] {
    const Pause pause = step();
    // A database without the extension: the session told the launcher, and the relay exits.
    if (session_.absent()) return false;
    session_.write_log();
    wait(pause);
    return true;
  });
  session_.drop();  // flushes and closes the client library
}

// One pass; returns how long to wait before the next one, and for what.
Relay::Pause Relay::step() {
  try {
    TimestampTz now = 0;
    if (const std::optional<Pause> pause = before_pass(now)) return *pause;
    // Before the fetch's snapshot: a commit it does not see sets the latch (and moves the
    // commit count that an idle pass reads first).
    wake_on_commit(true);
    uint32 commits = 0;
    bool known = false;
    if (const std::optional<Pause> idle = idle_pause(now, commits, known)) return *idle;
    start_pass(now, commits, known);
    pacer_.started(now);
    const int64_t cpu_before = pacing::thread_cpu_us();
    const BatchResult result = run_transaction();
    pacer_.finished(pacing::thread_cpu_us() - cpu_before, result.full);
    note_pass(result);
    const Pause pause = after_pass(result);
    // A quiet pass with no commit since it began: the idle wait at once, not one more
    // wake-up at poll_interval first.
    if (quiet_ && pause.kind == Pause::kForEvents) {
      const TimestampTz after = guard([] { return GetCurrentTimestamp(); });
      if (const std::optional<Pause> idle = idle_pause(after, commits, known)) return *idle;
    }
    return pause;
  } catch (const PgError& e) {
    abort_transaction();
    log_error(e.data());
    return {Pause::kBackingOff, back_off(e.what())};
  } catch (const std::exception& e) {
    abort_transaction();
    return {Pause::kBackingOff, back_off(e.what())};
  }
}

// What keeps a pass from running now: no sink, the back-off, commits that gather; else the
// time the pass starts at, in `now`.
std::optional<Relay::Pause> Relay::before_pass(TimestampTz& now) {
  const bool ready = session_.ensure(iteration_);
  if (session_.take_new_extension()) forget_extension();
  // Nothing to send with: configure_sink() and CREATE EXTENSION end the wait at their
  // commit (they call outbox._notify_relay()); poll_interval is the fallback.
  if (!ready) return Pause{Pause::kForSink, settings.poll_interval_ms};
  // A replay left running by a restart wants its worker again (relay/replay.cpp).
  if (!replays_checked_) {
    replays_checked_ = true;
    if (report_.number() == 1) request_replay_worker_if_running(iteration_);
  }
  now = guard([] { return GetCurrentTimestamp(); });
  if (const int ms = loop_.backoff_left_ms(now); ms > 0) return Pause{Pause::kBackingOff, ms};
  // Under a stream of commits that would cost the relay more than its share of a core, they
  // gather (core/pacing.hpp): the loop waits, and the next pass sends them.
  const int64 gather_us =
      pacer_.wait_us(now, static_cast<int64>(settings.min_batch_interval_ms) * 1000);
  // A latch waits whole milliseconds: to the nearest, so a wait under half of one is none.
  if (gather_us >= 500) return Pause{Pause::kGathering, static_cast<int>((gather_us + 500) / 1000)};
  return std::nullopt;
}

// What a pass's outcome asks for: the next pass at once, a back-off, or a wait for events.
Relay::Pause Relay::after_pass(const BatchResult& result) {
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
    succeeded();
    report_.record_error(result.first_unavailable);
    report_.publish(WorkerState::kIdle);
    return {Pause::kForEvents, 0};
  }
  // Not sent while waiting for the standbys (a reload, a new sink): at once, from the mark.
  if (result.abandoned) {
    mark_.restart_tracking();
    return {Pause::kForEvents, 0};
  }
  succeeded();
  report_.publish(WorkerState::kIdle);
  if (result.full) return {Pause::kForEvents, 0};
  return {Pause::kForEvents, until_due()};
}

// The wait for events after a pass that sent everything: poll_interval, or less when
// something is due sooner: a retry (a held key's event, after a rejection or a transient
// failure), or the check that finds late events in the gaps when a commit woke this pass but
// the last check was too recent (a late commit could otherwise wait that long).
int Relay::until_due() {
  // (A relay that owns no shard fetched nothing: it has no retry of its own to wait for.)
  TimestampTz due = ownership_.owned() != 0 ? queue_.retry_check_at() : DT_NOEND;
  const TimestampTz late_due = mark_.skipped_check_due();
  if (late_due != 0) due = std::min(due, late_due);
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  const int64 wait_ms = std::max<int64>(0, due - now) / 1000 + 1;  // DT_NOEND: huge
  return static_cast<int>(std::min<int64>(settings.poll_interval_ms, wait_ms));
}

// The failures in a row end, and with them the back-off.
void Relay::succeeded() {
  loop_.succeeded();
  report_.counters().backoff_until = 0;
}

int Relay::back_off(const std::string& error, bool at_max) {
  mark_.restart_tracking();
  return loop_.back_off(error, at_max);
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
  const char* activity = nullptr;
  if (pause.kind == Pause::kForSink) {
    activity = "outbox relay: waiting for a sink";
  } else if (for_events && pause.ms > 0) {
    activity = "outbox relay: waiting for events";
  } else if (pause.kind == Pause::kBackingOff) {
    activity = "outbox relay: backing off";
  }
  // Not waiting for events, an earlier commit's wake-up is of no use: its events wait for a
  // sink, or for the batch after this wait, which sees them.
  loop_.wait(pause.ms, activity,
             for_events ? WorkerLoop::Earlier::kEndsWait : WorkerLoop::Earlier::kReset);
}

// In the relay's shared-memory slot, read by every commit that enqueued (pg/relay_slots.hpp).
void Relay::wake_on_commit(bool wake) {
  if (wake == wake_on_commit_) return;
  relay_worker_wake_on_commit(slot_, wake);
  wake_on_commit_ = wake;
}

}  // namespace outbox::pg::relay
