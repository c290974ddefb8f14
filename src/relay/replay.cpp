// The replay worker (docs/design.md, "Replay"). outbox.replay() records a replay and, at its
// commit, makes the database want this worker; the launcher starts it (outbox_replay_main,
// relay/worker_main.cpp) after the relays, in a slot of outbox.max_workers. It runs the
// relays' loop (relay/worker_loop.hpp), and takes the running replays in id order, and for
// each, one transaction per batch:
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
#include <ctime>

#include "relay/replay.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"
#include "pg/settings.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

namespace outbox::pg::relay {
namespace {

constexpr const char* kLoadSql =
    "SELECT r.id, r.since, r.until, r.aggregatetype, r.type, r.aggregateid, r.ids, r.position, "
    "       r.upto_seq, COALESCE((SELECT s.low_water FROM outbox.relay_state s), 0) "
    "  FROM outbox.replays r WHERE r.state = 'running' ORDER BY r.id LIMIT 1";

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
// How recently the relays must have sent for live events to count as flowing.
constexpr int64 kLiveWindowUs = 1000 * 1000;
// A batch that took long (a slow destination) does not make the worker wait for minutes.
constexpr int64 kMaxShareWaitMs = 1000;

bool replays_table_exists() {
  const Oid nsp = get_namespace_oid("outbox", true);
  return OidIsValid(nsp) && OidIsValid(get_relname_relid("replays", nsp));
}

}  // namespace

Replayer::Replayer(int slot, int worker) : slot_(slot), report_(slot, worker) {}

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
  loop_.run(iteration_, [&] {
    const std::clock_t cpu_started = std::clock();
    int ms = step();
    if (ms < 0 || session_.absent()) return false;
    session_.write_log();
    const char* activity = "outbox replay: waiting";
    if (ms == 0) {
      ms = share_wait(cpu_started);
      activity = "outbox replay: leaving live events their share";
    }
    if (ms > 0) loop_.wait(ms, activity, WorkerLoop::Earlier::kReset);
    return true;
  });
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
    save(unsaved_.id, Mark::kProgress);
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
    if (const int ms = loop_.backoff_left_ms(now); ms > 0) return ms;
    begin_worker_transaction("outbox replay: fetching");
    lock_events_first();
    Replay replay{};
    const bool found = load(replay);
    // The replay it was sending ended (cancelled): what it sent of it goes on its row.
    if (unsaved_.id != 0 && (!found || replay.id != unsaved_.id))
      save(unsaved_.id, Mark::kProgress);
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
    return loop_.back_off(e.what());
  } catch (const std::exception& e) {
    abort_worker_transaction(iteration_);
    return loop_.back_off(e.what());
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

// In the step's transaction: the unsaved progress onto replay `id`'s row; kDone when it has
// sent everything.
void Replayer::save(int64 id, Mark mark) {
  const bool finish = mark == Mark::kDone;
  const char* sql = finish ? kFinishSql : kProgressSql;
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
