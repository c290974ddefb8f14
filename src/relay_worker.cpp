// The relay: a background worker that sends unpublished events through the configured sink
// and marks them published once the sink has acknowledged them.
//
// One batch is one transaction:
//   SELECT ... WHERE published_at IS NULL ... ORDER BY seq LIMIT n FOR UPDATE SKIP LOCKED
//   -> sink.send(batch) -> UPDATE <partition> SET published_at = ... WHERE ctid = ANY(...)
//   -> COMMIT
// Nothing is remembered between batches (no "id > last_id": it loses late commits). A
// crash anywhere before COMMIT releases the rows and they are sent again: at least once.
// Back-off happens with no transaction open.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "pg/boundary.hpp"
#include "pg/relay_shmem.hpp"
#include "pg/settings.hpp"
#include "pg/sink_loader.hpp"
#include "sinks/sink.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"
}

extern "C" {
PGDLLEXPORT void outbox_relay_main(Datum arg);
}

namespace outbox::pg {
namespace {

// The queue: the partial index on (seq) WHERE published_at IS NULL, in insert order.
//
// $3 is where the scan starts. Normally -1: every unpublished row, nothing remembered. While
// a backlog drains (the previous batch was full) it is the last batch's highest seq, so the
// scan does not walk again over the index entries of rows it has just published (they stay
// in the index until vacuum, and rescanning them made each batch cost the whole drain so
// far). A row that commits late below that mark is not lost: the scan starts from -1 again
// as soon as a batch is not full, and at least every outbox.poll_interval.
constexpr const char* kFetchSql =
    "SELECT tableoid, ctid, id::text, aggregatetype::text, aggregateid::text, type::text, "
    "       payload::text, headers, attempts, created_at, seq "
    "  FROM outbox.events "
    " WHERE published_at IS NULL AND dead_at IS NULL "
    "   AND (next_attempt_at IS NULL OR next_attempt_at <= $1) "
    "   AND seq > $3 "
    " ORDER BY seq LIMIT $2 "
    "   FOR UPDATE SKIP LOCKED";
// Rows per cursor fetch: the first fetch is small, later ones are sized from the average
// payload so that a batch stays near outbox.batch_max_bytes even with large payloads.
constexpr int kFirstFetch = 32;
constexpr int kMaxFetch = 256;
constexpr size_t kMaxCachedPlans = 128;

struct Text {
  const char* data;
  int len;
  std::string_view view() const { return {data, static_cast<size_t>(len)}; }
};

// One fetched row, copied into the iteration's memory context. Trivially destructible.
struct Row {
  Oid rel;
  ItemPointerData tid;
  Text id, aggregatetype, aggregateid, type, payload;
  int nheaders;
  Text* header_keys;
  Text* header_values;
  int attempts;
  TimestampTz created_at;
};

struct Fetched {
  Row* rows;
  int count;
  int64 max_seq;
  bool full;  // stopped by batch_size or batch_max_bytes: more work is likely waiting
};

struct BatchResult {
  int fetched = 0;
  bool full = false;
  int acked = 0;
  int rejected = 0;
  int dead = 0;
  int unavailable = 0;
  std::string first_error;
};

Text copy_text(MemoryContext context, Datum value) {
  text* t = DatumGetTextPP(value);
  int len = VARSIZE_ANY_EXHDR(t);
  char* out = static_cast<char*>(MemoryContextAlloc(context, len + 1));
  memcpy(out, VARDATA_ANY(t), len);
  out[len] = '\0';
  return {out, len};
}

Text copy_cstring(MemoryContext context, const char* value, int len) {
  char* out = static_cast<char*>(MemoryContextAlloc(context, len + 1));
  memcpy(out, value, len);
  out[len] = '\0';
  return {out, len};
}

class Relay {
 public:
  explicit Relay(int index) : index_(index), rng_(static_cast<uint64>(MyProcPid) * 2654435761u) {}

