// Failed events and held keys. A rejected event, or one that failed transiently while
// others of its batch were delivered, waits for a retry, and its key is held
// (core/key_holds.hpp): the key's later events go back on the retry path behind it, with
// its retry time, and are sent after it in seq order. No attempt is counted for them.
#include <algorithm>

#include "relay/queue.hpp"

#include "core/pacing.hpp"
#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "utils/array.h"

namespace outbox::pg::relay {

// Runs the holds query; the rows are copied out under guard(), the map filled outside it.
void Queue::load_holds() {
  struct Found {
    char** types;
    char** ids;
    int64* seqs;
    TimestampTz* ats;
    uint64 count;
  };
  const Found rows = guard([&] {
    if (SPI_execute_plan(holds_plan_, nullptr, nullptr, false, 0) != SPI_OK_SELECT) {
      elog(ERROR, "outbox relay: reading the held keys failed");
    }
    const uint64 n = SPI_processed;
    Found out{static_cast<char**>(palloc(sizeof(char*) * (n + 1))),
              static_cast<char**>(palloc(sizeof(char*) * (n + 1))),
              static_cast<int64*>(palloc(sizeof(int64) * (n + 1))),
              static_cast<TimestampTz*>(palloc(sizeof(TimestampTz) * (n + 1))), n};
    for (uint64 r = 0; r < n; ++r) {
      HeapTuple tuple = SPI_tuptable->vals[r];
      TupleDesc desc = SPI_tuptable->tupdesc;
      bool isnull;
      out.types[r] = SPI_getvalue(tuple, desc, 1);
      out.ids[r] = SPI_getvalue(tuple, desc, 2);
      out.seqs[r] = DatumGetInt64(SPI_getbinval(tuple, desc, 3, &isnull));
      out.ats[r] = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 4, &isnull));
    }
    return out;
  });
  holds_.clear();
  for (uint64 r = 0; r < rows.count; ++r) {
    holds_.set(rows.types[r], rows.ids[r], {rows.seqs[r], rows.ats[r]});
  }
}

// One UPDATE per partition for the batch: a held key's later events can be many.
void Queue::put_back(const std::vector<PutBack>& rows) {
  boost::container::flat_map<Oid, std::vector<const PutBack*>> by_partition;
  for (const PutBack& row : rows) {
    by_partition[row.rel].push_back(&row);
    retry_check_at_ = std::min(retry_check_at_, row.at);
  }
  for (const auto& [rel, list] : by_partition) {
    SPIPlanPtr plan = partition_plan(put_back_plans_, rel, Update::kPutBack);
    const int n = static_cast<int>(list.size());
    const PutBack* const* data = list.data();
    guard([&] {
      Datum* tids = static_cast<Datum*>(palloc(sizeof(Datum) * n));
      Datum* ats = static_cast<Datum*>(palloc(sizeof(Datum) * n));
      for (int k = 0; k < n; ++k) {
        tids[k] = PointerGetDatum(&data[k]->tid);
        ats[k] = TimestampTzGetDatum(data[k]->at);
      }
      Datum params[2] = {
          PointerGetDatum(
              construct_array(tids, n, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT)),
          PointerGetDatum(construct_array(ats, n, TIMESTAMPTZOID, sizeof(TimestampTz),
                                          FLOAT8PASSBYVAL, TYPALIGN_DOUBLE))};
      if (SPI_execute_plan(plan, params, nullptr, false, 0) != SPI_OK_UPDATE ||
          SPI_processed != static_cast<uint64>(n)) {
        elog(ERROR, "outbox relay: putting events back behind their keys failed");
      }
    });
  }
}

