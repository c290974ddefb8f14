// The replay worker (docs/design.md, "Replay"). outbox.replay() records a replay and, at its
// commit, makes the database want this worker; the launcher starts it as worker number
// outbox.workers, after the relays, in a slot of outbox.max_workers. It takes the running
// replays in id order, and for each, one transaction per batch:
//
//   SELECT ... FROM outbox.events WHERE part_at in the window AND seq > position
//     AND seq <= upto_seq AND <filters> AND <published> ORDER BY seq LIMIT batch_size
//   -> the sink, each message with the header outbox-replay: <id>
//   -> at most once a second: UPDATE outbox.replays SET position = <the last seq sent>, ...
//
// It reads the events where they are, through each partition's seq index: no event row is
// written and no partition is unsealed. A process of its own, with batches that take no
// transaction id (see send_batch()); while live events flow it keeps a core busy at most
// outbox.replay_share of the time (share_wait()). A crash sends again what it sent since the
// last UPDATE: at least once, as everywhere.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "relay/replay.hpp"

#include "core/pacing.hpp"
#include "core/replay_progress.hpp"
#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_shmem.hpp"
#include "pg/settings.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/wait_event.h"
}

namespace outbox::pg::relay {
namespace {

constexpr const char* kLoadSql =
    "SELECT r.id, r.since, r.until, r.aggregatetype, r.type, r.aggregateid, r.ids, r.position, "
    "       r.upto_seq, COALESCE((SELECT s.low_water FROM outbox.relay_state s), 0) "
    "  FROM outbox.replays r WHERE r.state = 'running' ORDER BY r.id LIMIT 1";

// Published, as every reader decides it (docs/design.md, "The delivery log"): marked on its
// row, or below the low-water mark and neither dead nor waiting for a retry, or in the log.
constexpr const char* kFetchSql = OUTBOX_FETCH_COLUMNS
    "  FROM outbox.events "
    " WHERE part_at >= $2 AND part_at < $3 AND seq > $4 AND seq <= $5 "
    "   AND dead_at IS NULL "
    "   AND (published_at IS NOT NULL "
    "        OR (next_attempt_at IS NULL "
    "            AND (seq < $10 OR outbox._delivered_at(seq) IS NOT NULL))) ";
// The filters, each added only when the replay has it: written as `$6 IS NULL OR ...`, a
// kept (generic) plan would test all four on every row.
constexpr const char* kFilterSql[4] = {" AND aggregatetype = $6", " AND type = $7",
                                       " AND aggregateid = $8", " AND id = ANY ($9)"};
constexpr const char* kFetchOrderSql = " ORDER BY seq LIMIT $1";
constexpr Oid kFetchTypes[10] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID,      INT8OID,
                                 TEXTOID, TEXTOID,        TEXTOID,        UUIDARRAYOID, INT8OID};

// The progress of the current replay, saved at most once a second (Replayer::save()).
constexpr const char* kProgressSql =
    "UPDATE outbox.replays SET position = GREATEST(position, $2), "
    "       events_sent = events_sent + $3, events_skipped = events_skipped + $4, "
    "       last_error = COALESCE($5, last_error), started_at = COALESCE(started_at, now()), "
    "       updated_at = now() "
    " WHERE id = $1";
constexpr const char* kFinishSql =
    "UPDATE outbox.replays SET state = 'done', position = upto_seq, "
    "       events_sent = events_sent + $3, events_skipped = events_skipped + $4, "
    "       last_error = COALESCE($5, last_error), started_at = COALESCE(started_at, now()), "
    "       finished_at = now(), updated_at = now() "
    " WHERE id = $1 AND state = 'running' RETURNING events_sent, events_skipped";
constexpr Oid kProgressTypes[5] = {INT8OID, INT8OID, INT8OID, INT8OID, TEXTOID};
constexpr int64 kSaveEveryUs = 1000 * 1000;
// How recently the relays must have sent for live events to count as flowing.
constexpr int64 kLiveWindowUs = 1000 * 1000;
// A batch that took long (a slow destination) does not make the worker wait for minutes.
constexpr int64 kMaxShareWaitMs = 1000;

bool replays_table_exists() {
  const Oid nsp = get_namespace_oid("outbox", true);
  return OidIsValid(nsp) && OidIsValid(get_relname_relid("replays", nsp));
}

}  // namespace

Replayer::Replayer(int slot, int worker)
    : slot_(slot), rng_(static_cast<uint64>(MyProcPid) * 2654435761u), report_(slot, worker) {}

