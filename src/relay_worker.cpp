// The relay: a background worker that sends unpublished events through the configured sink
// and marks them published once the sink has acknowledged them.
//
// A batch:
//   SELECT ... WHERE seq >= <low-water mark> AND published_at IS NULL ... ORDER BY seq
//     LIMIT n FOR UPDATE SKIP LOCKED   (plus, now and then, the events due for a retry)
//   -> sink.start(batch) ... sink.finish()
//   -> UPDATE <partition> SET published_at = ... WHERE ctid = ANY(...)
// and a transaction is one batch, or, while batches come full (a backlog), up to
// kMaxBatchesPerTransaction of them, pipelined: the next batch is fetched and started while
// the sink waits for the acknowledgements of the one before. Then COMMIT.
// A crash anywhere before COMMIT releases the rows and they are sent again: at least once.
// Back-off happens with no transaction open.
//
// The low-water mark. Every event with seq below it is published or dead-lettered, so the
// scan starts there, and no index has to mention published_at: marking is a heap-only
// update (partitions keep free space on each page, outbox.partition_fillfactor). The mark
// is not "id > last_id", which loses late commits: it only passes a value once no
// transaction that could still commit an event at or below it is running.
//   - outbox._next_seq() gives a transaction its xid before its sequence value.
//   - The relay reads the sequence (C) and then the next xid (N): every value <= C was
//     taken by a transaction whose xid is < N.
//   - Once a snapshot's xmin is >= N, all of those transactions have ended, and that
//     snapshot sees every event <= C that will ever exist. The mark moves up to the first
//     unpublished one of them (or C + 1).
// The gaps. Each fetch continues after the last event it returned (the resume point), and
// the values it passed over are this relay's gaps (core/seq_gaps.hpp): an event that had
// not committed yet, one that never will (its transaction aborted), or one that another
// worker held. Everything else below the resume point this relay has resolved itself. So a
// late commit is found by probing the gaps, at each move of the mark (which also drops the
// gaps up to C that hold nothing), and never by walking again over what was just published
// (under a stream of concurrent commits, that walk was most of a batch's cost).
// A long transaction holds xmin back and so holds the mark; nothing is skipped: the gaps
// are still probed at every check while narrow (kEagerProbeMaxWidth), else every
// outbox.poll_interval. Events waiting for a retry have
// next_attempt_at set and their own partial index; they do not hold the mark.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "core/seq_gaps.hpp"
#include "pg/boundary.hpp"
#include "pg/durability.hpp"
#include "pg/jsonb_object.hpp"
#include "pg/jsonb_text.hpp"
#include "pg/relay_shmem.hpp"
#include "pg/settings.hpp"
#include "pg/sink_loader.hpp"
#include "sinks/sink.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "access/transam.h"
#include "commands/extension.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"
#include "utils/wait_event.h"
}

extern "C" {
PGDLLEXPORT void outbox_relay_main(Datum arg);
}

namespace outbox::pg {
namespace {

// What every fetch returns, in the order receive_row() reads it. The payload comes as
// jsonb: receive_row() writes its text (payload_text()), faster than payload::text would.
#define OUTBOX_FETCH_FROM                                                                 \
  "SELECT tableoid, ctid, id::text, aggregatetype::text, aggregateid::text, type::text, " \
  "       payload, headers, attempts, created_at, seq "                                   \
  "  FROM outbox.events "

// New events, from the low-water mark up ($2), in insert order (index events_queue).
//
// $2 is normally above the mark: after the last event fetched (the resume point). A row
// that commits late below it is in the gaps (see the top of this file), and fetched by
// kFetchLateSql.
constexpr const char* kFetchNewSql = OUTBOX_FETCH_FROM
    " WHERE seq >= $2 AND published_at IS NULL AND dead_at IS NULL AND next_attempt_at IS NULL "
    "   AND part_at < $3 "
    " ORDER BY seq LIMIT $1 "
    "   FOR UPDATE SKIP LOCKED";
// $3 is a minute from now: no event can be in a partition that starts later (part_at is
// its transaction's start), so the executor prunes the premade future partitions instead of
// starting an index scan on each of them for every batch. If the clock stepped back by
// more, such an event waits; the low-water mark, which reads every partition, does not
// pass it.
constexpr int64 kFuturePartitionsAfterUs = 60 * USECS_PER_SEC;
constexpr Oid kFetchNewTypes[3] = {INT8OID, INT8OID, TIMESTAMPTZOID};
// Events whose retry time has come (index events_retry).
constexpr const char* kFetchRetrySql = OUTBOX_FETCH_FROM
    " WHERE next_attempt_at <= $2 AND published_at IS NULL AND dead_at IS NULL "
    " ORDER BY seq LIMIT $1 "
    "   FOR UPDATE SKIP LOCKED";
constexpr Oid kFetchRetryTypes[2] = {INT8OID, TIMESTAMPTZOID};
// Late events: the ones a probe of the gaps found ($2).
constexpr const char* kFetchLateSql = OUTBOX_FETCH_FROM
    " WHERE seq = ANY($2) AND published_at IS NULL AND dead_at IS NULL "
    "   AND next_attempt_at IS NULL AND part_at < $3 "
    " ORDER BY seq LIMIT $1 "
    "   FOR UPDATE SKIP LOCKED";
constexpr Oid kFetchLateTypes[3] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};
// The events waiting in the gaps [$1[i], $2[i]], at most $3 per gap, with the gap's number;
// by gap, and by seq within each (the gaps are sorted and disjoint, so by seq overall).
// Every partition is read (no part_at bound): what this finds decides how far the mark
// moves.
constexpr const char* kProbeGapsSql =
    "SELECT g.i, e.seq "
    "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) WITH ORDINALITY "
    "       AS g(lo, hi, i) "
    "  CROSS JOIN LATERAL ( "
    "    SELECT seq FROM outbox.events "
    "     WHERE seq >= g.lo AND seq <= g.hi AND published_at IS NULL AND dead_at IS NULL "
    "       AND next_attempt_at IS NULL "
    "     ORDER BY seq LIMIT $3) e "
    " ORDER BY g.i, e.seq";
constexpr Oid kProbeGapsTypes[3] = {INT8ARRAYOID, INT8ARRAYOID, INT8OID};
// More gaps than this merge (a wider gap costs a wider probe): a probe reads every
// partition's index once per gap.
constexpr std::size_t kMaxGapIntervals = 64;
// While the mark is held, gaps of at most this many values in all are probed at every
// check, wider ones every poll_interval (a probe reads every row its gaps cover).
constexpr int64 kEagerProbeMaxWidth = 256;
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
    "                    AND dead_at IS NULL AND next_attempt_at IS NULL), $3 + 1) END";
// How often the mark is moved and saved. Between moves the scan starts a little lower.
constexpr int64 kLowWaterCheckUs = 10 * 1000;
constexpr int64 kLowWaterSaveUs = 1000 * 1000;
constexpr size_t kMaxCachedPlans = 128;
// Under a stream of commits faster than this (events per second, a moving average with the
// time constant below), batches start at most every outbox.min_batch_interval; the stream
// stays heavy until it falls under half that rate. Slower streams (200 commits/s: the
// latency target), and bursts of a few commits, are sent a commit at a time.
constexpr double kGatherAbovePerSecond = 1000;
constexpr double kStreamRateTimeConstantUs = 50 * 1000;
// While batches come full, a transaction pipelines up to this many (its row locks and marks
// wait for its commit; the last batch's acknowledgements are not overlapped).
constexpr int kMaxBatchesPerTransaction = 8;
// With no sink, how often the relay looks for configure_sink() (see wait()).
constexpr int kUnconfiguredCheckMs = 10;
// The payload buffer (Relay::payload_scratch_) is given back once a payload grew it past this.
constexpr int kPayloadScratchKeepBytes = 1024 * 1024;

struct Text {
  const char* data;
  int len;
  std::string_view view() const { return {data, static_cast<size_t>(len)}; }
};

// One fetched row. Its texts are copies in the batch's memory, valid until the batch has
// been marked. Trivially destructible.
struct Row {
  Oid rel;
  ItemPointerData tid;
  Text id, aggregatetype, aggregateid, type, payload;
  int nheaders;
  Text* header_keys;
  Text* header_values;
  int attempts;
  TimestampTz created_at;
  int64 seq;
};

struct Fetched {
  Row* rows;
  int count;
  bool full;  // stopped by batch_size or batch_max_bytes: more work is likely waiting
};

// Watches the sink's waits for acknowledgements, on the relay's thread (Sink::observe_waits).
//  - What the client library reports (brokers down, say) shows in outbox.status at once,
//    not only when outbox.send_timeout has run out.
//  - A shutdown or a new sink configuration does not wait for send_timeout: the batch is
//    given up, and its events are sent again.
class RelayWaitObserver final : public sinks::WaitObserver {
 public:
  RelayWaitObserver(int index, WorkerCounters& counters, const uint32& generation)
      : index_(index), counters_(counters), generation_(generation) {}

