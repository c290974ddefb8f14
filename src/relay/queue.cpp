// The relay's statements on outbox.events. A batch:
//   SELECT ... WHERE seq >= <low-water mark> AND published_at IS NULL ... ORDER BY seq
//     LIMIT n   (plus the retries due, the late events)
//   -> the sink (pipeline.cpp)
//   -> UPDATE <partition> SET published_at = ... WHERE ctid = ANY(...)
// Failed events wait for a retry or are dead-lettered (holds.cpp).
#include <algorithm>

#include "relay/relay.hpp"

#include "pg/boundary.hpp"
#include "pg/settings.hpp"
#include "pg/spi.hpp"

extern "C" {
#include "utils/array.h"
}

namespace outbox::pg::relay {
namespace {

// What every fetch returns, in the order receive_row() (rows.cpp) reads it.
#define OUTBOX_FETCH_COLUMNS                                                              \
  "SELECT tableoid, ctid, id::text, aggregatetype::text, aggregateid::text, type::text, " \
  "       payload, headers, attempts, created_at, seq, xmin "
#define OUTBOX_FETCH_FROM OUTBOX_FETCH_COLUMNS "  FROM outbox.events "

// New events, from the low-water mark up ($2), in insert order (index events_queue).
//
// $2 is normally above the mark: after the last event fetched (the resume point). A row
// that commits late below it is in the gaps (low_water.cpp), and fetched by kFetchLateSql.
constexpr const char* kFetchNewSql = OUTBOX_FETCH_FROM
    " WHERE seq >= $2 AND published_at IS NULL AND dead_at IS NULL AND next_attempt_at IS NULL "
    "   AND part_at < $3 %s"
    " ORDER BY seq LIMIT $1";
// Every statement here has a %s for the sealed partitions' predicate (seal.cpp).
//
// $3 is a minute from now: no event can be in a partition that starts later (part_at is
// the enqueue's clock, at most), so the executor prunes the premade future partitions
// instead of starting an index scan on each of them for every batch. If the clock stepped
// back by more, such an event waits; the low-water mark, which reads every partition that is
// not sealed, does not pass it.
constexpr int64 kFuturePartitionsAfterUs = 60 * USECS_PER_SEC;
constexpr Oid kFetchNewTypes[3] = {INT8OID, INT8OID, TIMESTAMPTZOID};
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
// With some of the shards only (several workers): every shard's events that follow the
// resume point (the sealed partitions' predicate only), in one scan; the receiver (rows.cpp)
// copies this relay's waiting ones and notes the seq of the others. The other shards'
// events it passed are then known, and do not become gaps to probe.
//
// Every visible event counts, waiting or not: one another worker has published since is
// accounted for too, not left as a gap that probes read again (a gap is then only a value
// whose transaction had not committed).
constexpr const char* kScanNewSql = OUTBOX_FETCH_COLUMNS
    "     , published_at IS NULL AND dead_at IS NULL AND next_attempt_at IS NULL "
    "  FROM outbox.events "
    " WHERE seq >= $2 AND part_at < $3 %s"
    " ORDER BY seq LIMIT $1";
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
  ParamListInfo params = makeParamList(nparams);
  for (int i = 0; i < nparams; ++i) {
    params->params[i] = {values[i], false, PARAM_FLAG_CONST, types[i]};
  }
  SPIExecuteOptions options{};
  options.params = params;
  options.dest = &receiver.dest;
  if (SPI_execute_plan_extended(plan, &options) < 0) {
    elog(ERROR, "outbox relay: fetching events failed");
  }
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
void Queue::fetch(Batch& batch, bool first_of_transaction, LowWater& mark) {
  const TimestampTz now = guard([&] { return GetCurrentTimestamp(); });
  if (first_of_transaction) mark.advance(now);
  guard([&] {
    if (fetch_new_plan_ != nullptr && plans_version_ != mark.scope_version()) {
      for (SPIPlanPtr* plan : {&fetch_new_plan_, &fetch_retry_plan_, &fetch_late_plan_,
                               &holds_plan_, &scan_new_plan_}) {
        if (*plan != nullptr) SPI_freeplan(*plan);
        *plan = nullptr;
      }
    }
  });
  if (fetch_new_plan_ == nullptr) {
    const std::string scope = mark.scope();
    const std::string sealed = mark.sealed_scope();
    const char* sql = scope.c_str();
    guard([&] {
      scan_new_plan_ = prepare_kept(psprintf(kScanNewSql, sealed.c_str()), 3, kFetchNewTypes);
      fetch_new_plan_ = prepare_kept(psprintf(kFetchNewSql, sql), 3, kFetchNewTypes);
      fetch_retry_plan_ = prepare_kept(psprintf(kFetchRetrySql, sql), 2, kFetchRetryTypes);
      fetch_late_plan_ = prepare_kept(psprintf(kFetchLateSql, sql), 3, kFetchLateTypes);
      holds_plan_ = prepare_kept(psprintf(kHoldsSql, sql), 0, nullptr);
    });
    plans_version_ = mark.scope_version();
  }
  // Before the retries: which keys they hold back, exact as of now. Only this relay makes
  // retries in its shards, so with no hold known, and none to learn (a start, a gained
  // shard), there is nothing to read.
  const bool check_retries = first_of_transaction && now >= retry_check_at_;
  if (check_retries && (holds_stale_ || !holds_.empty())) {
    load_holds();
    holds_stale_ = false;
  }
  // Where each kind of row starts in the batch: retries, late events, new events.
  int late_from = 0;
  bool retries_cut = false;  // due retries left for the next fetch
  int new_from = 0;
  bool late_tried = false;
  // New events continue after the resume point; what they pass over becomes gaps.
  const int64 start = mark.fetch_from();
  const shards::Mask owned = mark.owned();
  Scanned scanned{nullptr, 0, start - 1, false};
  const std::vector<int64>& late = mark.late();
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
      const bool more_due = out.count == retry_limit || bytes >= max_bytes;
      retries_cut = more_due;
      const int64 poll_us = static_cast<int64>(settings.poll_interval_ms) * 1000;
      // Keys on schedules of their own would make every pass a look (and a read of the
      // holds): due retries are gathered for at least half of retry_backoff_min.
      const int64 gather_us =
          std::min(poll_us, static_cast<int64>(settings.retry_backoff_min_ms) * 1000 / 2);
      retry_check_at_ =
          more_due ? now : std::max(holds_.earliest_at(now + poll_us), now + gather_us);
    }

