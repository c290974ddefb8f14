// The relay's statements on outbox.events. A batch:
//   SELECT ... WHERE seq >= <resume point> ... ORDER BY seq LIMIT n
//     (plus the retries due, the late events)
//   -> the sink (pipeline.cpp)
//   -> INSERT INTO outbox.deliveries: one row for the batch, no event row written
// Failed events wait for a retry or are dead-lettered (holds.cpp); a retried event, once
// acknowledged, is marked on its row (it was written anyway).
#include <algorithm>

#include "relay/queue.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "relay/spi.hpp"

extern "C" {
#include "utils/array.h"
}

namespace outbox::pg::relay {
namespace {

#define OUTBOX_FETCH_FROM OUTBOX_FETCH_COLUMNS "  FROM outbox.events "

// Every statement here has a %s for the sealed partitions' predicate (seal.cpp), and all but
// kScanNewSql one for the owned shards too.
//
// $3 is a minute from now: no event can be in a partition that starts later (part_at is
// the enqueue's clock, at most), so the executor prunes the premade future partitions
// instead of starting an index scan on each of them for every batch. If the clock stepped
// back by more, such an event waits; the low-water mark, which reads every partition that is
// not sealed, does not pass it.
constexpr int64 kFuturePartitionsAfterUs = 60 * USECS_PER_SEC;
// Events whose retry time has come (index events_retry).
constexpr const char* kFetchRetrySql = OUTBOX_FETCH_FROM
    " WHERE next_attempt_at <= $2 AND published_at IS NULL AND dead_at IS NULL %s"
    " ORDER BY seq LIMIT $1";
constexpr Oid kFetchRetryTypes[2] = {INT8OID, TIMESTAMPTZOID};
// Late events: the ones a probe of the gaps found ($2).
constexpr const char* kFetchLateSql = OUTBOX_FETCH_FROM
    " WHERE seq = ANY($2) AND published_at IS NULL AND dead_at IS NULL "
    "   AND next_attempt_at IS NULL AND part_at < $3 %s"
    " ORDER BY seq LIMIT $1";
constexpr Oid kFetchLateTypes[3] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};
// The holds of the owned shards (core/key_holds.hpp): each key's earliest event waiting for
// a retry (index events_retry), and its retry time.
constexpr const char* kHoldsSql =
    "SELECT DISTINCT ON (aggregatetype, aggregateid) aggregatetype::text, aggregateid::text, "
    "       seq, next_attempt_at "
    "  FROM outbox.events "
    " WHERE next_attempt_at IS NOT NULL AND published_at IS NULL AND dead_at IS NULL %s"
    " ORDER BY aggregatetype, aggregateid, seq";
// New events, from the resume point up ($2: after the last event fetched, at least the
// low-water mark), in insert order (index events_queue), every shard's in one scan (the
// sealed partitions' predicate only). The receiver (rows.cpp) copies this relay's waiting
// ones and notes the seq of the others: another shard's, one that does not wait, one the
// delivery log holds (FetchRequest::delivered). A row that commits late below the resume
// point is in the gaps (low_water.cpp), and fetched by kFetchLateSql.
//
// Every visible event counts, waiting or not: one already published is accounted for too,
// not left as a gap that probes read again (a gap is then only a value whose transaction
// had not committed).
constexpr const char* kScanNewSql = OUTBOX_FETCH_COLUMNS
    "     , published_at IS NULL AND dead_at IS NULL AND next_attempt_at IS NULL "
    "  FROM outbox.events "
    " WHERE seq >= $2 AND part_at < $3 %s"
    " ORDER BY seq LIMIT $1";
constexpr Oid kScanNewTypes[3] = {INT8OID, INT8OID, TIMESTAMPTZOID};
// The delivery log's row for one batch: its acknowledged events that were not retries (those
// are marked on their rows), one range per run of consecutive seqs (int8_multirange()).
constexpr const char* kLogSql =
    "INSERT INTO outbox.deliveries (delivered_at, seqs) VALUES ($1, $2)";
constexpr Oid kLogTypes[2] = {TIMESTAMPTZOID, INT8MULTIRANGEOID};
// No statement locks rows: a shard's events are this relay's alone (ownership.cpp), and its
// own transactions never overlap. That saves a lock, and its WAL record, per event.
// Marking plans kept per partition, at most.
constexpr size_t kMaxCachedPlans = 128;
// The payload buffer (Queue::payload_scratch_) is given back once a payload grew it past this.
constexpr int kPayloadScratchKeepBytes = 1024 * 1024;

}  // namespace