  void run() {
    iteration_ = guard([] {
      return AllocSetContextCreate(TopMemoryContext, "outbox relay", ALLOCSET_DEFAULT_SIZES);
    });
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
      // commit costs CPU that writers need. Starting batches at most every
      // outbox.min_batch_interval lets the next ones gather; an idle relay still starts at
      // once.
      const TimestampTz gather_until =
          last_batch_start_ + static_cast<TimestampTz>(settings.min_batch_interval_us);
      if (last_batch_was_small_ && now < gather_until) {
        guard([&] { pg_usleep(gather_until - now); });
      }
      last_batch_start_ = guard([] { return GetCurrentTimestamp(); });
      BatchResult result = run_batch();
      last_batch_was_small_ = !result.full;
      if (result.unavailable > 0) return back_off(result.first_error);
      failures_ = 0;
      counters_.backoff_until = 0;
      publish(WorkerState::kIdle);
      return result.full ? 0 : settings.poll_interval_ms;
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

  // Exponential back-off with jitter; no transaction is open while it runs.
  int back_off(const std::string& error) {
    resume_after_seq_ = -1;
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
      if (timeout_ms > 0) {
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
      bool has_extension;
      bool configured;
      char* name;
      Jsonb* options;
      TimestampTz updated_at;
    };
    begin_transaction("outbox relay: reading the sink configuration");
    Config config = guard([&]() -> Config {
      Config c{};
      Oid nsp = get_namespace_oid("outbox", true);
      c.has_extension = OidIsValid(nsp) && OidIsValid(get_relname_relid("sink_config", nsp));
      if (!c.has_extension) return c;
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

    if (!config.has_extension || !config.configured) {
      sink_.reset();
      sink_name_.clear();
      counters_.sink[0] = '\0';
      publish(config.has_extension ? WorkerState::kUnconfigured
                                   : WorkerState::kWaitingForExtension);
      return false;
    }
    if (sink_ && sink_name_ == config.name && config_updated_at_ == config.updated_at) {
      return true;
    }
    sink_.reset();
    sinks::Options options = sink_options_from_jsonb("outbox relay", config.options);
    sink_ = create_sink("outbox relay", config.name, options);
    sink_name_ = config.name;
    config_updated_at_ = config.updated_at;
    const std::string description = sink_->describe();
    snprintf(counters_.sink, sizeof(counters_.sink), "%s", description.c_str());
    guard([&] {
      ereport(LOG, (errmsg("outbox relay %d: sending with %s", index_ + 1, counters_.sink)));
    });
    return true;
  }

  Fetched fetch() {
    return guard([&]() -> Fetched {
      if (fetch_plan_ == nullptr) {
        Oid types[3] = {TIMESTAMPTZOID, INT8OID, INT8OID};
        SPIPlanPtr plan = SPI_prepare(kFetchSql, 3, types);
        if (plan == nullptr) elog(ERROR, "outbox relay: SPI_prepare failed");
        SPI_keepplan(plan);
        fetch_plan_ = plan;
      }
      const int limit = settings.batch_size;
      const int64 max_bytes = settings.batch_max_bytes;
      const TimestampTz now = GetCurrentTimestamp();
      if (now - last_full_scan_ >= static_cast<int64>(settings.poll_interval_ms) * 1000) {
        resume_after_seq_ = -1;
      }
      if (resume_after_seq_ < 0) last_full_scan_ = now;
      Datum params[3] = {TimestampTzGetDatum(now), Int64GetDatum(limit),
                         Int64GetDatum(resume_after_seq_)};
      Portal portal = SPI_cursor_open(nullptr, fetch_plan_, params, nullptr, false);
      Fetched out{static_cast<Row*>(MemoryContextAllocZero(iteration_, sizeof(Row) * limit)), 0, -1,
                  false};
      int64 bytes = 0;
      int64 chunk = kFirstFetch;
      while (out.count < limit && bytes < max_bytes) {
        SPI_cursor_fetch(portal, true, std::min<int64>(chunk, limit - out.count));
        if (SPI_processed == 0) break;
        TupleDesc desc = SPI_tuptable->tupdesc;
        // Rows fetched past the byte limit stay locked but unsent until the commit; the
        // next batch starts with them.
        for (uint64 i = 0; i < SPI_processed && bytes < max_bytes; ++i) {
          HeapTuple tuple = SPI_tuptable->vals[i];
          Row& row = out.rows[out.count++];
          bool isnull;
          row.rel = DatumGetObjectId(SPI_getbinval(tuple, desc, 1, &isnull));
          row.tid = *reinterpret_cast<ItemPointer>(
              DatumGetPointer(SPI_getbinval(tuple, desc, 2, &isnull)));
          row.id = copy_text(iteration_, SPI_getbinval(tuple, desc, 3, &isnull));
          row.aggregatetype = copy_text(iteration_, SPI_getbinval(tuple, desc, 4, &isnull));
          row.aggregateid = copy_text(iteration_, SPI_getbinval(tuple, desc, 5, &isnull));
          row.type = copy_text(iteration_, SPI_getbinval(tuple, desc, 6, &isnull));
          row.payload = copy_text(iteration_, SPI_getbinval(tuple, desc, 7, &isnull));
          Datum headers = SPI_getbinval(tuple, desc, 8, &isnull);
          if (!isnull) copy_headers(DatumGetJsonbP(headers), row);
          row.attempts = DatumGetInt32(SPI_getbinval(tuple, desc, 9, &isnull));
          row.created_at = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 10, &isnull));
          out.max_seq =
              std::max<int64>(out.max_seq, DatumGetInt64(SPI_getbinval(tuple, desc, 11, &isnull)));
          bytes += row.payload.len;
        }
        SPI_freetuptable(SPI_tuptable);
        const int64 average = bytes / std::max(out.count, 1) + 1;
        chunk = std::clamp<int64>((max_bytes - bytes) / average, 1, kMaxFetch);
      }
      out.full = out.count == limit || bytes >= max_bytes;
      resume_after_seq_ = out.full ? out.max_seq : -1;
      SPI_cursor_close(portal);
      return out;
    });
  }

  // Headers are a flat object of strings (enqueue checked it). Runs inside guard().
  void copy_headers(Jsonb* headers, Row& row) {
    const int n = JB_ROOT_COUNT(headers);
    row.header_keys = static_cast<Text*>(MemoryContextAlloc(iteration_, sizeof(Text) * (n + 1)));
    row.header_values = static_cast<Text*>(MemoryContextAlloc(iteration_, sizeof(Text) * (n + 1)));
    JsonbIterator* it = JsonbIteratorInit(&headers->root);
    JsonbValue v;
    JsonbIteratorToken token;
    while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
      if (token == WJB_KEY && row.nheaders < n) {
        row.header_keys[row.nheaders] =
            copy_cstring(iteration_, v.val.string.val, v.val.string.len);
      } else if (token == WJB_VALUE && row.nheaders < n && v.type == jbvString) {
        row.header_values[row.nheaders++] =
            copy_cstring(iteration_, v.val.string.val, v.val.string.len);
      }
    }
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
      // Always custom plans: a generic plan made while the partition was new and empty can
      // be a sequential scan, and would stay cached while the partition fills.
      SPIPlanPtr p;
      if (reject) {
        Oid types[4] = {TIDOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
        p = SPI_prepare_cursor(psprintf("UPDATE %s SET attempts = attempts + 1, last_error = $2, "
                                        "next_attempt_at = $3, dead_at = $4 WHERE ctid = $1",
                                        table),
                               4, types, CURSOR_OPT_CUSTOM_PLAN);
      } else {
        Oid types[2] = {TIMESTAMPTZOID, TIDARRAYOID};
        p = SPI_prepare_cursor(
            psprintf("UPDATE %s SET published_at = $1 WHERE ctid = ANY($2)", table), 2, types,
            CURSOR_OPT_CUSTOM_PLAN);
      }
      if (p == nullptr) elog(ERROR, "outbox relay: SPI_prepare failed");
      SPI_keepplan(p);
      return p;
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

  // A rejected event: one attempt more, a later retry, or the dead letters.
  bool mark_rejected(const Row& row, const std::string& error) {
    const bool dead = row.attempts + 1 >= settings.max_attempts;
    const double base =
        std::min<double>(settings.retry_backoff_max_ms,
                         settings.retry_backoff_min_ms * std::pow(2.0, std::min(row.attempts, 30)));
    SPIPlanPtr plan = partition_plan(reject_plans_, row.rel, true);
    guard([&] {
      const TimestampTz now = GetCurrentTimestamp();
      Datum params[4] = {PointerGetDatum(&row.tid), CStringGetTextDatum(error.c_str()),
                         TimestampTzGetDatum(now + static_cast<TimestampTz>(base) * 1000),
                         TimestampTzGetDatum(now)};
      const char nulls[4] = {' ', ' ', ' ', dead ? ' ' : 'n'};
      int rc = SPI_execute_plan(plan, params, nulls, false, 0);
      if (rc != SPI_OK_UPDATE) elog(ERROR, "outbox relay: recording a rejection failed");
    });
    return dead;
  }

  BatchResult run_batch() {
    BatchResult result;
    begin_transaction("outbox relay: fetching");
    const Fetched batch = fetch();
    result.fetched = batch.count;
    result.full = batch.full;
    if (batch.count == 0) {
      commit_transaction();
      return result;
    }

    std::vector<sinks::Message> messages(batch.count);
    for (int i = 0; i < batch.count; ++i) {
      const Row& row = batch.rows[i];
      sinks::Message& m = messages[i];
      m.id = row.id.view();
      m.aggregatetype = row.aggregatetype.view();
      m.aggregateid = row.aggregateid.view();
      m.type = row.type.view();
      m.payload = row.payload.view();
      m.created_at_unix_us =
          row.created_at + static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
                               SECS_PER_DAY * USECS_PER_SEC;
      m.headers.reserve(row.nheaders);
      for (int h = 0; h < row.nheaders; ++h) {
        m.headers.emplace_back(row.header_keys[h].view(), row.header_values[h].view());
      }
    }

    publish(WorkerState::kSending);
    guard([&] {
      pgstat_report_activity(STATE_RUNNING, psprintf("outbox relay: sending %d events to %s",
                                                     batch.count, sink_name_.c_str()));
    });
    std::vector<sinks::Outcome> outcomes(batch.count);
    try {
      sink_->send(messages, outcomes, std::chrono::milliseconds(settings.send_timeout_ms));
    } catch (const std::exception& e) {
      for (auto& o : outcomes) o = {sinks::Delivery::kUnavailable, e.what()};
    }

    guard([] { pgstat_report_activity(STATE_RUNNING, "outbox relay: marking"); });
    mark_acked(batch, outcomes);
    for (int i = 0; i < batch.count; ++i) {
      const sinks::Outcome& o = outcomes[i];
      switch (o.delivery) {
        case sinks::Delivery::kAcked:
          ++result.acked;
          break;
        case sinks::Delivery::kRejected:
          ++result.rejected;
          if (mark_rejected(batch.rows[i], o.error)) ++result.dead;
          if (result.first_error.empty()) result.first_error = "event rejected: " + o.error;
          break;
        case sinks::Delivery::kUnavailable:
          ++result.unavailable;
          if (result.first_error.empty() || result.rejected == 0) {
            result.first_error = "sink unavailable: " + o.error;
          }
          break;
      }
    }
    commit_transaction();

    const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
    ++counters_.batches;
    counters_.events_sent += result.acked;
    counters_.events_failed += result.rejected;
    counters_.events_dead += result.dead;
    if (result.acked > 0) counters_.last_success_at = now;
    if (result.rejected > 0) {
      record_error(result.first_error);
      guard([&] {
        ereport(LOG, (errmsg("outbox relay %d: the sink rejected %d of %d events (%d now "
                             "dead-lettered): %s",
                             index_ + 1, result.rejected, batch.count, result.dead,
                             result.first_error.c_str())));
      });
    }
    publish(counters_.state);
    return result;
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
  std::unique_ptr<sinks::Sink> sink_;
  std::string sink_name_;
  uint32 generation_ = 0;
  TimestampTz config_updated_at_ = 0;
  int failures_ = 0;
  WorkerCounters counters_{};
  SPIPlanPtr fetch_plan_ = nullptr;
  int64 resume_after_seq_ = -1;
  TimestampTz last_batch_start_ = 0;
  bool last_batch_was_small_ = false;
  TimestampTz last_full_scan_ = 0;
  boost::container::flat_map<Oid, SPIPlanPtr> mark_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> reject_plans_;
};

}  // namespace
}  // namespace outbox::pg

void outbox_relay_main(Datum arg) {
  const int index = DatumGetInt32(arg);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  BackgroundWorkerUnblockSignals();
  BackgroundWorkerInitializeConnection(outbox::pg::settings.database, nullptr, 0);
  pgstat_report_appname("outbox relay");
  // The relay's own commits (the published marks) need not wait for the WAL flush: if a
  // crash loses the last ones, those events are sent again, which at-least-once delivery
  // allows anyway. It saves an fsync per batch, which is most of a batch's latency.
  SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
  outbox::pg::relay_worker_attach(index);

  // Past this point errors are C++ exceptions. Anything that escapes the loop ends the
  // worker with exit code 1: the postmaster restarts it after bgw_restart_time, and no
  // other backend is disturbed (a death by signal would restart them all).
  int exit_code = 0;
  try {
    outbox::pg::Relay relay(index);
    relay.run();
  } catch (const outbox::pg::PgError& e) {
    ErrorData* data = e.data();
    data->elevel = LOG;
    outbox::pg::guard([&] { ThrowErrorData(data); });
    exit_code = 1;
  } catch (const std::exception& e) {
    elog(LOG, "outbox relay %d: stopping after an unexpected error: %s", index + 1, e.what());
    exit_code = 1;
  } catch (...) {
    elog(LOG, "outbox relay %d: stopping after an unexpected error", index + 1);
    exit_code = 1;
  }
  outbox::pg::relay_worker_detach(index);
  proc_exit(exit_code);
}
