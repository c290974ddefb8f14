// The low-water mark. Every event with seq below it is published, dead-lettered or waiting
// for a retry, so the scan for new events starts there, and no index has to mention
// published_at or the delivery log. The mark is not "id > last_id", which loses late commits:
// it only passes a value once no transaction that could still commit an event at or below
// it is running.
//   - outbox._next_seq() gives a transaction its xid before its sequence value.
//   - The relay reads the sequence (C) and then the next xid (N): every value <= C was
//     taken by a transaction whose xid is < N.
//   - Once a snapshot's xmin is >= N, all of those transactions have ended, and that
//     snapshot sees every event <= C that will ever exist. The mark moves up to the first
//     unpublished one of them (or C + 1).
// The gaps. Each fetch continues after the last event it returned (the resume point), and
// the values it passed over are this relay's gaps (core/seq_gaps.hpp): an event that had
// not committed yet, or one that never will (its transaction aborted). Everything else below
// the resume point this relay has resolved itself. So a late commit is found by probing the
// gaps, at each move of the mark (which also drops the gaps up to C that hold nothing), and
// never by walking again over what was just published (under a stream of concurrent
// commits, that walk was most of a batch's cost).
// The delivery log. An acknowledged event is not written: its seq goes into one row of
// outbox.deliveries per batch. So a scan that starts again from the mark (a start, a gained
// shard, a failed batch) passes over the events the log holds from the mark up, read once
// when tracking restarts (FetchRequest::delivered); the scan that continues after the resume point
// meets none (everything it sent is below it). A long transaction holds xmin back and so holds the
// mark; nothing is skipped: the gaps are still probed at every check while narrow
// (ScanTracker::kEagerProbeMaxWidth), else every outbox.poll_interval. Events waiting for a retry
// have next_attempt_at set and their own partial index; they do not hold the mark. docs/design.md,
// "The low-water mark", gives the proof.
#include <algorithm>

#include "relay/low_water.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "utils/xid8.h"
}