    const TimestampTz future = now + kFuturePartitionsAfterUs;
    late_from = out.count;
    if (!late.empty() && out.count < limit && bytes < max_bytes) {
      const int n = static_cast<int>(late.size());
      Datum* seqs = static_cast<Datum*>(palloc(sizeof(Datum) * n));
      for (int k = 0; k < n; ++k) seqs[k] = Int64GetDatum(late[k]);
      const Datum params[3] = {Int64GetDatum(limit - out.count), int8_array(seqs, n),
                               TimestampTzGetDatum(future)};
      append_rows(fetch_late_plan_, 3, params, kFetchLateTypes, batch, limit, bytes, max_bytes);
      late_tried = true;
    }

    new_from = out.count;
    if (out.count < limit && bytes < max_bytes) {
      if (owned == shards::kAll) {
        const Datum params[3] = {Int64GetDatum(limit - out.count), Int64GetDatum(start),
                                 TimestampTzGetDatum(future)};
        append_rows(fetch_new_plan_, 3, params, kFetchNewTypes, batch, limit, bytes, max_bytes);
      } else {
        scanned = scan_new(batch, start, future, owned, limit, bytes, max_bytes);
      }
    }
    out.full = out.count == limit || bytes >= max_bytes || scanned.more;
  });
  // No new event goes out before a late one of its key (late_keys.cpp).
  if (out.count > new_from && mark.may_hold_late()) {
    const int kept = keep_before_late(out, new_from, mark);
    if (kept < out.count - new_from) {
      out.count = new_from + kept;
      out.full = true;  // the next fetch comes at once, and takes the late events first
      scanned.more = true;
      scanned.upto = kept > 0 ? out.rows[new_from + kept - 1].seq : start - 1;
      while (scanned.n_others > 0 && scanned.others[scanned.n_others - 1] > scanned.upto) {
        --scanned.n_others;
      }
    }
  }
  // The bookkeeping, outside guard() (it allocates).
  if (owned == shards::kAll) {
    mark.fetched(out.rows + late_from, new_from - late_from, late_tried, out.rows + new_from,
                 out.count - new_from);
  } else {
    mark.fetched(out.rows + late_from, new_from - late_from, late_tried, nullptr, 0);
    mark.scanned(scanned.others, scanned.n_others, out.rows + new_from, out.count - new_from,
                 scanned.upto);
  }
  hold_back(out, retries_cut ? late_from : out.count);
}