void Queue::init() {
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  initStringInfo(&payload_scratch_);
  MemoryContextSwitchTo(old);
}

// Runs a fetch plan into `receiver`. Runs inside guard().
void Queue::run_fetch(SPIPlanPtr plan, int nparams, const Datum* values, const Oid* types,
                      RowReceiver& receiver) {
  run_into(plan, nparams, values, nullptr, types, receiver);
  // A payload of many megabytes does not keep its buffer for the relay's lifetime.
  if (payload_scratch_.maxlen > kPayloadScratchKeepBytes) {
    pfree(payload_scratch_.data);
    init();
  }
}

// Runs a fetch plan into the batch until `limit` rows or `max_bytes` of payload. Runs inside
// guard().
void Queue::append_rows(SPIPlanPtr plan, int nparams, const Datum* values, const Oid* types,
                        Batch& batch, int limit, int64& bytes, int64 max_bytes) {
  RowReceiver receiver;
  init_row_receiver(receiver, batch, &payload_scratch_, limit, bytes, max_bytes);
  run_fetch(plan, nparams, values, types, receiver);
  bytes = receiver.bytes;
}

// The later fetches of a transaction only continue after the rows already fetched (they are
// not marked before the batch is acknowledged, and would be returned again).
FetchReport Queue::fetch(Batch& batch, bool first_of_transaction, TimestampTz now,
                         const FetchRequest& request) {
  guard([&] {
    if (scan_new_plan_ != nullptr && plans_scope_ != request.scope_versions) {
      for (SPIPlanPtr* plan :
           {&fetch_retry_plan_, &fetch_late_plan_, &holds_plan_, &scan_new_plan_}) {
        if (*plan != nullptr) SPI_freeplan(*plan);
        *plan = nullptr;
      }
    }
    if (scan_new_plan_ == nullptr) {
      const char* sql = request.scope->c_str();
      scan_new_plan_ =
          prepare_kept(psprintf(kScanNewSql, request.sealed_scope->c_str()), 3, kScanNewTypes);
      fetch_retry_plan_ = prepare_kept(psprintf(kFetchRetrySql, sql), 2, kFetchRetryTypes);
      fetch_late_plan_ = prepare_kept(psprintf(kFetchLateSql, sql), 3, kFetchLateTypes);
      holds_plan_ = prepare_kept(psprintf(kHoldsSql, sql), 0, nullptr);
    }
  });
  plans_scope_ = request.scope_versions;
  // Before the retries: which keys they hold back, exact as of now. Only this relay makes
  // retries in its shards, so with no hold known, and none to learn (a start, a gained
  // shard), there is nothing to read.
  const bool check_retries = first_of_transaction && now >= retry_check_at_;
  if (check_retries && (holds_stale_ || !holds_.empty())) {
    load_holds();
    holds_stale_ = false;
  }
  FetchReport report;
  report.upto = request.from - 1;
  const std::vector<int64>& late = *request.late;
  Fetched& out = batch.fetched;
  guard([&] {
    const int limit = settings.batch_size;
    const int64 max_bytes = settings.batch_max_bytes;
    MemoryContextReset(batch.memory);  // an empty batch was never finished
    out = Fetched{static_cast<Row*>(MemoryContextAllocZero(batch.memory, sizeof(Row) * limit)), 0,
                  false, InvalidXLogRecPtr};
    int64 bytes = 0;

    // Retries first: they are the oldest events. Looked for when one of ours is due, and at
    // least every poll_interval (another worker may have scheduled them). At most half a
    // batch: the events of held keys wait there in numbers, and the new events behind them
    // must still flow (a batch of held keys' retries alone acknowledges nothing).
    if (check_retries) {
      const int retry_limit = std::max(1, limit / 2);
      const Datum params[2] = {Int64GetDatum(retry_limit), TimestampTzGetDatum(now)};
      append_rows(fetch_retry_plan_, 2, params, kFetchRetryTypes, batch, retry_limit, bytes,
                  max_bytes);
      for (int i = 0; i < out.count; ++i) out.rows[i].retried = true;
      const bool more_due = out.count == retry_limit || bytes >= max_bytes;
      report.retries_cut = more_due;
      retries_cut_ = more_due;
      const int64 poll_us = static_cast<int64>(settings.poll_interval_ms) * 1000;
      // Keys on schedules of their own would make every pass a look (and a read of the
      // holds): due retries are gathered for at least half of retry_backoff_min.
      const int64 gather_us =
          std::min(poll_us, static_cast<int64>(settings.retry_backoff_min_ms) * 1000 / 2);
      retry_check_at_ =
          more_due ? now : std::max(holds_.earliest_at(now + poll_us), now + gather_us);
    }

    const TimestampTz future = now + kFuturePartitionsAfterUs;
    report.late_from = out.count;
    if (!late.empty() && out.count < limit && bytes < max_bytes) {
      const int n = static_cast<int>(late.size());
      Datum* seqs = static_cast<Datum*>(palloc(sizeof(Datum) * n));
      for (int k = 0; k < n; ++k) seqs[k] = Int64GetDatum(late[k]);
      const Datum params[3] = {Int64GetDatum(limit - out.count), int8_array(seqs, n),
                               TimestampTzGetDatum(future)};
      append_rows(fetch_late_plan_, 3, params, kFetchLateTypes, batch, limit, bytes, max_bytes);
      report.late_tried = true;
    }

    report.new_from = out.count;
    bool more = false;
    if (out.count < limit && bytes < max_bytes) {
      more = scan_new(batch, request, future, limit, bytes, max_bytes, report);
    }
    out.full = out.count == limit || bytes >= max_bytes || more;
  });
  return report;
}