namespace outbox::pg::relay {
namespace {

// The events waiting in the gaps, read over a cover of them ([$1[i], $2[i]]: a gap, or
// several merged with the resolved values between them), at most $3 per cover interval,
// with its number; by interval, and by seq within each (the intervals are sorted and
// disjoint, so by seq overall). Only what lies in a gap ($4: the exact gaps) counts: a
// resolved value may hold an event this relay sent, which no row says. Every partition but
// the sealed ones is read (no part_at bound of its own): what this finds decides how far
// the mark moves. The %s of this and kLowWaterSql is the sealed partitions' predicate
// (seal.cpp): every event in those is published or dead-lettered.
constexpr const char* kProbeGapsSql =
    "SELECT g.i, e.seq "
    "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) WITH ORDINALITY "
    "       AS g(lo, hi, i) "
    "  CROSS JOIN LATERAL ( "
    "    SELECT seq FROM outbox.events "
    "     WHERE seq >= g.lo AND seq <= g.hi AND published_at IS NULL AND dead_at IS NULL "
    "       AND next_attempt_at IS NULL AND seq OPERATOR(pg_catalog.<@) $4 %s"
    "     ORDER BY seq LIMIT $3) e "
    " ORDER BY g.i, e.seq";
constexpr Oid kProbeGapsTypes[4] = {INT8ARRAYOID, INT8ARRAYOID, INT8OID, INT8MULTIRANGEOID};
// The highest sequence value handed out so far; whether the sequence caches values (then a
// value below it can still be handed out later, and the mark must not move); and its file
// (a new one after ALTER SEQUENCE ... RESTART or TRUNCATE ... RESTART IDENTITY).
constexpr const char* kSequenceSql =
    "SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END, p.seqcache, "
    "       pg_catalog.pg_relation_filenode('outbox.events_seq'::pg_catalog.regclass) "
    "  FROM outbox.events_seq s, pg_catalog.pg_sequence p "
    " WHERE p.seqrelid = 'outbox.events_seq'::pg_catalog.regclass";
// NULL while a transaction older than next xid $1 runs; else the first new unpublished
// event in [$2, $3] (past the resume point), or $3 + 1.
constexpr const char* kLowWaterSql =
    "SELECT CASE WHEN pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot()) >= $1 "
    "  THEN coalesce((SELECT min(seq) FROM outbox.events "
    "                  WHERE seq >= $2 AND seq <= $3 AND published_at IS NULL "
    "                    AND dead_at IS NULL AND next_attempt_at IS NULL %s), $3 + 1) END";
// How often the mark is moved and saved. Between moves the scan starts a little lower.
constexpr int64 kLowWaterCheckUs = 10 * 1000;
constexpr int64 kLowWaterSaveUs = 1000 * 1000;

}  // namespace

LowWater::LowWater(const Ownership& ownership, const Sealer& sealer)
    : ownership_(ownership), sealer_(sealer) {}

void LowWater::advance(TimestampTz now) {
  move(now);
  if (tracker_.delivered_stale()) read_delivered();
}

// Its PostgreSQL calls run under guard(); the gaps (C++ containers) are changed outside it.
void LowWater::move(TimestampTz now) {
  if (!tracker_.mark_known()) tracker_.start_from(guard([&] { return read_mark(); }));
  check_plans();
  if (horizon_valid_ && now - low_water_checked_at_ < kLowWaterCheckUs) {
    check_skipped_ = true;
    return;
  }
  check_skipped_ = false;
  low_water_checked_at_ = now;
  if (horizon_valid_) {
    // NULL while a transaction that may still commit events <= C runs.
    bool passed = false;
    const int64 tail = guard([&] { return first_new_after_resume_point(passed); });
    if (!passed) {
      // Nothing can be dropped, but what committed late in the gaps is sent. Narrow gaps
      // (the usual case: a few commits in flight, the long transaction's own events) are
      // probed at every check; wide ones, which may cover many published rows, every
      // poll_interval.
      const std::vector<SeqGaps::Interval> cover = tracker_.probe_cover();
      if (now >= gap_probe_at_ || ScanTracker::narrow(cover)) probe_gaps(now, -1, cover);
      return;
    }
    // Everything up to C is now visible: a gap up to C holds an event now or never. The
    // mark moves up to the tail, not past the first gap left.
    probe_gaps(now, horizon_seq_, tracker_.probe_cover());
    tracker_.move_mark(tail);
    horizon_valid_ = false;
  } else if (now >= gap_probe_at_) {
    probe_gaps(now, -1, tracker_.probe_cover());
  }
  if (guard([&] { return read_horizon(); })) tracker_.restart_tracking();
}

// Runs inside guard(): the saved marks of the owned shards (the least of them), when the
// relay starts, gained shards or the extension came back.
int64 LowWater::read_mark() {
  const char* sql = psprintf(
      "SELECT (SELECT pg_catalog.min(low_water) FROM outbox.relay_shards "
      "         WHERE shard OPERATOR(pg_catalog.=) ANY ('%s'::pg_catalog.int4[])), "
      "       (SELECT seq_filenode FROM outbox.relay_state)",
      ownership_.literal().c_str());
  int rc = SPI_execute(sql, true, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1) {
    elog(ERROR, "outbox relay: reading outbox.relay_shards failed");
  }
  int64 mark = 0;
  sequence_filenode_ = InvalidOid;
  bool isnull;
  Datum value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  if (!isnull) mark = DatumGetInt64(value);
  value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
  if (!isnull) sequence_filenode_ = DatumGetObjectId(value);
  low_water_saved_ = mark;
  sequence_filenode_saved_ = sequence_filenode_;
  return mark;
}

// Runs inside guard(). With the horizon passed (passed = true): the first new unpublished
// event past the resume point up to C, or C + 1.
int64 LowWater::first_new_after_resume_point(bool& passed) {
  if (low_water_plan_ == nullptr) {
    Oid types[3] = {XID8OID, INT8OID, INT8OID};
    low_water_plan_ = prepare_kept(psprintf(kLowWaterSql, scope_.c_str()), 3, types);
  }
  // Below the resume point only the gaps can hold an event; past it, the first one.
  const int64 tail_from = tracker_.fetch_from();
  Datum params[3] = {FullTransactionIdGetDatum(horizon_xid_), Int64GetDatum(tail_from),
                     Int64GetDatum(horizon_seq_)};
  int rc = SPI_execute_plan(low_water_plan_, params, nullptr, false, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1) {
    elog(ERROR, "outbox relay: computing the low-water mark failed");
  }
  bool isnull;
  Datum tail = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  passed = !isnull;
  return passed ? DatumGetInt64(tail) : 0;
}

// Runs inside guard(). The next horizon: C, then N. True when the sequence was reset (the
// scan must start from the bottom).
bool LowWater::read_horizon() {
  if (sequence_plan_ == nullptr) sequence_plan_ = prepare_kept(kSequenceSql, 0, nullptr);
  int rc = SPI_execute_plan(sequence_plan_, nullptr, nullptr, false, 1);
  if (rc != SPI_OK_SELECT || SPI_processed != 1) {
    elog(ERROR, "outbox relay: reading outbox.events_seq failed");
  }
  bool isnull;
  const int64 last =
      DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  const int64 cache =
      DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
  const Oid filenode =
      DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
  if (cache != 1) {
    if (!warned_sequence_cache_) {
      ereport(WARNING, (errmsg("outbox relay: outbox.events_seq caches %ld values; the "
                               "low-water mark stays at %ld",
                               static_cast<long>(cache), static_cast<long>(tracker_.mark())),
                        errhint("ALTER SEQUENCE outbox.events_seq CACHE 1")));
      warned_sequence_cache_ = true;
    }
    return false;
  }
  const bool new_file = OidIsValid(sequence_filenode_) && filenode != sequence_filenode_;
  const bool reset = tracker_.sequence_went_back(last) || new_file;
  if (reset) {
    // Someone reset the sequence (setval, ALTER SEQUENCE ... RESTART, TRUNCATE ...
    // RESTART IDENTITY): new events would sit below the mark. Start from the bottom.
    ereport(WARNING, (errmsg("outbox relay: outbox.events_seq was reset (now at %ld, the "
                             "low-water mark was %ld); scanning the queue from the start",
                             static_cast<long>(last), static_cast<long>(tracker_.mark()))));
    tracker_.sequence_reset();
    low_water_saved_at_ = 0;
    // New events now take seqs the delivery log may name: forget it. What it held looks
    // undelivered again, and is sent again (at least once holds; docs/operations.md).
    if (SPI_execute("DELETE FROM outbox.deliveries", false, 0) != SPI_OK_DELETE) {
      elog(ERROR, "outbox relay: emptying the delivery log failed");
    }
  }
  sequence_filenode_ = filenode;
  horizon_seq_ = last;
  horizon_xid_ = ReadNextFullTransactionId();
  horizon_valid_ = true;
  return reset;
}

// Finds the events waiting in the gaps (late commits), read over `cover` (the tracker's
// probe_cover()): the next fetch takes them. With upto >= 0 (the horizon passed C = upto), a
// gap up to C that holds no event now never will, and is dropped (ScanTracker::probed()).
void LowWater::probe_gaps(TimestampTz now, int64 upto,
                          const std::vector<SeqGaps::Interval>& cover) {
  gap_probe_at_ = now + static_cast<int64>(settings.poll_interval_ms) * 1000;
  const int64 limit = settings.batch_size;
  // The query under guard(), its rows copied into palloc'd arrays (interval number, seq).
  ScanTracker::Found rows{nullptr, nullptr, 0};
  if (!tracker_.gaps().empty()) {
    const auto& exact = tracker_.gaps().intervals();
    const int n = static_cast<int>(cover.size());
    rows = guard([&] {
      if (probe_plan_ == nullptr) {
        probe_plan_ = prepare_kept(psprintf(kProbeGapsSql, scope_.c_str()), 4, kProbeGapsTypes);
      }
      Datum params[4];
      int8_bounds(cover.data(), n, params[0], params[1]);
      params[2] = Int64GetDatum(limit);
      params[3] = int8_multirange(exact.data(), static_cast<int>(exact.size()));
      // Not read-only: it needs a snapshot of its own, taken after the horizon passed.
      if (SPI_execute_plan(probe_plan_, params, nullptr, false, 0) != SPI_OK_SELECT) {
        elog(ERROR, "outbox relay: probing the gaps failed");
      }
      int64* index = static_cast<int64*>(palloc(sizeof(int64) * (SPI_processed + 1)));
      int64* seq = static_cast<int64*>(palloc(sizeof(int64) * (SPI_processed + 1)));
      for (uint64 r = 0; r < SPI_processed; ++r) {
        bool isnull;
        HeapTuple row = SPI_tuptable->vals[r];
        index[r] = DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull));
        seq[r] = DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull));
      }
      return ScanTracker::Found{index, seq, SPI_processed};
    });
  }
  tracker_.probed(cover, rows, limit, upto);
}