void Replayer::run() {
  guard([&] {
    iteration_ = AllocSetContextCreate(TopMemoryContext, "outbox replay", ALLOCSET_DEFAULT_SIZES);
    batch_.memory =
        AllocSetContextCreate(TopMemoryContext, "outbox replay batch", ALLOCSET_DEFAULT_SIZES);
    MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
    initStringInfo(&scratch_);
    MemoryContextSwitchTo(old);
  });
  // Commits that enqueue are none of its business.
  relay_worker_wake_on_commit(slot_, false);
  live_batches_ = relay_database_batches(MyDatabaseId);
  // Its pid and its counters in the slot, as a relay's (outbox.status).
  report_.resume();
  report_.publish(WorkerState::kStarting);
  while (!ShutdownRequestPending) {
    start_iteration(iteration_);
    const std::clock_t cpu_started = std::clock();
    int ms = step();
    if (ms < 0 || session_.absent()) break;
    session_.write_log();
    const char* activity = "outbox replay: waiting";
    if (ms == 0) {
      ms = share_wait(cpu_started);
      activity = "outbox replay: leaving live events their share";
    }
    if (ms > 0) wait(ms, activity);
  }
  save_at_exit();
  session_.drop();
}

// Stopped (a database command, a server stop): what it sent since the last save goes on the
// row, so that the next replay worker goes on from there instead of sending it again.
void Replayer::save_at_exit() {
  if (unsaved_.id == 0 || (unsaved_.sent == 0 && unsaved_.skipped == 0)) return;
  try {
    begin_worker_transaction("outbox replay: saving its progress");
    lock_events_first();
    save(unsaved_.id, kProgressSql);
    commit_worker_transaction(iteration_);
  } catch (const PgError& e) {
    abort_worker_transaction(iteration_);
    log_error(e.data());
  } catch (const std::exception&) {
    abort_worker_transaction(iteration_);
  }
}

int Replayer::step() {
  try {
    // Read before the look for a running replay: one requested after it is not missed.
    const uint32 requests = relay_database_replays(MyDatabaseId);
    const bool ready = session_.ensure(iteration_);
    if (session_.absent()) return -1;
    if (!ready) return settings.poll_interval_ms;
    const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
    if (now < backoff_until_) return static_cast<int>((backoff_until_ - now) / 1000) + 1;
    begin_worker_transaction("outbox replay: fetching");
    lock_events_first();
    Replay replay{};
    const bool found = load(replay);
    // The replay it was sending ended (cancelled): what it sent of it goes on its row.
    if (unsaved_.id != 0 && (!found || replay.id != unsaved_.id)) save(unsaved_.id, kProgressSql);
    if (!found) {
      commit_worker_transaction(iteration_);
      unsaved_ = Unsaved{};
      relay_database_replays_done(MyDatabaseId, requests);
      return -1;
    }
    if (unsaved_.id == replay.id) {
      replay.position = std::max(replay.position, unsaved_.position);
    } else {
      unsaved_ = Unsaved{};
      unsaved_.id = replay.id;
      unsaved_.position = replay.position;
      saved_at_ = 0;  // its first batch saves: started_at is then
    }
    return send_batch(replay);
  } catch (const PgError& e) {
    abort_worker_transaction(iteration_);
    log_error(e.data());
    return back_off(e.what());
  } catch (const std::exception& e) {
    abort_worker_transaction(iteration_);
    return back_off(e.what());
  }
}

// In the step's transaction: the oldest running replay, if any.
bool Replayer::load(Replay& replay) {
  return guard([&] {
    if (!replays_table_exists()) return false;
    if (SPI_execute(kLoadSql, true, 1) != SPI_OK_SELECT) {
      elog(ERROR, "outbox replay: reading outbox.replays failed");
    }
    if (SPI_processed == 0) return false;
    HeapTuple tuple = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool null = false;
    replay.id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &null));
    replay.since = SPI_getbinval(tuple, desc, 2, &null);
    replay.until = SPI_getbinval(tuple, desc, 3, &null);
    replay.aggregatetype = SPI_getbinval(tuple, desc, 4, &null);
    replay.has_aggregatetype = !null;
    replay.type = SPI_getbinval(tuple, desc, 5, &null);
    replay.has_type = !null;
    replay.aggregateid = SPI_getbinval(tuple, desc, 6, &null);
    replay.has_aggregateid = !null;
    replay.ids = SPI_getbinval(tuple, desc, 7, &null);
    replay.has_ids = !null;
    replay.position = DatumGetInt64(SPI_getbinval(tuple, desc, 8, &null));
    replay.upto_seq = DatumGetInt64(SPI_getbinval(tuple, desc, 9, &null));
    replay.low_water = DatumGetInt64(SPI_getbinval(tuple, desc, 10, &null));
    return true;
  });
}

