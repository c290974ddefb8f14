// The launcher: one background worker, registered at server start, that starts the relay
// workers of every database that has the extension, and starts them again when they stop.
//
// Why not register the relays themselves at server start: a worker that exits is either
// restarted by the postmaster every bgw_restart_time, whatever the cause, or never again.
// The launcher connects to no database. It reads pg_database at start, when a session
// pokes it (a commit of CREATE EXTENSION or configure_sink, DROP DATABASE and its kind:
// pg/database_commands.cpp) and every minute. In every database it starts outbox.workers
// relays: they find the extension, or mark the database absent and exit; such a database
// gives its entry (outbox.max_databases of them) back and costs nothing more until
// CREATE EXTENSION. Each database gets one relay before any gets a
// second, within outbox.max_workers. It watches each relay as a dynamic worker, and
// starts one again after it stops, sooner if it had run for a while. What it decides is in
// the slots and the database entries (database_entries.cpp), for outbox.status.
#include <algorithm>

#include "relay/launcher.hpp"

#include "core/pacing.hpp"
#include "core/worker_budget.hpp"
#include "pg/boundary.hpp"
#include "pg/relay_slots.hpp"
#include "pg/settings.hpp"
#include "relay/database_entries.hpp"

extern "C" {
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
constexpr int64 kScanEveryUs = 60 * 1000 * 1000;

// The back-off of the attempt-th failure in a row (core/pacing.hpp), in microseconds.
int64 backoff_us(int attempt) {
  return pacing::backoff_ms(kFirstDelayMs, kMaxDelayMs, attempt) * int64{1000};
}

// The launcher's side of a slot.
struct Relay {
  BackgroundWorkerHandle* handle = nullptr;
  TimestampTz started_at = 0;
  TimestampTz start_at = 0;  // not before
  int failures = 0;          // stops soon after a start, and failed starts, in a row
};

class Launcher {
 public:
  void run() {
    relay_launcher_attach();
    relays_.resize(relay_slot_count());
    uint32 pokes = relay_launcher_pokes() - 1;  // read pg_database at once
    TimestampTz scanned_at = 0;
    while (!ShutdownRequestPending) {
      guard([] {
        if (ConfigReloadPending) {
          ConfigReloadPending = false;
          ProcessConfigFile(PGC_SIGHUP);
        }
      });
      TimestampTz now = guard([] { return GetCurrentTimestamp(); });
      const bool scan = relay_launcher_pokes() != pokes || now - scanned_at >= kScanEveryUs;
      if (scan) {
        pokes = relay_launcher_pokes();
        databases_.scan();
        scanned_at = now;
        restricted_to_missing();
      }
      databases_.track(scan);
      int64 wait_us = plan();
      // Slots the plan took back free their databases' entries (an absent database's), for
      // a database that waits for one.
      if (databases_.track(false)) wait_us = plan();
      wait_us = std::min(wait_us, kScanEveryUs - (now - scanned_at));
      guard([wait_us] {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                        std::max<int64>(1, wait_us / 1000), PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
      });
    }
  }

 private:
  // outbox.database names a database that does not exist: said once, and again when it
  // exists.
  void restricted_to_missing() {
    const char* name = settings.database;
    if (name[0] == '\0') return;
    bool exists = false;
    for (const ClusterDatabase& d : databases_.all()) exists = exists || strcmp(d.name, name) == 0;
    if (exists && missing_logged_) {
      guard([name] {
        ereport(LOG,
                (errmsg("outbox launcher: database \"%s\" exists now; starting the relay", name)));
      });
    } else if (!exists && !missing_logged_) {
      guard([name] {
        ereport(WARNING,
                (errcode(ERRCODE_UNDEFINED_DATABASE),
                 errmsg("outbox launcher: database \"%s\" (outbox.database) does not exist; no "
                        "relay runs",
                        name),
                 errhint("Create it, or empty outbox.database (relays in every database that has "
                         "the extension) and restart the server. The launcher logs when it finds "
                         "it.")));
      });
    }
    missing_logged_ = !exists;
  }

  // How many relays the database should have now. All of them start together, also where
  // the extension is not known to be yet: workers that start one after another would find
  // every shard claimed by the first (relay/ownership.cpp), and past the cap only the
  // databases' first workers look anyway (core/worker_budget.hpp).
  // A database with a replay to send wants one more, its replay worker (relay/replay.cpp):
  // worker number outbox.workers, the last to get a slot.
  static int wanted(const ClusterDatabase& d, const DatabaseView& view) {
    if (!d.connectable || !view.tracked || view.absent || view.paused) return 0;
    return settings.workers + (view.replay ? 1 : 0);
  }

  // Tends every slot, and shares the slots out among the databases that want relays
  // (core/worker_budget.hpp); returns how soon to look again.
  int64 plan() {
    const TimestampTz now = guard([] { return GetCurrentTimestamp(); });
    const int n = relay_slot_count();
    std::vector<budget::Slot> slots(n);
    for (int i = 0; i < n; ++i) {
      watch(i, now);
      const SlotView view = relay_slot_read(i);
      slots[i] =
          budget::Slot{view.database, view.worker, view.in_use || relays_[i].handle != nullptr};
    }
    std::vector<budget::Want> wants;
    for (const ClusterDatabase& d : databases_.all()) {
      const DatabaseView view = relay_database_read(d.oid);
      wants.push_back(budget::Want{d.oid, wanted(d, view)});
      if (view.tracked) {
        relay_database_note(d.oid, view.paused      ? DatabaseNote::kPaused
                                   : !d.connectable ? DatabaseNote::kNotConnectable
                                                    : DatabaseNote::kNone);
      }
    }
    const budget::Plan plan = budget::plan(wants, slots);
    for (const uint32 oid : plan.starved) relay_database_note(oid, DatabaseNote::kNoWorkerLeft);
    int64 wait_us = kMaxDelayUs;
    for (const uint32 oid : plan.draining) {
      // A database that takes no connections any more, or is a template now: its relays go.
      // (A paused one's were told by the session that paused it; an absent one's leave.)
      const ClusterDatabase* d = databases_.find(oid);
      if (d == nullptr || !d->connectable) relay_stop_database(oid);
      wait_us = kFirstDelayUs;
    }
    for (int i = 0; i < n; ++i) {
      const budget::Slot& slot = plan.slots[i];
      if (slot.database != slots[i].database || slot.worker != slots[i].worker) {
        relay_slot_assign(i, slot.database, slot.worker);
        relays_[i] = Relay{};
      }
      if (slot.database != 0) wait_us = std::min(wait_us, tend(i, now));
    }
    return wait_us;
  }

  // Notices that slot i's relay stopped.
  void watch(int i, TimestampTz now) {
    Relay& relay = relays_[i];
    if (relay.handle == nullptr) return;
    pid_t pid;
    const BgwHandleStatus status =
        guard([&] { return GetBackgroundWorkerPid(relay.handle, &pid); });
    if (status == BGWH_STARTED || status == BGWH_NOT_YET_STARTED) return;
    guard([&] { pfree(relay.handle); });
    relay.handle = nullptr;
    // Stopped on request (SIGTERM: a database command, pg_terminate_backend) or because the
    // extension is gone: started again at once if it is still wanted.
    if (!relay_slot_stopped(i)) {
      relay.failures = 0;
      relay.start_at = now;
      return;
    }
    relay.failures = now - relay.started_at >= kHealthyRunUs ? 1 : relay.failures + 1;
    relay.start_at = now + backoff_us(relay.failures);
    relay_slot_explain(i, "the relay stopped; the launcher starts it again at backoff_until",
                       relay.start_at);
  }

  // Starts slot i's relay when it is due; returns how soon to look again (the postmaster
  // also wakes the launcher when a relay it started starts or stops).
  int64 tend(int i, TimestampTz now) {
    Relay& relay = relays_[i];
    if (relay.handle != nullptr) return kMaxDelayUs;
    // A relay started by an earlier launcher (one that was terminated) may still run.
    if (relay_slot_in_use(i)) return kFirstDelayUs;
    if (now < relay.start_at) return relay.start_at - now;
    const SlotView slot = relay_slot_read(i);
    const ClusterDatabase* d = databases_.find(slot.database);
    if (d == nullptr) return kFirstDelayUs;
    if (!start(i, *d, slot.worker)) {
      relay.start_at = now + backoff_us(++relay.failures);
      relay_slot_explain(i,
                         "no background worker slot is free: raise max_worker_processes (the "
                         "relays need outbox.max_workers of them, plus one for the launcher)",
                         relay.start_at);
      return relay.start_at - now;
    }
    relay.started_at = now;
    return kMaxDelayUs;
  }

  bool start(int i, const ClusterDatabase& d, int worker) {
    BackgroundWorker bgw;
    memset(&bgw, 0, sizeof(bgw));
    bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
    bgw.bgw_restart_time = BGW_NEVER_RESTART;  // the launcher does it
    snprintf(bgw.bgw_library_name, BGW_MAXLEN, "outbox");
    // The slot after the relays' is the replay worker's (wanted()); its entry point makes it
    // one (relay/worker_main.cpp).
    if (worker == settings.workers) {
      snprintf(bgw.bgw_function_name, BGW_MAXLEN, "outbox_replay_main");
      snprintf(bgw.bgw_name, BGW_MAXLEN, "outbox replay in %s", d.name);
      snprintf(bgw.bgw_type, BGW_MAXLEN, "outbox replay");
    } else {
      snprintf(bgw.bgw_function_name, BGW_MAXLEN, "outbox_relay_main");
      snprintf(bgw.bgw_name, BGW_MAXLEN, "outbox relay %d in %s", worker + 1, d.name);
      snprintf(bgw.bgw_type, BGW_MAXLEN, "outbox relay");
    }
    bgw.bgw_main_arg = Int32GetDatum(i);
    const RelayStart what{d.oid, worker};
    memcpy(bgw.bgw_extra, &what, sizeof(what));
    bgw.bgw_notify_pid = MyProcPid;
    BackgroundWorkerHandle* handle = nullptr;
    const bool registered = guard([&] { return RegisterDynamicBackgroundWorker(&bgw, &handle); });
    relays_[i].handle = registered ? handle : nullptr;
    if (registered) relay_slot_explain(i, "starting", 0);
    return registered;
  }

  std::vector<Relay> relays_;
  DatabaseEntries databases_;
  bool missing_logged_ = false;
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
                (errcode(ERRCODE_WARNING_DEPRECATED_FEATURE),
                 errmsg("outbox launcher: outbox.ordering = none is retired; the relay keeps the "
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