// Once a second: the mark of each owned shard, if it moved, and the least mark of all shards
// (outbox.relay_state.low_water: what rotate(), DROP EXTENSION and outbox.status rely on, and
// what sealing relies on). The row locks are held only until the commit that follows; each
// shard's row is written by its owner only.
void LowWater::save(TimestampTz now) {
  const int64 mark = tracker_.mark();
  if (mark < 0 || now - low_water_saved_at_ < kLowWaterSaveUs) return;
  low_water_saved_at_ = now;
  const shards::Mask owned = ownership_.owned();
  if (mark != low_water_saved_ && owned != 0) {
    Oid types[1] = {INT8OID};
    Datum params[1] = {Int64GetDatum(mark)};
    const char* sql = psprintf(
        "UPDATE outbox.relay_shards SET low_water = $1, updated_at = pg_catalog.now() "
        " WHERE shard OPERATOR(pg_catalog.=) ANY ('%s'::pg_catalog.int4[])",
        ownership_.literal().c_str());
    if (SPI_execute_with_args(sql, 1, types, params, nullptr, false, 0) != SPI_OK_UPDATE) {
      elog(ERROR, "outbox relay: saving the low-water mark failed");
    }
    low_water_saved_ = mark;
  }
  if (floor_plan_ == nullptr) {
    floor_plan_ =
        prepare_kept("SELECT pg_catalog.min(low_water) FROM outbox.relay_shards", 0, nullptr);
  }
  if (SPI_execute_plan(floor_plan_, nullptr, nullptr, false, 1) != SPI_OK_SELECT ||
      SPI_processed != 1) {
    elog(ERROR, "outbox relay: reading outbox.relay_shards failed");
  }
  bool isnull;
  const Datum least = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  saved_floor_ = isnull ? 0 : DatumGetInt64(least);
  if (save_plan_ == nullptr) {
    Oid types[2] = {INT8OID, OIDOID};
    save_plan_ = prepare_kept(
        "UPDATE outbox.relay_state SET low_water = $1, seq_filenode = $2, "
        "       updated_at = pg_catalog.now() "
        " WHERE low_water IS DISTINCT FROM $1 OR seq_filenode IS DISTINCT FROM $2",
        2, types);
  }
  Datum params[2] = {Int64GetDatum(saved_floor_), ObjectIdGetDatum(sequence_filenode_)};
  const char nulls[2] = {' ', OidIsValid(sequence_filenode_) ? ' ' : 'n'};
  if (SPI_execute_plan(save_plan_, params, nulls, false, 0) != SPI_OK_UPDATE) {
    elog(ERROR, "outbox relay: saving the low-water mark failed");
  }
  sequence_filenode_saved_ = sequence_filenode_;
}