// Runs inside guard(): kScanNewSql. Reads up to kShards / owned times the room left (so that
// about that many of its own come), copies its own waiting ones, in seq order, and says up to
// where everything is accounted for: the scanned events that are not its own or not waiting,
// and the copied ones of its own; what lies between them becomes gaps.
Queue::Scanned Queue::scan_new(Batch& batch, int64 start, TimestampTz future, shards::Mask owned,
                               int limit, int64& bytes, int64 max_bytes) {
  const int room = limit - batch.fetched.count;
  const int64 scan_limit =
      static_cast<int64>(room) * shards::kShards / std::max(1, shards::count(owned));
  RowReceiver receiver;
  init_row_receiver(receiver, batch, &payload_scratch_, limit, bytes, max_bytes);
  receiver.owned = owned;
  receiver.others = static_cast<int64*>(palloc(sizeof(int64) * scan_limit));
  receiver.last_seq = start - 1;
  const Datum params[3] = {Int64GetDatum(scan_limit), Int64GetDatum(start),
                           TimestampTzGetDatum(future)};
  run_fetch(scan_new_plan_, 3, params, kFetchNewTypes, receiver);
  bytes = receiver.bytes;
  // Stopped by its room or outbox.batch_max_bytes, or by the LIMIT: more may follow.
  const bool stopped = batch.fetched.count == limit || bytes >= max_bytes;
  return {receiver.others, receiver.n_others, receiver.last_seq,
          stopped || receiver.scanned == scan_limit};
}

// How many of the new events (from new_from) may go out: those before the first whose key
// has a committed event in the gaps that no fetch took yet. Those late events are taken
// first by the next fetch.
int Queue::keep_before_late(const Fetched& out, int new_from, LowWater& mark) {
  const int n_new = out.count - new_from;
  const LowWater::Late late = mark.find_late();
  if (late.count == 0 && late.complete) return n_new;
  mark.take_late_first(late);
  if (!late.complete) return 0;  // keys unknown: none may pass
  KeyHolds keys;
  for (int i = 0; i < late.count; ++i) keys.set(late.types[i], late.ids[i], {late.seqs[i], 0});
  for (int k = 0; k < n_new; ++k) {
    const Row& row = out.rows[new_from + k];
    if (keys.find(row.aggregatetype.view(), row.aggregateid.view()) != nullptr) return k;
  }
  return n_new;
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

// One UPDATE per partition, by ctid: the rows are locked by this transaction, so their
// ctids are stable.
void Queue::mark_acked(const Fetched& batch, const std::vector<sinks::Outcome>& outcomes) {
  boost::container::flat_map<Oid, std::vector<int>> by_partition;
  for (int i = 0; i < batch.count; ++i) {
    if (outcomes[i].delivery == sinks::Delivery::kAcked) {
      by_partition[batch.rows[i].rel].push_back(i);
    }
  }
  if (!transient_.empty()) {
    for (int i = 0; i < batch.count; ++i) {
      const Row& row = batch.rows[i];
      if (outcomes[i].delivery == sinks::Delivery::kAcked) {
        transient_.delivered(row.aggregatetype.view(), row.aggregateid.view());
      }
    }
  }
  const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
  for (const auto& [rel, indexes] : by_partition) {
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
