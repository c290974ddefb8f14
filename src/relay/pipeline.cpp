// One pass's transaction: fetch a batch, make its commits durable, hand it to the sink, wait
// for the acknowledgements, mark, COMMIT. While batches come full (a backlog), up to
// kMaxBatchesPerTransaction of them are pipelined: the next batch is fetched and started
// while the sink waits for the acknowledgements of the one before. The rows of every batch
// stay locked until the COMMIT; the pipeline stops at the first sink failure.
#include <algorithm>
#include <chrono>

#include "relay/relay.hpp"

#include "pg/boundary.hpp"
#include "relay/durability.hpp"
#include "pg/settings.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/wait_event.h"
}

namespace outbox::pg::relay {
namespace {

// While batches come full, a transaction pipelines up to this many (its row locks and marks
// wait for its commit; the last batch's acknowledgements are not overlapped).
constexpr int kMaxBatchesPerTransaction = 8;
// The longest wait between two looks at the synchronous standbys (see make_durable()).
constexpr int kStandbyPollMaxMs = 100;

}  // namespace

// It stops at the first batch with a sink failure.
BatchResult Relay::run_transaction() {
  BatchResult result;
  mark_.transaction_started();
  begin_worker_transaction("outbox relay: fetching");
  lock_events_first();
  // Between this relay's transactions: a shard it gives back has nothing of it in flight.
  if (ownership_.round(guard([] { return GetCurrentTimestamp(); }))) {
    mark_.reread();
    queue_.reload_holds();
  }
  report_.counters().shards = shards::count(ownership_.owned());
  if (ownership_.owned() == 0) {  // every shard has another owner for now
    commit_worker_transaction(iteration_);
    return result;
  }
  Batch* current = &batches_[0];
  Batch* next = &batches_[1];
  fetch(*current, true);
  result.fetched = current->fetched.count;
  result.full = current->fetched.full;
  if (current->fetched.count > 0 && !make_durable(current->fetched)) result.abandoned = true;
  if (current->fetched.count > 0 && !result.abandoned) {
    start_batch(*current);
    for (int n = 1;; ++n) {
      const bool more =
          current->fetched.full && n < kMaxBatchesPerTransaction && !ShutdownRequestPending;
      if (more) {
        fetch(*next, false);
        result.fetched += next->fetched.count;
        result.full = next->fetched.full;
        if (next->fetched.count > 0 && !make_durable(next->fetched)) {
          result.abandoned = true;
          next->fetched.count = 0;  // not sent; its rows are unlocked at the commit
        }
        if (next->fetched.count > 0) start_batch(*next);
      }
      finish_batch(*current, result);
      if (!more || next->fetched.count == 0) break;
      if (result.unavailable > 0) {
        finish_batch(*next, result);
        break;
      }
      std::swap(current, next);
    }
  }
  guard([&] { mark_.save(GetCurrentTimestamp()); });
  commit_worker_transaction(iteration_);
  // After a sink failure or an abandoned batch, the scan restarts from the mark instead
  // (back_off() or step()); after a deferred event with no failed event of its key to wait
  // behind, here.
  if (result.unavailable == 0 && !result.abandoned) {
    if (result.unresolved) {
      mark_.restart_tracking();
    } else {
      mark_.transaction_resolved();
    }
  }
  if (result.fetched > 0) report_.count(result, session_.name());
  return result;
}

void Relay::forget_extension() {
  mark_.forget();
  sealer_.reset();
}

// One way: the mark says what to read, the queue reads it, the mark accounts for what was
// read (and may cut new events that a late one of their key must precede), and the holds
// take back the rows that must wait behind a failed event of their key.
void Relay::fetch(Batch& batch, bool first_of_transaction) {
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  if (first_of_transaction) {
    // Sealing first, below the floor the mark reports: the mark's queries and the fetch then
    // leave out what is sealed now.
    sealer_.advance(now, mark_.floor_for_sealing());
    mark_.advance(now);
  }
  FetchReport report = queue_.fetch(batch, first_of_transaction, now, mark_.request());
  mark_.account(batch.fetched, report);
  queue_.hold_back(batch.fetched, report.retries_cut ? report.late_from : batch.fetched.count);
}

// Returns at once for a pipelining sink; a synchronous one (the default Sink::start) has the
// outcomes when it returns.
void Relay::start_batch(Batch& batch) {
  const Fetched& fetched = batch.fetched;
  fill_messages(batch);

  report_.publish(WorkerState::kSending);
  const char* name = session_.name().c_str();
  guard([&] {
    pgstat_report_activity(STATE_RUNNING,
                           psprintf("outbox relay: sending %d events to %s", fetched.count, name));
  });
  batch.outcomes.assign(fetched.count, sinks::Outcome{});
  batch.started_at = guard([] { return GetCurrentTimestamp(); });
  try {
    session_.sink().start(batch.messages, batch.outcomes,
                          std::chrono::milliseconds(settings.send_timeout_ms));
    batch.in_flight = true;
  } catch (const std::exception& e) {
    fail_batch(batch, e);
  }
}

// The whole batch failed as kUnavailable; a ConfigError (the broker's setup is wrong, say a
// subject no stream captures) is remembered, so that the relay waits retry_backoff_max.
void Relay::fail_batch(Batch& batch, const std::exception& e) {
  batch.config_error = dynamic_cast<const sinks::ConfigError*>(&e) != nullptr;
  for (auto& o : batch.outcomes) o = {sinks::Delivery::kUnavailable, e.what()};
}

// Waits for the batch's outcomes (the oldest started batch), marks what was acknowledged and
// records what was not, then frees the batch's rows.
void Relay::finish_batch(Batch& batch, BatchResult& result) {
  if (batch.in_flight) {
    batch.in_flight = false;
    try {
      session_.sink().finish();
    } catch (const std::exception& e) {
      fail_batch(batch, e);
    }
  }
  const Fetched& fetched = batch.fetched;
  count_batch(batch, result.stats);
  guard([] { pgstat_report_activity(STATE_RUNNING, "outbox relay: recording the batch"); });
  queue_.mark_acked(fetched, batch.outcomes);
  ++result.batches;
  // The sink delivered some of the batch: what it could not deliver is a failure of those
  // messages (a 503, a partition without a leader), not of the sink. They wait on the retry
  // path, holding their keys, while the other keys flow (docs/design.md, "Failures").
  const bool delivered =
      !batch.config_error &&
      std::any_of(batch.outcomes.begin(), batch.outcomes.end(),
                  [](const sinks::Outcome& o) { return o.delivery == sinks::Delivery::kAcked; });
  for (int i = 0; i < fetched.count; ++i) {
    const sinks::Outcome& o = batch.outcomes[i];
    switch (o.delivery) {
      case sinks::Delivery::kAcked:
        ++result.acked;
        break;
      case sinks::Delivery::kRejected:
        ++result.rejected;
        if (queue_.mark_rejected(fetched.rows[i], o.error)) ++result.dead;
        if (result.first_rejection.empty()) result.first_rejection = "event rejected: " + o.error;
        break;
      case sinks::Delivery::kDeferred:
        ++result.deferred;
        break;
      case sinks::Delivery::kUnavailable:
        if (delivered) {
          ++result.transient;
          queue_.mark_transient(fetched.rows[i], o.error);
          if (result.first_transient.empty()) {
            result.first_transient = "event unavailable, its key held: " + o.error;
          }
          break;
        }
        ++result.unavailable;
        if (result.first_unavailable.empty()) {
          result.first_unavailable =
              (batch.config_error ? "sink configuration error: " : "sink unavailable: ") + o.error;
          result.config_error = batch.config_error;
        }
        break;
    }
  }
  // After the failures: their keys' holds are known.
  if (result.deferred > 0 && !queue_.defer(fetched, batch.outcomes)) result.unresolved = true;
  batch.messages.clear();
  batch.config_error = false;
  guard([&] { MemoryContextReset(batch.memory); });
}

// What the statistics keep of a batch whose outcomes are in (relay_stats.hpp): its size, its
// round trip, and each acknowledged event's time from its enqueue (created_at, the clock at
// enqueue(): the commit's time is not kept without track_commit_timestamp) to now.
void Relay::count_batch(const Batch& batch, RelayStatsDelta& stats) {
  using histogram::kMicros;
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  const Fetched& fetched = batch.fetched;
  stats.batch_size.add(histogram::kSizeBounds, fetched.count, histogram::kUnits);
  stats.round_trip.add(histogram::kSecondsBounds, (now - batch.started_at) / kMicros, kMicros);
  for (int i = 0; i < fetched.count; ++i) {
    if (batch.outcomes[i].delivery != sinks::Delivery::kAcked) continue;
    const Row& row = fetched.rows[i];
    stats.latency.add(histogram::kSecondsBounds, (now - row.created_at) / kMicros, kMicros);
    uint64 bytes = static_cast<uint64>(row.payload.len);
    for (int h = 0; h < row.nheaders; ++h) {
      bytes += static_cast<uint64>(row.header_keys[h].len + row.header_values[h].len);
    }
    stats.bytes_sent += bytes;
  }
}

// After a fetch: the commits of its events must not be able to vanish before the sink gets
// them (relay/durability.hpp). False when the wait for the synchronous standbys was given up: at
// shutdown, a reload or a new sink configuration; the batch is then not sent.
bool Relay::make_durable(const Fetched& fetched) {
  if (!settings.wait_for_sync_standbys) {
    guard([&] { flush_commits(fetched.commits_upto); });
    return true;
  }
  // A writer with synchronous_commit = local flushed its commit but did not wait for the
  // standbys, and the commit log keeps no LSN for it: wait for everything the fetch saw.
  const XLogRecPtr lsn = guard([] { return flush_visible_commits(); });
  int polls = 0;
  while (guard([lsn] { return sync_standbys_behind(lsn); })) {
    if (polls == 0) {
      report_.publish(WorkerState::kWaitingForStandbys);
      guard([] {
        pgstat_report_activity(STATE_RUNNING, "outbox relay: waiting for synchronous standbys");
      });
    }
    if (ShutdownRequestPending || ConfigReloadPending || session_.changed()) return false;
    // No latch tells the relay that the standbys moved: the walsenders set the latches of
    // the backends queued in SyncRepWaitForLSN only, and that wait can be given up neither
    // for a reload or a new sink nor at a shutdown (SIGTERM here does not set
    // ProcDiePending). So the relay polls, off its latch (a commit's wake-up stays set for
    // the pass after this one), after 1, 2, 4 ... ms and then every kStandbyPollMaxMs: a
    // standby that keeps up is seen within a few milliseconds, one that is down costs ten
    // wake-ups a second.
    const int ms = pacing::backoff_ms(1, kStandbyPollMaxMs, ++polls);
    guard([ms] {
      (void)WaitLatch(nullptr, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
      CHECK_FOR_INTERRUPTS();
    });
  }
  return true;
}

void Relay::abort_transaction() {
  // A batch still in flight has rows that the abort unlocks, and its outcomes would come to
  // nobody: drop the sink with it (a new one is made for the next pass); the events are sent
  // again. The sink goes first: until it is destroyed, its threads may still read the
  // batch's messages.
  bool in_flight = false;
  for (const Batch& batch : batches_) in_flight = in_flight || batch.in_flight;
  if (in_flight) session_.drop();
  for (Batch& batch : batches_) {
    batch.in_flight = false;
    batch.messages.clear();
    guard([&] { MemoryContextReset(batch.memory); });
  }
  abort_worker_transaction(iteration_);
}

}  // namespace outbox::pg::relay