// In the step's transaction, which it commits: one batch of `replay`, sent and recorded.
int Replayer::send_batch(const Replay& replay) {
  const bool has[4] = {replay.has_aggregatetype, replay.has_type, replay.has_aggregateid,
                       replay.has_ids};
  int filters = 0;
  for (int i = 0; i < 4; ++i) filters |= has[i] ? 1 << i : 0;
  std::string sql;
  if (fetch_plans_[filters] == nullptr) {
    sql = kFetchSql;
    for (int i = 0; i < 4; ++i) sql += has[i] ? kFilterSql[i] : "";
    sql += kFetchOrderSql;
  }
  Fetched& out = batch_.fetched;
  guard([&] {
    if (fetch_plans_[filters] == nullptr) {
      fetch_plans_[filters] = prepare_kept(sql.c_str(), 10, kFetchTypes);
    }
    const int limit = settings.batch_size;
    MemoryContextReset(batch_.memory);
    out = Fetched{static_cast<Row*>(MemoryContextAllocZero(batch_.memory, sizeof(Row) * limit)), 0,
                  false, InvalidXLogRecPtr};
    const Datum values[10] = {Int64GetDatum(limit),
                              replay.since,
                              replay.until,
                              Int64GetDatum(replay.position),
                              Int64GetDatum(replay.upto_seq),
                              replay.aggregatetype,
                              replay.type,
                              replay.aggregateid,
                              replay.ids,
                              Int64GetDatum(replay.low_water)};
    const bool nulls[10] = {false,
                            false,
                            false,
                            false,
                            false,
                            !replay.has_aggregatetype,
                            !replay.has_type,
                            !replay.has_aggregateid,
                            !replay.has_ids,
                            false};
    RowReceiver receiver;
    init_row_receiver(receiver, batch_, &scratch_, limit, 0, settings.batch_max_bytes);
    run_into(fetch_plans_[filters], 10, values, nulls, kFetchTypes, receiver);
  });
  if (out.count == 0) {
    save(replay.id, kFinishSql);
    commit_worker_transaction(iteration_);
    unsaved_ = Unsaved{};
    failures_ = 0;
    return 0;
  }

  replay_id_ = std::to_string(replay.id);
  fill_messages(batch_);
  for (sinks::Message& m : batch_.messages) m.headers.emplace_back(kReplayHeader, replay_id_);
  report_.publish(WorkerState::kSending);
  const int count = out.count;
  guard([&] {
    pgstat_report_activity(STATE_RUNNING, psprintf("outbox replay %ld: sending %d events",
                                                   static_cast<long>(replay.id), count));
  });
  batch_.outcomes.assign(count, sinks::Outcome{});
  try {
    session_.sink().start(batch_.messages, batch_.outcomes,
                          std::chrono::milliseconds(settings.send_timeout_ms));
    session_.sink().finish();
  } catch (const std::exception& e) {
    for (auto& o : batch_.outcomes) o = {sinks::Delivery::kUnavailable, e.what()};
  }

  // The position moves over the events sent or refused in order (core/replay_progress.hpp); a
  // refused one is skipped, its error kept.
  std::vector<replay::Outcome> outcomes(count);
  std::vector<int64> seqs(count);
  std::string error;
  for (int i = 0; i < count; ++i) {
    const sinks::Outcome& o = batch_.outcomes[i];
    seqs[i] = out.rows[i].seq;
    outcomes[i] = o.delivery == sinks::Delivery::kAcked      ? replay::Outcome::kSent
                  : o.delivery == sinks::Delivery::kRejected ? replay::Outcome::kRefused
                                                             : replay::Outcome::kNotSent;
    if (o.delivery == sinks::Delivery::kRejected) error = "event rejected: " + o.error;
  }
  const replay::Progress progress =
      replay::advance(replay.position, seqs.data(), outcomes.data(), count);
  if (progress.first_not_sent >= 0 && error.empty()) {
    error = "sink unavailable: " + batch_.outcomes[progress.first_not_sent].error;
  }
  // The messages are kept, their header vectors with their capacity: fill_messages() sets
  // every field before the next send, and nothing reads them in between.
  guard([&] { MemoryContextReset(batch_.memory); });
  unsaved_.position = progress.position;
  unsaved_.sent += progress.sent;
  unsaved_.skipped += progress.skipped;
  if (!error.empty()) unsaved_.error = error;
  // Its batches write nothing, so they take no transaction id: the commit log's LSN of a
  // group of transactions is the newest asynchronous commit's among them, and a commit per
  // batch would make the relays flush the WAL for their writers' events (durability.cpp).
  // The progress goes to the row once a second: after a crash, at most that is sent again.
  const bool moved = progress.position != replay.position;
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  if (!moved || now - saved_at_ >= kSaveEveryUs) save(replay.id, kProgressSql);
  commit_worker_transaction(iteration_);
  // Nothing moved: the destination is down, or the batch's first event keeps failing.
  if (!moved) return back_off(error);
  failures_ = 0;
  report_.publish(WorkerState::kIdle);
  return 0;
}

