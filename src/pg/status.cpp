// outbox._workers(): what outbox.status shows of this database's relays, one row per relay
// worker (outbox.workers of them), running or not and why; when no relay can run at all,
// one row that says why. outbox._cluster_workers(): the same for every database's relays,
// for outbox.cluster_status.
#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "commands/dbcommands.h"
#include "miscadmin.h"
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

Row slot_row(const SlotView& slot, const char* database) {
  const WorkerCounters& c = slot.counters;
  Row row = empty_row();
  row.values[0] = Int32GetDatum(slot.worker + 1);
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
  set_text(row, 12, database);
  if (!slot.in_use) set_text(row, 13, slot.detail);
  if (slot.in_use) {
    row.values[14] = Int32GetDatum(c.shards);
    row.nulls[14] = false;
  }
  return row;
}

// Why worker `worker` of the database has no slot.
const char* no_slot_detail(Oid database, char* buf, size_t size) {
  const DatabaseView view = relay_database_read(database);
  if (!view.tracked && relay_databases_full()) {
    snprintf(buf, size,
             "waiting: outbox.max_databases (%d) databases already have relays; raise it and "
             "restart the server, or drop the extension in a database that needs no relay",
             relay_database_capacity());
    return buf;
  }
  if (!view.tracked) return "the launcher has not found this database yet";
  switch (view.note) {
    case DatabaseNote::kNoWorkerLeft:
      snprintf(buf, size,
               "outbox.max_workers (%d) relays run in other databases: raise outbox.max_workers "
               "(and max_worker_processes) and restart the server",
               settings.max_workers);
      return buf;
    case DatabaseNote::kPaused:
      return "a session needs the database to itself (DROP DATABASE, CREATE DATABASE ... "
             "TEMPLATE, ALTER DATABASE); the relays start again when its transaction ends";
    case DatabaseNote::kNotConnectable:
      return "the database takes no connections or is a template: no relay runs in it";
    case DatabaseNote::kNone:
      break;
  }
  return "the launcher starts it";
}

// Every worker of the database: its slot's row, or one that says why it has none.
template <typename Put>
void database_rows(Oid database, const char* name, Put&& put) {
  for (int w = 0; w < settings.workers; ++w) {
    bool found = false;
    for (int i = 0; i < relay_slot_count() && !found; ++i) {
      const SlotView slot = relay_slot_read(i);
      if (slot.database != database || slot.worker != w) continue;
      Row row = slot_row(slot, name);
      put(row);
      found = true;
    }
    if (found) continue;
    char buf[256];
    Row row = empty_row();
    row.values[0] = Int32GetDatum(w + 1);
    row.nulls[0] = false;
    set_text(row, 2, "not started");
    set_text(row, 12, name);
    set_text(row, 13, no_slot_detail(database, buf, sizeof(buf)));
    put(row);
  }
}

// One row that says why no relay runs in this database, or nullptr.
const char* disabled_detail(const char** state) {
  *state = "disabled";
  if (!relay_shmem_available()) {
    *state = "not running";
    return "outbox is not in shared_preload_libraries: no relay runs on this server";
  }
  if (settings.workers == 0) return "outbox.workers is 0: no relay runs on this server";
  if (settings.max_workers == 0) return "outbox.max_workers is 0: no relay runs on this server";
  return nullptr;
}

}  // namespace
}  // namespace outbox::pg

namespace outbox::pg {
namespace {

// Materialize mode by hand, with our own error outside a FROM clause. Runs inside guard().
ReturnSetInfo* materialize(FunctionCallInfo fcinfo, const char* function, int* columns) {
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) ||
      (rsinfo->allowedModes & SFRM_Materialize) == 0) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("%s must be called in a FROM clause", function)));
  }
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE) {
    elog(ERROR, "%s must return a record", function);
  }
  *columns = desc->natts;
  if (desc->natts != kColumns && desc->natts != kColumns040 && desc->natts != kColumnsBefore040) {
    elog(ERROR, "%s: unexpected result type; run ALTER EXTENSION outbox UPDATE", function);
  }
  MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
  rsinfo->returnMode = SFRM_Materialize;
  rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
  rsinfo->setDesc = CreateTupleDescCopy(desc);
  MemoryContextSwitchTo(old);
  return rsinfo;
}

}  // namespace
}  // namespace outbox::pg

OUTBOX_FUNCTION(outbox_workers) {
  using namespace outbox::pg;
  guard([&] {
    int columns;
    ReturnSetInfo* rsinfo = materialize(fcinfo, "outbox._workers", &columns);
    auto put = [&](Row& row) {
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
    };
    const char* name = get_database_name(MyDatabaseId);
    const char* state;
    const char* detail = disabled_detail(&state);
    if (detail == nullptr && settings.database[0] != '\0' && strcmp(settings.database, name) != 0) {
      detail = "outbox.database restricts the relay to another database";
    }
    if (detail != nullptr) {
      // 0.3.0's view showed no row here; 0.4.0's says why nothing runs.
      if (columns == kColumnsBefore040) return;
      Row row = empty_row();
      set_text(row, 2, state);
      set_text(row, 12, relay_shmem_available() ? name : nullptr);
      set_text(row, 13, detail);
      put(row);
      return;
    }
    database_rows(MyDatabaseId, name, [&](Row& row) {
      if (columns == kColumnsBefore040 && row.nulls[1]) return;  // only running ones
      put(row);
    });
  });
  return (Datum)0;
}

// Every database's relays: those with a slot, those the launcher tracks that want one, and
// those known to have the extension that wait for an entry (outbox.max_databases).
OUTBOX_FUNCTION(outbox_cluster_workers) {
  using namespace outbox::pg;
  // Read before the guard: an error inside it jumps over the lambda's destructors.
  const std::vector<Oid> tracked = relay_database_list();
  const std::vector<Oid> waiting = relay_database_waiting();
  guard([&] {
    int columns;
    ReturnSetInfo* rsinfo = materialize(fcinfo, "outbox._cluster_workers", &columns);
    auto put = [&](Row& row) {
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
    };
    const char* state;
    const char* detail = disabled_detail(&state);
    if (detail != nullptr) {
      Row row = empty_row();
      set_text(row, 2, state);
      set_text(row, 13, detail);
      put(row);
      return;
    }
    for (const Oid database : tracked) {
      const DatabaseView view = relay_database_read(database);
      const char* name = get_database_name(database);
      if (name == nullptr || view.absent || view.note == DatabaseNote::kNotConnectable) continue;
      database_rows(database, name, put);
    }
    for (const Oid database : waiting) {
      const char* name = get_database_name(database);
      if (name != nullptr && !relay_database_read(database).tracked) {
        database_rows(database, name, put);
      }
    }
  });
  return (Datum)0;
}