// Runs inside guard(): kScanNewSql. Reads up to kShards / owned times the room left (so that
// about that many of its own come), copies its own waiting ones that the delivery log does
// not hold, in seq order, and reports up to where everything is accounted for: the scanned
// events it did not copy, and the copied ones; what lies between them becomes gaps. True
// when it stopped at a limit: more may follow.
bool Queue::scan_new(Batch& batch, const FetchRequest& request, TimestampTz future, int limit,
                     int64& bytes, int64 max_bytes, FetchReport& report) {
  const int room = limit - batch.fetched.count;
  const int64 scan_limit =
      static_cast<int64>(room) * shards::kShards / std::max(1, shards::count(request.owned));
  RowReceiver receiver;
  init_row_receiver(receiver, batch, &payload_scratch_, limit, bytes, max_bytes);
  receiver.scan = true;
  receiver.owned = request.owned;
  receiver.delivered = request.delivered;
  receiver.others = static_cast<int64*>(palloc(sizeof(int64) * scan_limit));
  receiver.last_seq = request.from - 1;
  const Datum params[3] = {Int64GetDatum(scan_limit), Int64GetDatum(request.from),
                           TimestampTzGetDatum(future)};
  run_fetch(scan_new_plan_, 3, params, kScanNewTypes, receiver);
  bytes = receiver.bytes;
  report.others = receiver.others;
  report.n_others = receiver.n_others;
  report.upto = receiver.last_seq;
  const bool stopped = batch.fetched.count == limit || bytes >= max_bytes;
  return stopped || receiver.scanned == scan_limit;
}