int64 LowWater::floor_for_sealing() {
  if (!tracker_.mark_known()) tracker_.start_from(guard([&] { return read_mark(); }));
  // Owning every shard (one worker), its own mark holds for all.
  if (ownership_.owned() == shards::kAll) return tracker_.mark();
  return saved_floor_;
}

void LowWater::check_plans() {
  if (scope_made_ && plans_scope_ == scope_versions()) return;
  scope_ = sealer_.predicate() + ownership_.predicate();
  scope_made_ = true;
  guard([&] {
    for (SPIPlanPtr* plan : {&low_water_plan_, &probe_plan_, &late_keys_plan_}) {
      if (*plan != nullptr) SPI_freeplan(*plan);
      *plan = nullptr;
    }
  });
  plans_scope_ = scope_versions();
}

TimestampTz LowWater::idle_due(bool owns) const {
  if (!tracker_.mark_known() || tracker_.delivered_stale() || !horizon_valid_) return 0;
  // Gaps (a long transaction holds the horizon back) are probed as before.
  if (!tracker_.gaps().empty()) return low_water_checked_at_ + kLowWaterCheckUs;
  // The horizon may pass: the mark moves up to it at the next check.
  if (tracker_.mark() <= horizon_seq_) return low_water_checked_at_ + kLowWaterCheckUs;
  const bool unsaved = (owns && tracker_.mark() != low_water_saved_) ||
                       sequence_filenode_ != sequence_filenode_saved_;
  return unsaved ? low_water_saved_at_ + kLowWaterSaveUs : DT_NOEND;
}

TimestampTz LowWater::skipped_check_due() const {
  return check_skipped_ && !tracker_.gaps().empty() ? low_water_checked_at_ + kLowWaterCheckUs : 0;
}

}  // namespace outbox::pg::relay
