// Late commits and per-key order. A transaction that commits after the scan
// passed its events leaves them in the gaps, and a probe finds them later. Meanwhile a
// newer event of the same key, above the resume point, could be fetched and sent first:
// a transaction of that key that committed after the late one (they serialise on the key),
// or the late transaction's own later events. So after each fetch of new events the relay
// looks, with a snapshot taken after the fetch's, for committed events in the gaps that no
// fetch of this transaction took. The new events from the first one whose key is among
// theirs are dropped from the batch (the scan resumes before it), and the next fetch takes
// the late events first. A transaction that commits after this look committed after every
// event of the batch, so for keys whose transactions serialise it is the later one anyway.
#include <algorithm>

#include "relay/low_water.hpp"

#include "core/key_holds.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "relay/spi.hpp"

namespace outbox::pg::relay {
namespace {

// The committed, unpublished events of the owned shards in the gaps ($5: exact; read
// over their cover [$1[i], $2[i]], as LowWater::probe_gaps() does), at most $3 per cover
// interval, that are not in $4 (taken by this transaction already), by seq.
constexpr const char* kLateKeysSql =
    "SELECT e.seq, e.aggregatetype::text, e.aggregateid::text, g.i "
    "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) WITH ORDINALITY "
    "       AS g(lo, hi, i) "
    "  CROSS JOIN LATERAL ( "
    "    SELECT seq, aggregatetype, aggregateid FROM outbox.events "
    "     WHERE seq >= g.lo AND seq <= g.hi AND published_at IS NULL AND dead_at IS NULL "
    "       AND next_attempt_at IS NULL AND seq <> ALL ($4) "
    "       AND seq OPERATOR(pg_catalog.<@) $5 %s"
    "     ORDER BY seq LIMIT $3) e "
    " ORDER BY e.seq";
constexpr Oid kLateKeysTypes[5] = {INT8ARRAYOID, INT8ARRAYOID, INT8OID, INT8ARRAYOID,
                                   INT8MULTIRANGEOID};
// A cover of at most this many intervals (LowWater::probe_gaps() says why).
constexpr std::size_t kMaxLateIntervals = 64;

}  // namespace

LowWater::Late LowWater::find_late() {
  Late late{nullptr, nullptr, nullptr, 0, true};
  // The gaps, and what this transaction's fetches passed over.
  SeqGaps with_passed;
  const SeqGaps& where = tracker_.late_area(with_passed);
  if (where.empty()) return late;
  const std::vector<SeqGaps::Interval> cover = where.cover(kMaxLateIntervals);
  const auto& exact = where.intervals();
  const int n = static_cast<int>(cover.size());
  const int n_taken = static_cast<int>(tracker_.late_fetched().size());
  const int64* taken = tracker_.late_fetched().data();
  const int64 per_interval = settings.batch_size;
  guard([&] {
    if (late_keys_plan_ == nullptr) {
      late_keys_plan_ = prepare_kept(psprintf(kLateKeysSql, scope_.c_str()), 5, kLateKeysTypes);
    }
    Datum* excluded = static_cast<Datum*>(palloc(sizeof(Datum) * (n_taken + 1)));
    for (int k = 0; k < n_taken; ++k) excluded[k] = Int64GetDatum(taken[k]);
    Datum params[5];
    int8_bounds(cover.data(), n, params[0], params[1]);
    params[2] = Int64GetDatum(per_interval);
    params[3] = int8_array(excluded, n_taken);
    params[4] = int8_multirange(exact.data(), static_cast<int>(exact.size()));
    if (SPI_execute_plan(late_keys_plan_, params, nullptr, false, 0) != SPI_OK_SELECT) {
      elog(ERROR, "outbox relay: looking for late events failed");
    }
    const uint64 rows = SPI_processed;
    late.seqs = static_cast<int64*>(palloc(sizeof(int64) * (rows + 1)));
    late.types = static_cast<char**>(palloc(sizeof(char*) * (rows + 1)));
    late.ids = static_cast<char**>(palloc(sizeof(char*) * (rows + 1)));
    int* per = static_cast<int*>(palloc0(sizeof(int) * (n + 1)));
    for (uint64 r = 0; r < rows; ++r) {
      HeapTuple tuple = SPI_tuptable->vals[r];
      TupleDesc desc = SPI_tuptable->tupdesc;
      bool isnull;
      late.seqs[r] = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
      late.types[r] = SPI_getvalue(tuple, desc, 2);
      late.ids[r] = SPI_getvalue(tuple, desc, 3);
      const int64 i = DatumGetInt64(SPI_getbinval(tuple, desc, 4, &isnull));
      // An interval that gave its limit may hold more, whose keys are unknown.
      if (++per[i] >= per_interval) late.complete = false;
    }
    late.count = static_cast<int>(rows);
  });
  return late;
}

// After a fetch: the new events from the first whose key has a committed event in the gaps
// that no fetch took yet stay out of the batch, and the next fetch takes those late events
// first. The scan then resumes before the first new event left out.
void LowWater::keep_before_late(Fetched& out, FetchReport& report, const int64* new_seqs) {
  const int n_new = out.count - report.new_from;
  if (!tracker_.looks_for_late(n_new)) return;
  const Late late = find_late();
  if (late.count == 0 && late.complete) return;
  tracker_.found_late(late.seqs, late.count, settings.batch_size);
  int kept = 0;  // with the keys unknown (incomplete), none may pass
  if (late.complete) {
    KeyHolds keys;
    for (int i = 0; i < late.count; ++i) keys.set(late.types[i], late.ids[i], {late.seqs[i], 0});
    for (; kept < n_new; ++kept) {
      const Row& row = out.rows[report.new_from + kept];
      if (keys.find(row.aggregatetype.view(), row.aggregateid.view()) != nullptr) break;
    }
  }
  if (kept == n_new) return;
  out.count = report.new_from + kept;
  out.full = true;  // the next fetch comes at once, and takes the late events first
  const ScanTracker::Cut cut = tracker_.cut_scan(new_seqs, kept, report.others, report.n_others);
  report.upto = cut.upto;
  report.n_others = cut.n_others;
}

}  // namespace outbox::pg::relay