  bool keep_waiting(std::string_view client_error) noexcept override {
    if (!client_error.empty()) {
      char line[sizeof(counters_.last_error)];
      snprintf(line, sizeof(line), "sink: %.*s", static_cast<int>(client_error.size()),
               client_error.data());
      if (strcmp(line, counters_.last_error) != 0) {
        memcpy(counters_.last_error, line, sizeof(line));
        counters_.last_error_at = GetCurrentTimestamp();
        relay_worker_publish(index_, counters_);
      }
    }
    return !ShutdownRequestPending && relay_config_generation() == generation_;
  }

 private:
  const int index_;
  WorkerCounters& counters_;
  const uint32& generation_;
};

// One batch of the pipeline. Two of them live as long as the relay, so the sink's view of
// `outcomes` outlives any one transaction.
struct Batch {
  MemoryContext memory;  // rows, headers, detoasted values: reset once the batch is marked
  Fetched fetched{};
  std::vector<sinks::Message> messages;
  std::vector<sinks::Outcome> outcomes;
  bool in_flight = false;  // started, not finished
};

struct BatchResult {
  int batches = 0;
  int fetched = 0;
  bool full = false;
  int acked = 0;
  int rejected = 0;
  int dead = 0;
  int unavailable = 0;
  // A batch was fetched but not sent: the wait for the synchronous standbys was given up.
  bool abandoned = false;
  // The first of each kind: later ones are mostly consequences (a batch purged because the
  // one before timed out).
  std::string first_rejection;
  std::string first_unavailable;
};

// A copy of len bytes in the current memory context; not NUL-terminated.
Text copy_bytes(const char* bytes, int len) {
  char* data = static_cast<char*>(palloc(len + 1));
  memcpy(data, bytes, len);
  return {data, len};
}

// A copy of a text value in the current memory context; not NUL-terminated. A compressed
// or out-of-line value is expanded into that context, and then not copied again.
Text copy_text(Datum value) {
  text* t = DatumGetTextPP(value);
  const int len = static_cast<int>(VARSIZE_ANY_EXHDR(t));
  if (reinterpret_cast<Pointer>(t) != DatumGetPointer(value)) return {VARDATA_ANY(t), len};
  return copy_bytes(VARDATA_ANY(t), len);
}

// Headers are a flat object of strings (enqueue checked it). The texts point into the
// jsonb, copied into the current memory context. Returns their size, which counts toward
// outbox.batch_max_bytes like the payload's.
int64 copy_headers(Datum value, Row& row) {
  Jsonb* headers = DatumGetJsonbPCopy(value);
  const int n = JB_ROOT_COUNT(headers);
  const int64 bytes = VARSIZE(headers);
  row.header_keys = static_cast<Text*>(palloc(sizeof(Text) * (n + 1)));
  row.header_values = static_cast<Text*>(palloc(sizeof(Text) * (n + 1)));
  for_each_member(&headers->root, [&](const JsonbValue& key, const JsonbValue& v) {
    if (v.type == jbvString && row.nheaders < n) {
      row.header_keys[row.nheaders] = {key.val.string.val, key.val.string.len};
      row.header_values[row.nheaders++] = {v.val.string.val, v.val.string.len};
    }
    return true;
  });
  return bytes;
}

// The payload's text (what payload::text gives), copied into the current memory context.
// Written first into `scratch`, which the relay keeps: the copy is fitted, so the batch's
// memory is what outbox.batch_max_bytes counts.
Text payload_text(Datum value, StringInfo scratch) {
  Jsonb* payload = DatumGetJsonbP(value);
  resetStringInfo(scratch);
  append_jsonb_text(scratch, &payload->root);
  if (reinterpret_cast<Pointer>(payload) != DatumGetPointer(value)) pfree(payload);
  return copy_bytes(scratch->data, scratch->len);
}

// Takes the fetch's rows straight from the executor (no SPI tuple table and no second
// copy), and stops the scan as soon as the batch is full, so that no row past
// outbox.batch_max_bytes is locked. Called by the executor, inside guard().
struct RowReceiver {
  DestReceiver dest;  // first: the executor holds a DestReceiver*
  Batch* batch;
  StringInfo scratch;  // for payload_text()
  int limit;
  int64 bytes;
  int64 max_bytes;
};

bool receive_row(TupleTableSlot* slot, DestReceiver* self) {
  RowReceiver* receiver = reinterpret_cast<RowReceiver*>(self);
  Fetched& out = receiver->batch->fetched;
  slot_getallattrs(slot);
  const Datum* values = slot->tts_values;
  MemoryContext old = MemoryContextSwitchTo(receiver->batch->memory);
  Row& row = out.rows[out.count++];
  row.rel = DatumGetObjectId(values[0]);
  row.tid = *reinterpret_cast<ItemPointer>(DatumGetPointer(values[1]));
  row.id = copy_text(values[2]);
  row.aggregatetype = copy_text(values[3]);
  row.aggregateid = copy_text(values[4]);
  row.type = copy_text(values[5]);
  row.payload = payload_text(values[6], receiver->scratch);
  const int64 header_bytes = slot->tts_isnull[7] ? 0 : copy_headers(values[7], row);
  row.attempts = DatumGetInt32(values[8]);
  row.created_at = DatumGetTimestampTz(values[9]);
  row.seq = DatumGetInt64(values[10]);
  MemoryContextSwitchTo(old);
  receiver->bytes += row.payload.len + header_bytes;
  return out.count < receiver->limit && receiver->bytes < receiver->max_bytes;
}

// An int8[] of n values (Int64GetDatum). Runs inside guard().
Datum int8_array(Datum* values, int n) {
  return PointerGetDatum(construct_array(values, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

void receiver_nothing(DestReceiver*) {}
void receiver_startup(DestReceiver*, int, TupleDesc) {}

class Relay {
 public:
  explicit Relay(int index) : index_(index), rng_(static_cast<uint64>(MyProcPid) * 2654435761u) {}

  void run() {
    iteration_ = guard([] {
      return AllocSetContextCreate(TopMemoryContext, "outbox relay", ALLOCSET_DEFAULT_SIZES);
    });
    guard([&] { init_payload_scratch(); });
    for (Batch& batch : batches_) {
      batch.memory = guard([] {
        return AllocSetContextCreate(TopMemoryContext, "outbox relay batch",
                                     ALLOCSET_DEFAULT_SIZES);
      });
    }
    counters_.pid = MyProcPid;
    publish(WorkerState::kStarting);
    while (!ShutdownRequestPending) {
      guard([&] {
        MemoryContextSwitchTo(iteration_);
        MemoryContextReset(iteration_);
        if (ConfigReloadPending) {
          ConfigReloadPending = false;
          ProcessConfigFile(PGC_SIGHUP);
        }
      });
      const int wait_ms = step();
      write_sink_log();
      wait(wait_ms);
    }
    sink_.reset();  // flushes and closes the client library
  }

 private:
  // One pass; returns how long to wait before the next one.
  int step() {
    try {
      if (!ensure_sink()) return settings.poll_interval_ms;
      const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
      if (now < counters_.backoff_until) {
        return static_cast<int>((counters_.backoff_until - now) / 1000) + 1;
      }
      // Under a stream of small commits every one of them wakes the relay, and a batch per
      // commit costs CPU that writers need, even when each batch finds one event (a
      // single fast writer). While the stream is heavy (see kGatherAbovePerSecond), the
      // next batch starts outbox.min_batch_interval after the last one, so that commits
      // gather. Slower streams, and an idle relay, send a commit at once.
      const TimestampTz gather_until =
          last_batch_start_ + static_cast<TimestampTz>(settings.min_batch_interval_ms) * 1000;
      if (gather_next_ && now < gather_until) {
        guard([&] { pg_usleep(gather_until - now); });
      }
      const TimestampTz previous_start = last_batch_start_;
      last_batch_start_ = guard([] { return GetCurrentTimestamp(); });
      BatchResult result = run_transaction();
      measure_stream(result.fetched, last_batch_start_ - previous_start);
      gather_next_ = heavy_stream_ && !result.full;
      // At shutdown the sink stops waiting: not an outage to log or back off from.
      if ((result.unavailable > 0 || result.abandoned) && ShutdownRequestPending) return 0;
      // A new configuration came while a batch waited: the new sink takes it from the mark.
      if (result.unavailable > 0 && relay_config_generation() != generation_) {
        restart_tracking();
        return 0;
      }
      if (result.unavailable > 0) return back_off(result.first_unavailable);
      // Not sent while waiting for the standbys (a reload, a new sink): at once, from the mark.
      if (result.abandoned) {
        restart_tracking();
        return 0;
      }
      failures_ = 0;
      counters_.backoff_until = 0;
      publish(WorkerState::kIdle);
      if (result.full) return 0;
      // A commit woke this pass, but the check that finds late events in the gaps was
      // skipped (the last one was too recent): come back when it is due, not after
      // poll_interval, or a late commit could wait that long.
      if (check_skipped_ && !gaps_.empty()) {
        const TimestampTz due = low_water_checked_at_ + kLowWaterCheckUs;
        const TimestampTz now_after = guard([] { return GetCurrentTimestamp(); });
        return std::min<int>(
            settings.poll_interval_ms,
            static_cast<int>(std::max<TimestampTz>(0, due - now_after) / 1000) + 1);
      }
      return settings.poll_interval_ms;
    } catch (const PgError& e) {
      abort_transaction();
      guard([&] {
        ErrorData* data = e.data();
        data->elevel = LOG;
        data->output_to_client = false;
        ThrowErrorData(data);
      });
      return back_off(e.what());
    } catch (const std::exception& e) {
      abort_transaction();
      return back_off(e.what());
    }
  }

  // The event rate: a moving average of what each batch found over the time since the one
  // before (with a single time constant, each event adds 1 / kStreamRateTimeConstantUs
  // however the batches fall). Heavy from kGatherAbovePerSecond down to half of it: a dip in
  // one gathering interval does not bring back a batch per commit.
  void measure_stream(int events, TimestampTz elapsed_us) {
    if (elapsed_us <= 0) return;
    const double sample = static_cast<double>(events) * USECS_PER_SEC / elapsed_us;
    const double weight = 1.0 - std::exp(-elapsed_us / kStreamRateTimeConstantUs);
    stream_rate_ += weight * (sample - stream_rate_);
    heavy_stream_ =
        stream_rate_ >= (heavy_stream_ ? kGatherAbovePerSecond / 2 : kGatherAbovePerSecond);
  }

  // Exponential back-off with jitter; no transaction is open while it runs.
  int back_off(const std::string& error) {
    restart_tracking();
    ++failures_;
    const double base = std::min<double>(
        settings.retry_backoff_max_ms,
        settings.retry_backoff_min_ms * std::pow(2.0, std::min(failures_ - 1, 30)));
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    const int delay_ms = std::max(1, static_cast<int>(base * jitter(rng_)));
    record_error(error);
    const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
    counters_.backoff_until = now + static_cast<TimestampTz>(delay_ms) * 1000;
    publish(WorkerState::kBackoff);
    // Log the first failure and then at doubling intervals, not every retry.
    if ((failures_ & (failures_ - 1)) == 0) {
      guard([&] {
        ereport(LOG, (errmsg("outbox relay %d: %s; retrying in %d ms (failure %d)", index_ + 1,
                             error.c_str(), delay_ms, failures_)));
      });
    }
    return delay_ms;
  }

  void wait(int timeout_ms) {
    guard([&] {
      if (timeout_ms > 0 && nothing_configured_) {
        // Nothing to send with. Commits that enqueue still set the latch, and waiting on it
        // would cost each of them a signal to this process, and this process a wake-up and a
        // read of the configuration: look for configure_sink() every few milliseconds
        // instead, off the latch. CREATE or ALTER EXTENSION is seen after poll_interval.
        pgstat_report_activity(STATE_IDLE, "outbox relay: waiting for a sink");
        const uint32 generation = generation_;
        for (int waited = 0; waited < timeout_ms && !ShutdownRequestPending &&
                             !ConfigReloadPending && relay_config_generation() == generation;
             waited += kUnconfiguredCheckMs) {
          (void)WaitLatch(nullptr, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                          std::min(kUnconfiguredCheckMs, timeout_ms - waited), PG_WAIT_EXTENSION);
        }
      } else if (timeout_ms > 0) {
        pgstat_report_activity(STATE_IDLE, "outbox relay: waiting for events");
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
      }
      CHECK_FOR_INTERRUPTS();
    });
  }

  void begin_transaction(const char* activity) {
    guard([&] {
      SetCurrentStatementStartTimestamp();
      StartTransactionCommand();
      if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox relay: SPI_connect failed");
      PushActiveSnapshot(GetTransactionSnapshot());
      pgstat_report_activity(STATE_RUNNING, activity);
    });
  }

  void commit_transaction() {
    guard([&] {
      SPI_finish();
      PopActiveSnapshot();
      CommitTransactionCommand();
      pgstat_report_stat(false);
      MemoryContextSwitchTo(iteration_);  // commit leaves TopMemoryContext current
    });
  }

  void abort_transaction() {
    // A batch still in flight has rows that the abort unlocks, and its outcomes would come
    // to nobody: drop the sink with it (a new one is made for the next pass); the events
    // are sent again. The sink goes first: until it is destroyed, its threads may still
    // read the batch's messages.
    bool in_flight = false;
    for (const Batch& batch : batches_) in_flight = in_flight || batch.in_flight;
    if (in_flight) sink_.reset();
    for (Batch& batch : batches_) {
      batch.in_flight = false;
      batch.messages.clear();
      guard([&] { MemoryContextReset(batch.memory); });
    }
    guard([&] {
      if (IsTransactionState() || IsAbortedTransactionBlockState() ||
          GetCurrentTransactionNestLevel() > 0) {
        AbortCurrentTransaction();
      }
      MemoryContextSwitchTo(iteration_);
    });
  }

  // Makes sure the configured sink exists; false when there is nothing to send with.
  bool ensure_sink() {
    const uint32 generation = relay_config_generation();
    if (sink_ && generation == generation_ && sink_->usable()) return true;
    if (sink_ && !sink_->usable()) {
      record_error("sink " + sink_name_ + " is unusable; creating it again");
      sink_.reset();
    }

    struct Config {
      Oid extension;
      bool has_extension;
      bool needs_update;
      bool configured;
      char* name;
      Jsonb* options;
      TimestampTz updated_at;
    };
    begin_transaction("outbox relay: reading the sink configuration");
    Config config = guard([&]() -> Config {
      Config c{};
      Oid nsp = get_namespace_oid("outbox", true);
      c.extension = get_extension_oid("outbox", true);
      c.has_extension = OidIsValid(nsp) && OidIsValid(get_relname_relid("sink_config", nsp));
      // relay_state appeared in 0.2.0: until ALTER EXTENSION outbox UPDATE, wait.
      c.needs_update = c.has_extension && !OidIsValid(get_relname_relid("relay_state", nsp));
      if (!c.has_extension || c.needs_update) return c;
      int rc = SPI_execute("SELECT sink, options, updated_at FROM outbox.sink_config", true, 1);
      if (rc != SPI_OK_SELECT) elog(ERROR, "outbox relay: reading outbox.sink_config failed");
      if (SPI_processed == 0) return c;
      c.configured = true;
      bool isnull;
      HeapTuple tuple = SPI_tuptable->vals[0];
      TupleDesc desc = SPI_tuptable->tupdesc;
      MemoryContext old = MemoryContextSwitchTo(iteration_);
      c.name = TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull));
      c.options = DatumGetJsonbPCopy(SPI_getbinval(tuple, desc, 2, &isnull));
      MemoryContextSwitchTo(old);
      c.updated_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 3, &isnull));
      return c;
    });
    commit_transaction();
    generation_ = generation;
    nothing_configured_ = !config.has_extension || config.needs_update || !config.configured;

    if (!config.has_extension || config.needs_update || config.extension != extension_) {
      // A re-created extension has a new sequence: read the mark again when it is back. Its
      // sink is configured anew: the old one is forgotten below.
      low_water_ = -1;
      horizon_valid_ = false;
      sink_.reset();
      extension_ = config.extension;
    }
    if (!config.has_extension || config.needs_update || !config.configured) {
      sink_.reset();
      sink_name_.clear();
      counters_.sink[0] = '\0';
      publish(!config.has_extension ? WorkerState::kWaitingForExtension
              : config.needs_update ? WorkerState::kWaitingForUpdate
                                    : WorkerState::kUnconfigured);
      return false;
    }
    if (sink_ && sink_name_ == config.name && config_updated_at_ == config.updated_at) {
      return true;
    }
    sink_.reset();
    sinks::Options options = sink_options_from_jsonb("outbox relay", config.options);
    sink_ = create_sink("outbox relay", config.name, options);
    sink_->observe_waits(&wait_observer_);
    sink_name_ = config.name;
    config_updated_at_ = config.updated_at;
    const std::string description = sink_->describe();
    snprintf(counters_.sink, sizeof(counters_.sink), "%s", description.c_str());
    guard([&] {
      ereport(LOG, (errmsg("outbox relay %d: sending with %s", index_ + 1, description.c_str())));
    });
    return true;
  }

