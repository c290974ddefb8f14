// The launcher: one background worker, registered at server start, that starts the relay
// workers and starts them again when they stop.
//
// Why not register the relays themselves at server start: a worker that exits is either
// restarted by the postmaster every bgw_restart_time, whatever the cause (a database that
// does not exist logged a FATAL every 5 s, forever), or never again (pg_terminate_backend on
// the relay stopped it until the next server restart). The launcher connects to no database;
// it looks the relay's database up in pg_database, says once and clearly when it is missing,
// and looks again at doubling intervals; it starts each relay as a dynamic worker that it
// watches, and starts one again after it stops, sooner if it had run for a while. What it
// decides is in the relay's shared-memory slot, for outbox.status.
#include <algorithm>

#include "relay/launcher.hpp"

#include "core/pacing.hpp"
#include "pg/boundary.hpp"
#include "pg/relay_shmem.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_database.h"
#include "utils/snapmgr.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
}

extern "C" {
PGDLLEXPORT void outbox_launcher_main(Datum arg);
}

namespace outbox::pg::relay {
namespace {

constexpr int kFirstDelayMs = 1000;
constexpr int kMaxDelayMs = 60 * 1000;
constexpr int64 kFirstDelayUs = kFirstDelayMs * int64{1000};
constexpr int64 kMaxDelayUs = kMaxDelayMs * int64{1000};
// A relay that ran at least this long before it stopped is started again after
// kFirstDelayUs; one that stopped sooner waits twice as long as the last time.
constexpr int64 kHealthyRunUs = 60 * 1000 * 1000;

// The back-off of the attempt-th failure in a row (core/pacing.hpp), in microseconds.
int64 backoff_us(int attempt) {
  return pacing::backoff_ms(kFirstDelayMs, kMaxDelayMs, attempt) * int64{1000};
}

struct Relay {
  BackgroundWorkerHandle* handle = nullptr;
  TimestampTz started_at = 0;
  TimestampTz start_at = 0;  // not before
  int failures = 0;          // stops soon after a start, and failed starts, in a row
};

class Launcher {
 public:
  void run() {
    const int n = relay_worker_count();
    relays_ = static_cast<Relay*>(guard([n] { return palloc0(sizeof(Relay) * n); }));
    for (int i = 0; i < n; ++i) relays_[i] = Relay{};
    while (!ShutdownRequestPending) {
      guard([] {
        if (ConfigReloadPending) {
          ConfigReloadPending = false;
          ProcessConfigFile(PGC_SIGHUP);
        }
      });
      const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
      int64 wait_us = kMaxDelayUs;
      for (int i = 0; i < n && !ShutdownRequestPending; ++i) {
        wait_us = std::min(wait_us, tend(i, now));
      }
      guard([wait_us] {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                        std::max<int64>(1, wait_us / 1000), PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
      });
    }
  }

 private:
  // Looks after relay i; returns how soon it needs looking at again (the postmaster also
  // wakes the launcher when a relay it started starts or stops).
  int64 tend(int i, TimestampTz now) {
    Relay& relay = relays_[i];
    if (relay.handle != nullptr) {
      pid_t pid;
      const BgwHandleStatus status =
          guard([&] { return GetBackgroundWorkerPid(relay.handle, &pid); });
      if (status == BGWH_STARTED || status == BGWH_NOT_YET_STARTED) return kMaxDelayUs;
      guard([&] { pfree(relay.handle); });
      relay.handle = nullptr;
      relay.failures = now - relay.started_at >= kHealthyRunUs ? 1 : relay.failures + 1;
      relay.start_at = now + backoff_us(relay.failures);
      explain(i, "the relay stopped; the launcher starts it again at backoff_until",
              relay.start_at);
    }
    // A relay started by an earlier launcher (one that was terminated) may still run.
    if (relay_slot_in_use(i)) return kFirstDelayUs;
    if (now < relay.start_at) return relay.start_at - now;

    const Oid database = find_database(now);
    if (!OidIsValid(database)) {
      explain(i, database_missing_, database_look_at_);
      return database_look_at_ - now;
    }
    if (!start(i, database)) {
      relay.start_at = now + backoff_us(++relay.failures);
      explain(i,
              "no background worker slot is free: raise max_worker_processes (the relay needs "
              "outbox.workers of them, plus one for the launcher)",
              relay.start_at);
      return relay.start_at - now;
    }
    relay.started_at = now;
    return kMaxDelayUs;
  }

