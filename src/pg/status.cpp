// outbox._workers(): what outbox.status shows of the relay. One row per worker slot, running
// or not; when no relay can run at all, one row that says why.
#include "pg/boundary.hpp"
#include "pg/relay_shmem.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "utils/tuplestore.h"
}

namespace outbox::pg {
namespace {

// 0.5.0 has 15 columns; until ALTER EXTENSION outbox UPDATE, 0.4.0's 14 or 0.3.0's 12.
constexpr int kColumns = 15;
constexpr int kColumns040 = 14;
constexpr int kColumnsBefore040 = 12;

struct Row {
  Datum values[kColumns];
  bool nulls[kColumns];
};

Row empty_row() {
  Row row;
  for (int i = 0; i < kColumns; ++i) {
    row.values[i] = 0;
    row.nulls[i] = true;
  }
  return row;
}

void set_text(Row& row, int column, const char* text) {
  if (text == nullptr || text[0] == '\0') return;
  row.values[column] = CStringGetTextDatum(text);
  row.nulls[column] = false;
}

void set_time(Row& row, int column, TimestampTz t) {
  if (t == 0) return;
  row.values[column] = TimestampTzGetDatum(t);
  row.nulls[column] = false;
}

Row slot_row(int index, const SlotView& slot) {
  const WorkerCounters& c = slot.counters;
  Row row = empty_row();
  row.values[0] = Int32GetDatum(index + 1);
  row.nulls[0] = false;
  if (slot.in_use) {
    row.values[1] = Int32GetDatum(c.pid);
    row.nulls[1] = false;
  }
  const bool ran = c.pid != 0;
  set_text(row, 2, slot.in_use || ran ? worker_state_name(c.state) : "not started");
  if (slot.in_use) set_text(row, 3, c.sink);
  const int64 counts[4] = {static_cast<int64>(c.batches), static_cast<int64>(c.events_sent),
                           static_cast<int64>(c.events_failed), static_cast<int64>(c.events_dead)};
  for (int k = 0; k < 4; ++k) {
    row.values[4 + k] = Int64GetDatum(counts[k]);
    row.nulls[4 + k] = false;
  }
  set_text(row, 8, c.last_error);
  set_time(row, 9, c.last_error_at);
  set_time(row, 10, c.last_success_at);
  set_time(row, 11, slot.in_use ? c.backoff_until : slot.restart_at);
  set_text(row, 12, settings.database);
  if (!slot.in_use) set_text(row, 13, slot.detail);
  if (slot.in_use) {
    row.values[14] = Int32GetDatum(c.shards);
    row.nulls[14] = false;
  }
  return row;
}

}  // namespace
}  // namespace outbox::pg

OUTBOX_FUNCTION(outbox_workers) {
  using namespace outbox::pg;
  guard([&] {
    // Materialize mode by hand, with our own error outside a FROM clause.
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) ||
        (rsinfo->allowedModes & SFRM_Materialize) == 0) {
      ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                      errmsg("outbox._workers must be called in a FROM clause")));
    }
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE) {
      elog(ERROR, "outbox._workers must return a record");
    }
    if (desc->natts != kColumns && desc->natts != kColumns040 && desc->natts != kColumnsBefore040) {
      elog(ERROR, "outbox._workers: unexpected result type; run ALTER EXTENSION outbox UPDATE");
    }
    MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
    rsinfo->returnMode = SFRM_Materialize;
    rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
    rsinfo->setDesc = CreateTupleDescCopy(desc);
    MemoryContextSwitchTo(old);
    auto put = [&](Row& row) {
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
    };

    if (!relay_shmem_available() || relay_worker_count() == 0) {
      // 0.3.0's view showed no row here; 0.4.0's says why nothing runs.
      if (desc->natts == kColumnsBefore040) return;
      Row row = empty_row();
      const bool preloaded = relay_shmem_available();
      set_text(row, 2, preloaded ? "disabled" : "not running");
      set_text(row, 12, preloaded ? settings.database : nullptr);
      set_text(row, 13,
               preloaded ? "outbox.workers is 0: no relay runs on this server"
                         : "outbox is not in shared_preload_libraries: no relay runs "
                           "on this server");
      put(row);
      return;
    }
    for (int i = 0; i < relay_worker_count(); ++i) {
      const SlotView slot = relay_slot_read(i);
      if (desc->natts == kColumnsBefore040 && !slot.in_use) continue;
      Row row = slot_row(i, slot);
      put(row);
    }
  });
  return (Datum)0;
}