  static SPIPlanPtr prepare_kept(const char* sql, int nargs, const Oid* types) {
    // SPI takes the types as Oid* but only reads them.
    SPIPlanPtr plan =
        SPI_prepare_cursor(sql, nargs, const_cast<Oid*>(types), CURSOR_OPT_GENERIC_PLAN);
    if (plan == nullptr) elog(ERROR, "outbox relay: SPI_prepare failed: %s", sql);
    SPI_keepplan(plan);
    return plan;
  }

  // In the batch transaction, before the fetch. Moves the low-water mark (see the top of
  // this file) at most every kLowWaterCheckUs. Its PostgreSQL calls run under guard(); the
  // gaps (C++ containers) are changed outside it.
  void advance_low_water(TimestampTz now) {
    if (low_water_ < 0) {
      guard([&] { read_low_water(); });
      restart_tracking();
    }
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
        if (now >= gap_probe_at_ || gaps_.width() <= kEagerProbeMaxWidth) probe_gaps(now, -1);
        return;
      }
      // Everything up to C is now visible: a gap up to C holds an event now or never.
      probe_gaps(now, horizon_seq_);
      int64 mark = tail;
      if (!gaps_.empty()) mark = std::min(mark, gaps_.first());
      low_water_ = std::max(low_water_, mark);
      horizon_valid_ = false;
    } else if (now >= gap_probe_at_) {
      probe_gaps(now, -1);
    }
    if (guard([&] { return read_horizon(); })) restart_tracking();
  }

  // Runs inside guard(): the saved mark, when the relay starts or the extension came back.
  void read_low_water() {
    int rc = SPI_execute("SELECT low_water, seq_filenode FROM outbox.relay_state", true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "outbox relay: reading outbox.relay_state failed");
    low_water_ = 0;
    sequence_filenode_ = InvalidOid;
    if (SPI_processed == 1) {
      bool isnull;
      Datum value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
      if (!isnull) low_water_ = DatumGetInt64(value);
      value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
      if (!isnull) sequence_filenode_ = DatumGetObjectId(value);
    }
    low_water_saved_ = low_water_;
    sequence_filenode_saved_ = sequence_filenode_;
  }

  // Runs inside guard(). With the horizon passed (passed = true): the first new unpublished
  // event past the resume point up to C, or C + 1.
  int64 first_new_after_resume_point(bool& passed) {
    if (low_water_plan_ == nullptr) {
      Oid types[3] = {XID8OID, INT8OID, INT8OID};
      low_water_plan_ = prepare_kept(kLowWaterSql, 3, types);
    }
    // Below the resume point only the gaps can hold an event; past it, the first one.
    const int64 tail_from = std::max<int64>(low_water_, resume_after_seq_ + 1);
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

  // Runs inside guard(). The next horizon: C, then N. True when the sequence was reset
  // (the scan must start from the bottom).
  bool read_horizon() {
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
                                 static_cast<long>(cache), static_cast<long>(low_water_)),
                          errhint("ALTER SEQUENCE outbox.events_seq CACHE 1")));
        warned_sequence_cache_ = true;
      }
      return false;
    }
    const bool new_file = OidIsValid(sequence_filenode_) && filenode != sequence_filenode_;
    const bool reset = last < low_water_ - 1 || new_file;
    if (reset) {
      // Someone reset the sequence (setval, ALTER SEQUENCE ... RESTART, TRUNCATE ...
      // RESTART IDENTITY): new events would sit below the mark. Start from the bottom.
      ereport(WARNING, (errmsg("outbox relay: outbox.events_seq was reset (now at %ld, the "
                               "low-water mark was %ld); scanning the queue from the start",
                               static_cast<long>(last), static_cast<long>(low_water_))));
      low_water_ = 0;
      low_water_saved_at_ = 0;
    }
    sequence_filenode_ = filenode;
    horizon_seq_ = last;
    horizon_xid_ = ReadNextFullTransactionId();
    horizon_valid_ = true;
    return reset;
  }

  // Finds the events waiting in the gaps (late commits): the next fetch takes them (late_).
  // With upto >= 0 (the horizon passed C = upto), a gap up to C that holds no event now
  // never will, and is dropped.
  void probe_gaps(TimestampTz now, int64 upto) {
    gap_probe_at_ = now + static_cast<int64>(settings.poll_interval_ms) * 1000;
    late_.clear();
    if (gaps_.empty()) return;
    const auto& gaps = gaps_.intervals();
    const int n = static_cast<int>(gaps.size());
    const int64 limit = settings.batch_size;
    // The query under guard(), its rows copied into palloc'd arrays (gap number, seq).
    struct Found {
      int64* index;
      int64* seq;
      uint64 count;
    };
    const Found rows = guard([&] {
      if (probe_plan_ == nullptr) probe_plan_ = prepare_kept(kProbeGapsSql, 3, kProbeGapsTypes);
      Datum* lo = static_cast<Datum*>(palloc(sizeof(Datum) * n));
      Datum* hi = static_cast<Datum*>(palloc(sizeof(Datum) * n));
      for (int k = 0; k < n; ++k) {
        lo[k] = Int64GetDatum(gaps[k].lo);
        hi[k] = Int64GetDatum(gaps[k].hi);
      }
      Datum params[3] = {int8_array(lo, n), int8_array(hi, n), Int64GetDatum(limit)};
      // Not read-only: it needs a snapshot of its own, taken after the horizon passed.
      if (SPI_execute_plan(probe_plan_, params, nullptr, false, 0) != SPI_OK_SELECT) {
        elog(ERROR, "outbox relay: probing the gaps failed");
      }
      Found out{static_cast<int64*>(palloc(sizeof(int64) * (SPI_processed + 1))),
                static_cast<int64*>(palloc(sizeof(int64) * (SPI_processed + 1))), SPI_processed};
      for (uint64 r = 0; r < SPI_processed; ++r) {
        bool isnull;
        out.index[r] =
            DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
        out.seq[r] =
            DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &isnull));
      }
      return out;
    });
    // The rows come by seq: the first batch_size of them are the next fetch's (the rest:
    // next time).
    const uint64 take = std::min<uint64>(rows.count, static_cast<uint64>(limit));
    late_.assign(rows.seq, rows.seq + take);
    if (upto < 0) return;
    // Gap k's finds are the run of rows numbered k + 1.
    std::vector<SeqGaps::Interval> kept;
    uint64 r = 0;
    for (int k = 0; k < n && gaps[k].lo <= upto; ++k) {
      while (r < rows.count && rows.index[r] < k + 1) ++r;
      int64 found = 0;
      for (; r < rows.count && rows.index[r] == k + 1; ++r, ++found) {
        kept.push_back({rows.seq[r], rows.seq[r]});
      }
      // The probe stopped at its limit: past its last find, this gap is still unknown.
      if (found >= limit) kept.push_back({rows.seq[r - 1] + 1, gaps[k].hi});
    }
    gaps_.replace_up_to(upto, kept);
  }

  // Runs inside guard(), at the end of the batch transaction: the row lock on
  // outbox.relay_state is held only until the commit that follows.
  void save_low_water(TimestampTz now) {
    const bool changed =
        low_water_ != low_water_saved_ || sequence_filenode_ != sequence_filenode_saved_;
    if (!changed || now - low_water_saved_at_ < kLowWaterSaveUs) return;
    if (save_plan_ == nullptr) {
      Oid types[2] = {INT8OID, OIDOID};
      save_plan_ = prepare_kept(
          "UPDATE outbox.relay_state SET low_water = $1, seq_filenode = $2, "
          "updated_at = pg_catalog.now()",
          2, types);
    }
    Datum params[2] = {Int64GetDatum(low_water_), ObjectIdGetDatum(sequence_filenode_)};
    const char nulls[2] = {' ', OidIsValid(sequence_filenode_) ? ' ' : 'n'};
    if (SPI_execute_plan(save_plan_, params, nulls, false, 0) != SPI_OK_UPDATE) {
      elog(ERROR, "outbox relay: saving the low-water mark failed");
    }
    low_water_saved_ = low_water_;
    sequence_filenode_saved_ = sequence_filenode_;
    low_water_saved_at_ = now;
  }

  // Runs a fetch plan into the batch until `limit` rows or `max_bytes` of payload. Runs
  // inside guard().
  void append_rows(SPIPlanPtr plan, int nparams, const Datum* values, const Oid* types,
                   Batch& batch, int limit, int64& bytes, int64 max_bytes) {
    RowReceiver receiver{};
    receiver.dest.receiveSlot = receive_row;
    receiver.dest.rStartup = receiver_startup;
    receiver.dest.rShutdown = receiver_nothing;
    receiver.dest.rDestroy = receiver_nothing;
    receiver.dest.mydest = DestNone;
    receiver.batch = &batch;
    receiver.scratch = &payload_scratch_;
    receiver.limit = limit;
    receiver.bytes = bytes;
    receiver.max_bytes = max_bytes;
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
    bytes = receiver.bytes;
    // A payload of many megabytes does not keep its buffer for the relay's lifetime.
    if (payload_scratch_.maxlen > kPayloadScratchKeepBytes) {
      pfree(payload_scratch_.data);
      init_payload_scratch();
    }
  }

  // Runs inside guard().
  void init_payload_scratch() {
    MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
    initStringInfo(&payload_scratch_);
    MemoryContextSwitchTo(old);
  }

  // Fetches the next batch. The first of a transaction also moves the low-water mark, looks
  // for retries, and takes the late events a probe of the gaps found. The later ones only
  // continue after the rows already fetched: those are locked by this transaction, and FOR
  // UPDATE SKIP LOCKED would return them again.
  void fetch(Batch& batch, bool first_of_transaction) {
    const TimestampTz now = guard([&] {
      if (fetch_new_plan_ == nullptr) {
        fetch_new_plan_ = prepare_kept(kFetchNewSql, 3, kFetchNewTypes);
        fetch_retry_plan_ = prepare_kept(kFetchRetrySql, 2, kFetchRetryTypes);
        fetch_late_plan_ = prepare_kept(kFetchLateSql, 3, kFetchLateTypes);
      }
      return GetCurrentTimestamp();
    });
    if (first_of_transaction) advance_low_water(now);
    // Where each kind of row starts in the batch: retries, late events, new events.
    int late_from = 0;
    int new_from = 0;
    bool late_tried = false;
    // New events continue after the resume point; what they pass over becomes gaps.
    const int64 start = std::max<int64>(low_water_, resume_after_seq_ + 1);
    Fetched& out = batch.fetched;
    guard([&] {
      const int limit = settings.batch_size;
      const int64 max_bytes = settings.batch_max_bytes;
      MemoryContextReset(batch.memory);  // an empty batch was never finished
      out = Fetched{static_cast<Row*>(MemoryContextAllocZero(batch.memory, sizeof(Row) * limit)), 0,
                    false};
      int64 bytes = 0;

      // Retries first: they are the oldest events. Looked for when one of ours is due, and
      // at least every poll_interval (another worker may have scheduled them).
      if (first_of_transaction && now >= retry_check_at_) {
        const Datum params[2] = {Int64GetDatum(limit), TimestampTzGetDatum(now)};
        append_rows(fetch_retry_plan_, 2, params, kFetchRetryTypes, batch, limit, bytes, max_bytes);
        const bool more_due = out.count == limit || bytes >= max_bytes;
        retry_check_at_ =
            more_due ? now : now + static_cast<int64>(settings.poll_interval_ms) * 1000;
      }

      const TimestampTz future = now + kFuturePartitionsAfterUs;
      late_from = out.count;
      if (first_of_transaction && !late_.empty() && out.count < limit && bytes < max_bytes) {
        const int n = static_cast<int>(late_.size());
        Datum* seqs = static_cast<Datum*>(palloc(sizeof(Datum) * n));
        for (int k = 0; k < n; ++k) seqs[k] = Int64GetDatum(late_[k]);
        const Datum params[3] = {Int64GetDatum(limit - out.count), int8_array(seqs, n),
                                 TimestampTzGetDatum(future)};
        append_rows(fetch_late_plan_, 3, params, kFetchLateTypes, batch, limit, bytes, max_bytes);
        late_tried = true;
      }

      new_from = out.count;
      if (out.count < limit && bytes < max_bytes) {
        const Datum params[3] = {Int64GetDatum(limit - out.count), Int64GetDatum(start),
                                 TimestampTzGetDatum(future)};
        append_rows(fetch_new_plan_, 3, params, kFetchNewTypes, batch, limit, bytes, max_bytes);
      }
      out.full = out.count == limit || bytes >= max_bytes;
    });
    // The bookkeeping, outside guard() (it allocates).
    for (int k = late_from; k < new_from; ++k) late_fetched_.push_back(out.rows[k].seq);
    if (late_tried) late_.clear();  // what was not taken (locked elsewhere, no room) is found again
    int64 last = start - 1;
    for (int k = new_from; k < out.count; ++k) {
      const int64 seq = out.rows[k].seq;
      if (seq > last + 1) passed_over_.push_back({last + 1, seq - 1});
      last = seq;
    }
    resume_after_seq_ = std::max(resume_after_seq_, last);
  }

  SPIPlanPtr partition_plan(boost::container::flat_map<Oid, SPIPlanPtr>& cache, Oid rel,
                            bool reject) {
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
      // A generic plan, made once (prepare_kept): the relay runs with enable_seqscan off
      // (see outbox_relay_main), so it is a TID scan even when made while the partition
      // was empty.
      if (reject) {
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

  // Marks acknowledged rows published, one UPDATE per partition (by ctid: the rows are
  // locked by this transaction, so their ctids are stable).
  void mark_acked(const Fetched& batch, const std::vector<sinks::Outcome>& outcomes) {
    boost::container::flat_map<Oid, std::vector<int>> by_partition;
    for (int i = 0; i < batch.count; ++i) {
      if (outcomes[i].delivery == sinks::Delivery::kAcked) {
        by_partition[batch.rows[i].rel].push_back(i);
      }
    }
    const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
    for (const auto& [rel, indexes] : by_partition) {
      SPIPlanPtr plan = partition_plan(mark_plans_, rel, false);
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

  // A rejected event: one attempt more and a later retry, or the dead letters (then
  // next_attempt_at is cleared: it leaves the retry index).
  bool mark_rejected(const Row& row, const std::string& error) {
    const bool dead = row.attempts + 1 >= settings.max_attempts;
    const double base =
        std::min<double>(settings.retry_backoff_max_ms,
                         settings.retry_backoff_min_ms * std::pow(2.0, std::min(row.attempts, 30)));
    SPIPlanPtr plan = partition_plan(reject_plans_, row.rel, true);
    const TimestampTz retry_at = guard([&] {
      const TimestampTz now = GetCurrentTimestamp();
      const TimestampTz at = now + static_cast<TimestampTz>(base) * 1000;
      Datum params[4] = {PointerGetDatum(&row.tid), CStringGetTextDatum(error.c_str()),
                         TimestampTzGetDatum(at), TimestampTzGetDatum(now)};
      const char nulls[4] = {' ', ' ', dead ? 'n' : ' ', dead ? ' ' : 'n'};
      int rc = SPI_execute_plan(plan, params, nulls, false, 0);
      if (rc != SPI_OK_UPDATE) elog(ERROR, "outbox relay: recording a rejection failed");
      return at;
    });
    if (!dead) retry_check_at_ = std::min(retry_check_at_, retry_at);
    return dead;
  }

  // Hands a fetched batch to the sink. Returns at once for a pipelining sink; a
  // synchronous one (the default Sink::start) has the outcomes when it returns.
  void start_batch(Batch& batch) {
    const Fetched& fetched = batch.fetched;
    batch.messages.resize(fetched.count);
    for (int i = 0; i < fetched.count; ++i) {
      const Row& row = fetched.rows[i];
      sinks::Message& m = batch.messages[i];
      m.id = row.id.view();
      m.aggregatetype = row.aggregatetype.view();
      m.aggregateid = row.aggregateid.view();
      m.type = row.type.view();
      m.payload = row.payload.view();
      m.created_at_unix_us =
          row.created_at + static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
                               SECS_PER_DAY * USECS_PER_SEC;
      m.headers.clear();
      for (int h = 0; h < row.nheaders; ++h) {
        m.headers.emplace_back(row.header_keys[h].view(), row.header_values[h].view());
      }
    }

    publish(WorkerState::kSending);
    guard([&] {
      pgstat_report_activity(STATE_RUNNING, psprintf("outbox relay: sending %d events to %s",
                                                     fetched.count, sink_name_.c_str()));
    });
    batch.outcomes.assign(fetched.count, sinks::Outcome{});
    try {
      sink_->start(batch.messages, batch.outcomes,
                   std::chrono::milliseconds(settings.send_timeout_ms));
      batch.in_flight = true;
    } catch (const std::exception& e) {
      for (auto& o : batch.outcomes) o = {sinks::Delivery::kUnavailable, e.what()};
    }
  }

  // Waits for the batch's outcomes (the oldest started batch), marks what was acknowledged
  // and records what was not, then frees the batch's rows.
  void finish_batch(Batch& batch, BatchResult& result) {
    if (batch.in_flight) {
      batch.in_flight = false;
      try {
        sink_->finish();
      } catch (const std::exception& e) {
        for (auto& o : batch.outcomes) o = {sinks::Delivery::kUnavailable, e.what()};
      }
    }
    const Fetched& fetched = batch.fetched;
    guard([] { pgstat_report_activity(STATE_RUNNING, "outbox relay: marking"); });
    mark_acked(fetched, batch.outcomes);
    ++result.batches;
    for (int i = 0; i < fetched.count; ++i) {
      const sinks::Outcome& o = batch.outcomes[i];
      switch (o.delivery) {
        case sinks::Delivery::kAcked:
          ++result.acked;
          break;
        case sinks::Delivery::kRejected:
          ++result.rejected;
          if (mark_rejected(fetched.rows[i], o.error)) ++result.dead;
          if (result.first_rejection.empty()) result.first_rejection = "event rejected: " + o.error;
          break;
        case sinks::Delivery::kUnavailable:
          ++result.unavailable;
          if (result.first_unavailable.empty()) {
            result.first_unavailable = "sink unavailable: " + o.error;
          }
          break;
      }
    }
    batch.messages.clear();
    guard([&] { MemoryContextReset(batch.memory); });
  }

  // The first lock of every batch transaction: outbox.events, before relay_state, the sequence
  // or a partition. DROP EXTENSION takes this one first too (pg/drop_guard.cpp), so the two
  // never wait for each other in a cycle.
  void lock_events_first() {
    guard([] {
      const Oid events = get_relname_relid("events", get_namespace_oid("outbox", true));
      if (OidIsValid(events)) LockRelationOid(events, RowShareLock);
    });
  }

  // After a fetch: the commits of its events must not be able to vanish before the sink gets
  // them (pg/durability.hpp). False when the wait for the synchronous standbys was given up:
  // at shutdown, a reload or a new sink configuration; the batch is then not sent.
  bool make_durable() {
    const XLogRecPtr lsn = guard([] { return flush_visible_commits(); });
    if (!settings.wait_for_sync_standbys) return true;
    bool announced = false;
    while (guard([lsn] { return sync_standbys_behind(lsn); })) {
      if (!announced) {
        publish(WorkerState::kWaitingForStandbys);
        guard([] {
          pgstat_report_activity(STATE_RUNNING, "outbox relay: waiting for synchronous standbys");
        });
        announced = true;
      }
      if (ShutdownRequestPending || ConfigReloadPending ||
          relay_config_generation() != generation_) {
        return false;
      }
      // Off the latch: a commit's wake-up stays set for the pass after this one.
      guard([] {
        (void)WaitLatch(nullptr, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10, PG_WAIT_EXTENSION);
        CHECK_FOR_INTERRUPTS();
      });
    }
    return true;
  }

  // After a failure, or when the low-water mark was read or reset: the next fetch starts
  // from the mark, and nothing above it is known resolved.
  void restart_tracking() {
    resume_after_seq_ = -1;
    gaps_.clear();
    late_.clear();
  }

  // One transaction: a batch, or, while they come full, a pipeline of up to
  // kMaxBatchesPerTransaction: batch k+1 is fetched and started before batch k is finished
  // and marked. It stops at the first batch with a sink failure.
  BatchResult run_transaction() {
    BatchResult result;
    passed_over_.clear();
    late_fetched_.clear();
    begin_transaction("outbox relay: fetching");
    lock_events_first();
    Batch* current = &batches_[0];
    Batch* next = &batches_[1];
    fetch(*current, true);
    result.fetched = current->fetched.count;
    result.full = current->fetched.full;
    if (current->fetched.count > 0 && !make_durable()) result.abandoned = true;
    if (current->fetched.count > 0 && !result.abandoned) {
      start_batch(*current);
      for (int n = 1;; ++n) {
        const bool more =
            current->fetched.full && n < kMaxBatchesPerTransaction && !ShutdownRequestPending;
        if (more) {
          fetch(*next, false);
          result.fetched += next->fetched.count;
          result.full = next->fetched.full;
          if (next->fetched.count > 0 && !make_durable()) {
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
    guard([&] { save_low_water(GetCurrentTimestamp()); });
    commit_transaction();
    // Committed: the late events fetched are resolved, and what the new ones passed over
    // becomes gaps. (After a sink failure or an abandoned batch, the scan restarts from the
    // mark instead.)
    if (result.unavailable == 0 && !result.abandoned) {
      for (const SeqGaps::Interval& gap : passed_over_) gaps_.add(gap.lo, gap.hi);
      for (int64 seq : late_fetched_) gaps_.remove(seq);
    }
    if (result.fetched == 0) return result;

    const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
    counters_.batches += result.batches;
    counters_.events_sent += result.acked;
    counters_.events_failed += result.rejected;
    counters_.events_dead += result.dead;
    if (result.acked > 0) counters_.last_success_at = now;
    if (result.rejected > 0) {
      record_error(result.first_rejection);
      guard([&] {
        ereport(LOG, (errmsg("outbox relay %d: the sink rejected %d of %d events (%d now "
                             "dead-lettered): %s",
                             index_ + 1, result.rejected, result.fetched, result.dead,
                             result.first_rejection.c_str())));
      });
    }
    publish(counters_.state);
    return result;
  }

  // The sink's client-library log lines (librdkafka's), into the server log: after every
  // pass, so at most outbox.poll_interval (or a back-off) after they were written.
  void write_sink_log() {
    if (!sink_) return;
    std::vector<sinks::LogLine> lines;
    try {
      lines = sink_->take_log();
    } catch (const std::exception&) {
      return;  // out of memory: the lines are lost, the relay goes on
    }
    for (const sinks::LogLine& line : lines) {
      const int level = line.level <= 4 ? WARNING : line.level <= 6 ? LOG : DEBUG1;
      const char* text = line.text.c_str();
      guard([&] { ereport(level, (errmsg("outbox relay %d: %s", index_ + 1, text))); });
    }
  }

  void record_error(const std::string& error) {
    snprintf(counters_.last_error, sizeof(counters_.last_error), "%s", error.c_str());
    counters_.last_error_at = guard([] { return GetCurrentTimestamp(); });
  }

  void publish(WorkerState state) {
    counters_.state = state;
    relay_worker_publish(index_, counters_);
  }

  const int index_;
  std::mt19937_64 rng_;
  MemoryContext iteration_ = nullptr;
  // Where payload_text() writes each payload before its fitted copy (in TopMemoryContext).
  StringInfoData payload_scratch_{};
  uint32 generation_ = 0;
  WorkerCounters counters_{};
  RelayWaitObserver wait_observer_{index_, counters_, generation_};  // destroyed after sink_
  std::unique_ptr<sinks::Sink> sink_;
  std::string sink_name_;
  // The installation of the extension the relay works for (pg_extension's oid).
  Oid extension_ = InvalidOid;
  // The last read of the configuration found nothing to send with (no extension, not
  // updated, or unconfigured): wait() then waits off the latch.
  bool nothing_configured_ = false;
  TimestampTz config_updated_at_ = 0;
  int failures_ = 0;
  SPIPlanPtr fetch_new_plan_ = nullptr;
  SPIPlanPtr fetch_retry_plan_ = nullptr;
  SPIPlanPtr fetch_late_plan_ = nullptr;
  SPIPlanPtr probe_plan_ = nullptr;
  SPIPlanPtr low_water_plan_ = nullptr;
  SPIPlanPtr save_plan_ = nullptr;
  SPIPlanPtr sequence_plan_ = nullptr;
  // The low-water mark (-1: not read yet) and the horizon it may move up to.
  int64 low_water_ = -1;
  int64 low_water_saved_ = -1;
  TimestampTz low_water_saved_at_ = 0;
  TimestampTz low_water_checked_at_ = 0;
  // The last pass skipped the check because the one before was too recent.
  bool check_skipped_ = false;
  // Below the resume point, every event from the mark up is resolved by this relay
  // (published, dead-lettered or waiting for a retry, in transactions that committed),
  // except in the gaps. The open transaction's share counts once it commits: the values
  // its new events passed over, and the late events it took.
  SeqGaps gaps_{kMaxGapIntervals};
  std::vector<SeqGaps::Interval> passed_over_;
  std::vector<int64> late_fetched_;
  // Late events found by the last probe, for the next fetch; when gaps are probed.
  std::vector<int64> late_;
  TimestampTz gap_probe_at_ = 0;
  bool horizon_valid_ = false;
  int64 horizon_seq_ = 0;
  FullTransactionId horizon_xid_{};
  bool warned_sequence_cache_ = false;
  Oid sequence_filenode_ = InvalidOid;
  Oid sequence_filenode_saved_ = InvalidOid;
  TimestampTz retry_check_at_ = 0;
  int64 resume_after_seq_ = -1;
  TimestampTz last_batch_start_ = 0;
  bool gather_next_ = false;
  // Events per second (see measure_stream).
  double stream_rate_ = 0;
  bool heavy_stream_ = false;
  boost::container::flat_map<Oid, SPIPlanPtr> mark_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> reject_plans_;
  Batch batches_[2];
};

}  // namespace
}  // namespace outbox::pg

void outbox_relay_main(Datum arg) {
  const int index = DatumGetInt32(arg);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  BackgroundWorkerUnblockSignals();
  // The launcher found the database and passes its oid (pg/launcher.cpp).
  Oid database;
  memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(database));
  BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
  pgstat_report_appname("outbox relay");
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
  // needs a snapshot taken after it; FOR UPDATE SKIP LOCKED needs no serialization errors.
  SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
  outbox::pg::relay_worker_attach(index);

  // Past this point errors are C++ exceptions. Anything that escapes the loop ends the
  // worker with exit code 1, and no other backend is disturbed (a death by signal would
  // restart them all); the launcher starts it again.
  int exit_code = 0;
  char why[256] = "";
  try {
    outbox::pg::Relay relay(index);
    relay.run();
  } catch (const outbox::pg::PgError& e) {
    ErrorData* data = e.data();
    snprintf(why, sizeof(why), "stopped after an error: %s", e.what());
    data->elevel = LOG;
    outbox::pg::guard([&] { ThrowErrorData(data); });
    exit_code = 1;
  } catch (const std::exception& e) {
    snprintf(why, sizeof(why), "stopped after an unexpected error: %s", e.what());
    elog(LOG, "outbox relay %d: %s", index + 1, why);
    exit_code = 1;
  } catch (...) {
    snprintf(why, sizeof(why), "stopped after an unexpected error");
    elog(LOG, "outbox relay %d: %s", index + 1, why);
    exit_code = 1;
  }
  // outbox.status shows why it stopped.
  outbox::pg::relay_worker_detach(index, why[0] != '\0' ? why : nullptr);
  proc_exit(exit_code);
}