  // The relay's database, looked up at most once per pass; InvalidOid while it does not
  // exist (then logged once, and looked up again at doubling intervals).
  Oid find_database(TimestampTz now) {
    if (now < database_look_at_) return InvalidOid;
    const char* name = settings.database;
    const Oid oid = guard([name] { return lookup_database(name); });
    if (OidIsValid(oid)) {
      if (database_misses_ != 0) {
        guard([name] {
          ereport(LOG, (errmsg("outbox launcher: database \"%s\" exists now; starting the relay",
                               name)));
        });
      }
      database_misses_ = 0;
      return oid;
    }
    if (database_misses_ == 0) {
      guard([name] {
        ereport(WARNING,
                (errmsg("outbox launcher: database \"%s\" (outbox.database) does not exist; no "
                        "relay runs",
                        name),
                 errhint("Set outbox.database to the database where CREATE EXTENSION outbox ran, "
                         "and restart the server; or create the database. The launcher looks "
                         "for it again every minute at most, and logs when it finds it.")));
      });
    }
    database_look_at_ = now + backoff_us(++database_misses_);
    snprintf(database_missing_, sizeof(database_missing_),
             "database \"%s\" (outbox.database) does not exist", name);
    return InvalidOid;
  }

  // Runs inside guard(). A heap scan of pg_database, as the autovacuum launcher does: with
  // no database selected, only the shared catalogs' heaps can be read, not their indexes.
  static Oid lookup_database(const char* name) {
    StartTransactionCommand();
    (void)GetTransactionSnapshot();
    Relation rel = table_open(DatabaseRelationId, AccessShareLock);
    TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
    Oid found = InvalidOid;
    for (HeapTuple tuple; (tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr;) {
      const auto* db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
      if (strcmp(NameStr(db->datname), name) == 0) {
        found = db->oid;
        break;
      }
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
    CommitTransactionCommand();
    return found;
  }

  bool start(int i, Oid database) {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;  // the launcher does it
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "outbox");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "outbox_relay_main");
    snprintf(worker.bgw_name, BGW_MAXLEN, "outbox relay %d", i + 1);
    snprintf(worker.bgw_type, BGW_MAXLEN, "outbox relay");
    worker.bgw_main_arg = Int32GetDatum(i);
    memcpy(worker.bgw_extra, &database, sizeof(database));
    worker.bgw_notify_pid = MyProcPid;
    BackgroundWorkerHandle* handle = nullptr;
    const bool registered =
        guard([&] { return RegisterDynamicBackgroundWorker(&worker, &handle); });
    relays_[i].handle = registered ? handle : nullptr;
    if (registered) explain(i, "starting", 0);
    return registered;
  }

  static void explain(int i, const char* detail, TimestampTz restart_at) {
    relay_slot_explain(i, detail, restart_at);
  }

  Relay* relays_ = nullptr;
  int database_misses_ = 0;  // lookups in a row that did not find it; 0: found the last time
  TimestampTz database_look_at_ = 0;
  char database_missing_[NAMEDATALEN + 64] = {};
};

}  // namespace

void register_launcher() {
  BackgroundWorker worker;
  memset(&worker, 0, sizeof(worker));
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
  // It exits with code 1 when terminated, and the postmaster starts it again after this.
  worker.bgw_restart_time = 5;
  snprintf(worker.bgw_library_name, BGW_MAXLEN, "outbox");
  snprintf(worker.bgw_function_name, BGW_MAXLEN, "outbox_launcher_main");
  snprintf(worker.bgw_name, BGW_MAXLEN, "outbox launcher");
  snprintf(worker.bgw_type, BGW_MAXLEN, "outbox launcher");
  RegisterBackgroundWorker(&worker);
}

}  // namespace outbox::pg::relay

void outbox_launcher_main(Datum) {
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  BackgroundWorkerUnblockSignals();
  // No database: only the shared catalogs (pg_database) are read.
  BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
  pgstat_report_appname("outbox launcher");
  try {
    if (outbox::pg::settings.ordering == outbox::pg::kOrderingNone) {
      outbox::pg::guard([] {
        ereport(WARNING,
                (errmsg("outbox launcher: outbox.ordering = none is retired; the relay keeps the "
                        "order of each key"),
                 errhint("Remove the setting. Ordered workers drain as fast as unordered ones "
                         "did, or faster.")));
      });
    }
    outbox::pg::relay::Launcher launcher;
    launcher.run();
  } catch (const outbox::pg::PgError& e) {
    outbox::pg::log_error(e.data());
  } catch (const std::exception& e) {
    elog(LOG, "outbox launcher: stopping after an unexpected error: %s", e.what());
  }
  // Exit code 1: the postmaster starts the launcher again after bgw_restart_time, also when
  // it was terminated by hand. At a server stop nothing is restarted.
  proc_exit(1);
}