SPIPlanPtr Queue::partition_plan(boost::container::flat_map<Oid, SPIPlanPtr>& cache, Oid rel,
                                 Update update) {
  auto found = cache.find(rel);
  if (found != cache.end()) return found->second;
  if (cache.size() >= kMaxCachedPlans) {
    // Partitions come and go with rotation; drop plans of old ones now and then.
    guard([&] {
      for (auto& entry : cache) SPI_freeplan(entry.second);
    });
    cache.clear();
  }
  SPIPlanPtr plan = guard([&] {
    const char* name = get_rel_name(rel);
    if (name == nullptr) elog(ERROR, "outbox relay: partition %u disappeared", rel);
    const char* table = quote_qualified_identifier("outbox", name);
    // A generic plan, made once (prepare_kept): the relay runs with enable_seqscan off (see
    // outbox_relay_main), so it is a TID scan even when made while the partition was empty.
    if (update == Update::kPutBack) {
      Oid types[2] = {TIDARRAYOID, TIMESTAMPTZARRAYOID};
      return prepare_kept(psprintf("UPDATE %s t SET next_attempt_at = u.at FROM ROWS FROM "
                                   "(pg_catalog.unnest($1), pg_catalog.unnest($2)) u(tid, at) "
                                   "WHERE t.ctid = u.tid",
                                   table),
                          2, types);
    }
    if (update == Update::kTransient) {
      Oid types[3] = {TIDOID, TEXTOID, TIMESTAMPTZOID};
      return prepare_kept(
          psprintf("UPDATE %s SET last_error = $2, next_attempt_at = $3 WHERE ctid = $1", table), 3,
          types);
    }
    if (update == Update::kRejected) {
      Oid types[4] = {TIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
      return prepare_kept(psprintf("UPDATE %s SET attempts = attempts + 1, last_error = $2, "
                                   "next_attempt_at = $3, dead_at = $4 WHERE ctid = $1",
                                   table),
                          4, types);
    }
    Oid types[2] = {TIMESTAMPTZOID, TIDARRAYOID};
    return prepare_kept(psprintf("UPDATE %s SET published_at = $1, next_attempt_at = NULL "
                                 "WHERE ctid = ANY($2)",
                                 table),
                        2, types);
  });
  cache.emplace(rel, plan);
  return plan;
}

// The acknowledged rows: one row of the delivery log for those that were not retries, and
// one UPDATE per partition, by ctid, for the retries, whose rows carry the retry state this
// clears. Only this relay writes its shards' rows (ownership.cpp): their ctids are stable.
void Queue::mark_acked(const Fetched& batch, const std::vector<sinks::Outcome>& outcomes) {
  boost::container::flat_map<Oid, std::vector<int>> retried;
  std::vector<int64> seqs;
  for (int i = 0; i < batch.count; ++i) {
    if (outcomes[i].delivery != sinks::Delivery::kAcked) continue;
    const Row& row = batch.rows[i];
    if (row.retried) {
      retried[row.rel].push_back(i);
    } else {
      seqs.push_back(row.seq);
    }
    if (!transient_.empty()) transient_.delivered(row.aggregatetype.view(), row.aggregateid.view());
  }
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  if (!seqs.empty()) {
    std::sort(seqs.begin(), seqs.end());
    std::vector<SeqSet::Interval> runs;
    SeqSet::append_runs(seqs.data(), static_cast<int>(seqs.size()), runs);
    const int n = static_cast<int>(runs.size());
    const SeqSet::Interval* data = runs.data();
    guard([&] {
      if (log_plan_ == nullptr) log_plan_ = prepare_kept(kLogSql, 2, kLogTypes);
      Datum params[2] = {TimestampTzGetDatum(now), int8_multirange(data, n)};
      if (SPI_execute_plan(log_plan_, params, nullptr, false, 0) != SPI_OK_INSERT) {
        elog(ERROR, "outbox relay: writing the delivery log failed");
      }
    });
  }
  for (const auto& [rel, indexes] : retried) {
    SPIPlanPtr plan = partition_plan(mark_plans_, rel, Update::kPublished);
    const int n = static_cast<int>(indexes.size());
    const int* index_data = indexes.data();
    guard([&] {
      Datum* tids = static_cast<Datum*>(palloc(sizeof(Datum) * n));
      for (int k = 0; k < n; ++k) tids[k] = PointerGetDatum(&batch.rows[index_data[k]].tid);
      ArrayType* array =
          construct_array(tids, n, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT);
      Datum params[2] = {TimestampTzGetDatum(now), PointerGetDatum(array)};
      int rc = SPI_execute_plan(plan, params, nullptr, false, 0);
      if (rc != SPI_OK_UPDATE || SPI_processed != static_cast<uint64>(n)) {
        elog(ERROR, "outbox relay: marked %lu of %d events published",
             static_cast<unsigned long>(SPI_processed), n);
      }
    });
  }
}

}  // namespace outbox::pg::relay