// In the step's transaction: the unsaved progress onto replay `id`'s row, with kProgressSql,
// or with kFinishSql when it has sent everything.
void Replayer::save(int64 id, const char* sql) {
  const bool finish = sql == kFinishSql;
  const char* error = unsaved_.error.empty() ? nullptr : unsaved_.error.c_str();
  const Unsaved& u = unsaved_;
  guard([&] {
    const Datum values[5] = {Int64GetDatum(id), Int64GetDatum(u.position), Int64GetDatum(u.sent),
                             Int64GetDatum(u.skipped),
                             error == nullptr ? 0 : CStringGetTextDatum(error)};
    const char nulls[5] = {' ', ' ', ' ', ' ', error == nullptr ? 'n' : ' '};
    const int rc = SPI_execute_with_args(sql, 5, const_cast<Oid*>(kProgressTypes),
                                         const_cast<Datum*>(values), nulls, false, 0);
    if (rc != (finish ? SPI_OK_UPDATE_RETURNING : SPI_OK_UPDATE)) {
      elog(ERROR, "outbox replay: recording the progress failed");
    }
    if (!finish || SPI_processed == 0) return;  // a finished one: cancelled meanwhile
    bool null = false;
    const int64 sent =
        DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));
    const int64 skipped =
        DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null));
    ereport(LOG,
            (errmsg("outbox replay %ld: done, %ld events sent, %ld skipped", static_cast<long>(id),
                    static_cast<long>(sent), static_cast<long>(skipped))));
  });
  unsaved_.sent = unsaved_.skipped = 0;
  unsaved_.error.clear();
  saved_at_ = guard([] { return GetCurrentTimestamp(); });
}

// After a batch that began when the process had used `cpu_started`: while live events flow
// (the relays sent a batch within the last second), a wait that keeps the worker's CPU time
// to outbox.replay_share of the wall time. A core kept busy makes the live events wait: on the
// benchmarks' 2 cores, any busy core, a replay's or a query's, tripled the waits for WAL
// flushes, and the live p99 rose 3-4x (bench/relay/README.md, "Replay"). CPU time, not the
// batch's time: a batch that waits on its broker keeps no core busy, and is not slowed.
int Replayer::share_wait(std::clock_t cpu_started) {
  if (settings.replay_share >= 100) return 0;
  const uint64 batches = relay_database_batches(MyDatabaseId);
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  if (batches != live_batches_) {
    live_batches_ = batches;
    live_seen_at_ = now;
  }
  if (now - live_seen_at_ > kLiveWindowUs) return 0;
  const int64 cpu_us = static_cast<int64>(std::clock() - cpu_started) * 1000000 / CLOCKS_PER_SEC;
  const int64 wait_us = cpu_us * (100 - settings.replay_share) / settings.replay_share;
  return static_cast<int>(std::min<int64>(wait_us / 1000 + 1, kMaxShareWaitMs));
}

// Exponential back-off with jitter, as the relay's; no transaction is open while it runs.
int Replayer::back_off(const std::string& error) {
  ++failures_;
  const int delay_ms = pacing::with_jitter(
      pacing::backoff_ms(settings.retry_backoff_min_ms, settings.retry_backoff_max_ms, failures_),
      rng_);
  report_.record_error(error);
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  backoff_until_ = now + static_cast<TimestampTz>(delay_ms) * 1000;
  report_.counters().backoff_until = backoff_until_;
  report_.publish(WorkerState::kBackoff);
  if ((failures_ & (failures_ - 1)) == 0) {
    guard([&] {
      ereport(LOG, (errmsg("outbox replay: %s; retrying in %d ms (failure %d)", error.c_str(),
                           delay_ms, failures_)));
    });
  }
  return delay_ms;
}

// On the latch: a signal (reload, shutdown) or a new sink configuration ends the wait.
void Replayer::wait(int ms, const char* activity) {
  guard([&] {
    pgstat_report_activity(STATE_IDLE, activity);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
    if (ShutdownRequestPending || ConfigReloadPending || session_.changed()) return;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
                    PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  });
}

void request_replay_worker_if_running(MemoryContext resume) {
  begin_worker_transaction("outbox relay: looking for running replays");
  const bool running = guard([] {
    if (!replays_table_exists()) return false;
    if (SPI_execute("SELECT 1 FROM outbox.replays WHERE state = 'running' LIMIT 1", true, 1) !=
        SPI_OK_SELECT) {
      elog(ERROR, "outbox relay: reading outbox.replays failed");
    }
    return SPI_processed > 0;
  });
  commit_worker_transaction(resume);
  if (running) relay_database_replay_requested(MyDatabaseId);
}

}  // namespace outbox::pg::relay
