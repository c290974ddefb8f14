// The SQL side of the relay's cumulative statistics (pg/relay_stats.hpp), for this database:
// outbox._sink_stats(), outbox._histograms() and outbox._database_stats(), which the views of
// docs/monitoring.md read.
#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"
#include "pg/relay_stats.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/tuplestore.h"
}

namespace outbox::pg {
namespace {

constexpr int kMaxSinks = 16;  // entries of one database at most (sinks configured since start)

Datum bigint(uint64 v) { return Int64GetDatum(static_cast<int64>(v)); }

template <typename Tally, std::size_t N>
void put_histogram(ReturnSetInfo* rsinfo, const char* sink, const char* name, const Tally& t,
                   const std::array<double, N>& bounds, double sum_scale) {
  Datum le[N];
  Datum buckets[N];
  uint64 cumulative = 0;
  for (std::size_t i = 0; i < N; ++i) {
    cumulative += t.counts[i];
    le[i] = Float8GetDatum(bounds[i]);
    buckets[i] = bigint(cumulative);
  }
  Datum values[6] = {
      CStringGetTextDatum(sink),
      CStringGetTextDatum(name),
      PointerGetDatum(construct_array(le, N, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
      PointerGetDatum(construct_array(buckets, N, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
      Float8GetDatum(static_cast<double>(t.sum) / sum_scale),
      bigint(t.count())};
  bool nulls[6] = {};
  tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

// A set-returning function's rows, `put` called for each sink of this database.
template <typename Put>
void each_sink(FunctionCallInfo fcinfo, Put put) {
  InitMaterializedSRF(fcinfo, 0);
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  SinkStatsView sinks[kMaxSinks];
  const int n = relay_stats_sinks(MyDatabaseId, sinks, kMaxSinks);
  for (int i = 0; i < n; ++i) put(rsinfo, sinks[i].sink, sinks[i].totals);
}

}  // namespace
}  // namespace outbox::pg

// outbox._sink_stats(): one row per sink the relays of this database sent with since the
// server started.
OUTBOX_FUNCTION(outbox_sink_stats) {
  using namespace outbox::pg;
  guard([&] {
    each_sink(fcinfo, [](ReturnSetInfo* rsinfo, const char* sink, const RelayStatsDelta& t) {
      Datum values[8] = {CStringGetTextDatum(sink), bigint(t.events_sent), bigint(t.events_failed),
                         bigint(t.events_rejected), bigint(t.events_dead), bigint(t.batches),
                         bigint(t.bytes_sent),      bigint(t.backoffs)};
      bool nulls[8] = {};
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    });
  });
  return (Datum)0;
}

// outbox._histograms(): three rows per sink: le (the bounds, +Inf left out), the cumulative
// count at each, the sum and the count.
OUTBOX_FUNCTION(outbox_histograms) {
  using namespace outbox::pg;
  using namespace outbox::histogram;
  guard([&] {
    each_sink(fcinfo, [](ReturnSetInfo* rsinfo, const char* sink, const RelayStatsDelta& t) {
      put_histogram(rsinfo, sink, "delivery_latency_seconds", t.latency, kSecondsBounds, kMicros);
      put_histogram(rsinfo, sink, "batch_round_trip_seconds", t.round_trip, kSecondsBounds,
                    kMicros);
      put_histogram(rsinfo, sink, "batch_size_events", t.batch_size, kSizeBounds, kUnits);
    });
  });
  return (Datum)0;
}

// outbox._database_stats(): the relays' starts and exits, the events requeued, the sealed
// floor, and how many relays run against how many are wanted.
OUTBOX_FUNCTION(outbox_database_stats) {
  using namespace outbox::pg;
  return guard([&] {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE) {
      elog(ERROR, "outbox._database_stats must return a record");
    }
    desc = BlessTupleDesc(desc);
    const DatabaseStatsView s = relay_stats_database(MyDatabaseId);
    int running = 0;
    for (int i = 0; i < relay_slot_count(); ++i) {
      const SlotView slot = relay_slot_read(i);
      if (slot.in_use && slot.database == MyDatabaseId) ++running;
    }
    const bool preloaded = relay_shmem_available();
    // outbox.database, when set, restricts the relays to that one database.
    const char* name = get_database_name(MyDatabaseId);
    const bool served = preloaded && (settings.database[0] == '\0' ||
                                      (name != nullptr && strcmp(settings.database, name) == 0));
    const TimestampTz floor = preloaded ? relay_enqueue_floor(MyDatabaseId) : DT_NOBEGIN;
    const bool capped =
        preloaded && relay_database_read(MyDatabaseId).note == DatabaseNote::kNoWorkerLeft;
    Datum values[9] = {bigint(s.relay_starts),
                       bigint(s.relay_exits[static_cast<int>(RelayExit::kClean)]),
                       bigint(s.relay_exits[static_cast<int>(RelayExit::kError)]),
                       bigint(s.relay_exits[static_cast<int>(RelayExit::kLost)]),
                       bigint(s.events_requeued),
                       TimestampTzGetDatum(floor),
                       Int32GetDatum(running),
                       Int32GetDatum(served ? settings.workers : 0),
                       BoolGetDatum(capped)};
    bool nulls[9] = {};
    nulls[5] = floor == DT_NOBEGIN;
    return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
  });
}

// outbox._count_requeued(n): requeue() and requeue_dead() count what they moved; added to the
// statistics if the transaction commits.
OUTBOX_FUNCTION(outbox_count_requeued) {
  outbox::pg::relay_stats_requeued(PG_GETARG_INT64(0));
  return outbox::pg::guard([] { PG_RETURN_VOID(); });
}