void Queue::hold_back(Fetched& out, int behind_all_from) {
  if (holds_.empty() || out.count == 0) return;
  std::vector<KeyHolds::Key> keys(out.count);
  std::vector<int64_t> seqs(out.count);
  for (int i = 0; i < out.count; ++i) {
    keys[i] = {out.rows[i].aggregatetype.view(), out.rows[i].aggregateid.view()};
    seqs[i] = out.rows[i].seq;
  }
  std::vector<int64_t> wait = holds_.decide(keys, seqs);
  // Due retries were left for the next fetch: a held key's later events there must not be
  // overtaken, so its rows from `behind_all_from` on wait too.
  for (int i = behind_all_from; i < out.count; ++i) {
    if (wait[i] >= 0) continue;
    const KeyHolds::Hold* hold =
        holds_.find(out.rows[i].aggregatetype.view(), out.rows[i].aggregateid.view());
    if (hold != nullptr && hold->seq < out.rows[i].seq) wait[i] = hold->at;
  }
  std::vector<PutBack> back;
  int kept = 0;
  for (int i = 0; i < out.count; ++i) {
    if (wait[i] >= 0) {
      back.push_back({out.rows[i].rel, out.rows[i].tid, wait[i]});
    } else {
      out.rows[kept++] = out.rows[i];
    }
  }
  out.count = kept;
  if (!back.empty()) put_back(back);
}

bool Queue::defer(const Fetched& batch, const std::vector<sinks::Outcome>& outcomes) {
  bool resolved = true;
  std::vector<PutBack> back;
  for (int i = 0; i < batch.count; ++i) {
    if (outcomes[i].delivery != sinks::Delivery::kDeferred) continue;
    const Row& row = batch.rows[i];
    const KeyHolds::Hold* hold = holds_.find(row.aggregatetype.view(), row.aggregateid.view());
    if (hold != nullptr && hold->seq < row.seq) {
      back.push_back({row.rel, row.tid, hold->at});
    } else {
      resolved = false;  // its blocker was not rejected (unavailable): sent again from the mark
    }
  }
  if (!back.empty()) put_back(back);
  return resolved;
}

// One attempt more and a later retry, or the dead letters (then next_attempt_at is
// cleared: it leaves the retry index).
bool Queue::mark_rejected(const Row& row, const std::string& error) {
  const bool dead = row.attempts + 1 >= settings.max_attempts;
  // No jitter: one relay fetches the due retries together anyway (docs/reference.md).
  const int delay_ms = pacing::backoff_ms(settings.retry_backoff_min_ms,
                                          settings.retry_backoff_max_ms, row.attempts + 1);
  SPIPlanPtr plan = partition_plan(reject_plans_, row.rel, Update::kRejected);
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  const TimestampTz retry_at = now + static_cast<TimestampTz>(delay_ms) * 1000;
  guard([&] {
    Datum params[4] = {PointerGetDatum(&row.tid), CStringGetTextDatum(error.c_str()),
                       TimestampTzGetDatum(retry_at), TimestampTzGetDatum(now)};
    const char nulls[4] = {' ', ' ', dead ? 'n' : ' ', dead ? ' ' : 'n'};
    int rc = SPI_execute_plan(plan, params, nulls, false, 0);
    if (rc != SPI_OK_UPDATE) elog(ERROR, "outbox relay: recording a rejection failed");
  });
  // A dead letter releases its key's later events: they are due now, and the holds are read
  // again before they are fetched.
  hold_key(row, dead ? now : retry_at);
  return dead;
}

void Queue::mark_transient(const Row& row, const std::string& error) {
  const int failures = transient_.failed(row.aggregatetype.view(), row.aggregateid.view());
  const int delay_ms =
      pacing::backoff_ms(settings.retry_backoff_min_ms, settings.retry_backoff_max_ms, failures);
  SPIPlanPtr plan = partition_plan(transient_plans_, row.rel, Update::kTransient);
  const TimestampTz retry_at =
      guard([] { return GetCurrentTimestamp(); }) + static_cast<TimestampTz>(delay_ms) * 1000;
  guard([&] {
    Datum params[3] = {PointerGetDatum(&row.tid), CStringGetTextDatum(error.c_str()),
                       TimestampTzGetDatum(retry_at)};
    if (SPI_execute_plan(plan, params, nullptr, false, 0) != SPI_OK_UPDATE || SPI_processed != 1) {
      elog(ERROR, "outbox relay: recording a transient failure failed");
    }
  });
  hold_key(row, retry_at);
}

// The key's later events wait for this one until `due`.
void Queue::hold_key(const Row& row, TimestampTz due) {
  holds_.failed(row.aggregatetype.view(), row.aggregateid.view(), {row.seq, due});
  retry_check_at_ = std::min(retry_check_at_, due);
}

}  // namespace outbox::pg::relay
