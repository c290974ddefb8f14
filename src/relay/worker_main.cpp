// The worker processes the launcher starts in a database (relay/launcher.cpp): a relay
// (outbox_relay_main) or the replay worker (outbox_replay_main). One setup for both: the
// signals, the connection, the session's settings, the slot, and the boundary that turns what
// escapes the loop into exit code 1 with a reason in the slot.
#include <cstdio>

#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"
#include "pg/relay_stats.hpp"
#include "relay/launcher.hpp"
#include "relay/relay.hpp"
#include "relay/replay.hpp"
#include "relay/worker_loop.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
}

extern "C" {
PGDLLEXPORT void outbox_relay_main(Datum arg);
PGDLLEXPORT void outbox_replay_main(Datum arg);
}

namespace outbox::pg::relay {
namespace {

// The settings every worker's session runs with.
void set_session_options() {
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
  // needs a snapshot taken after it.
  SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
}

void log_stop(Role role, int worker, const char* why) {
  if (role == Role::kReplay) {
    elog(LOG, "outbox replay: %s", why);
  } else {
    elog(LOG, "outbox relay %d: %s", worker + 1, why);
  }
}

// The role's loop, until it ends; false with `why` set when an error stopped it.
bool run_role(Role role, int slot, int worker, char* why, size_t why_size) {
  // Past this point errors are C++ exceptions. Anything that escapes the loop ends the
  // worker with exit code 1, and no other backend is disturbed (a death by signal would
  // restart them all); the launcher starts it again.
  try {
    if (role == Role::kReplay) {
      Replayer replayer(slot, worker);
      replayer.run();
    } else {
      Relay relay(slot, worker);
      relay.run();
    }
    return true;
  } catch (const PgError& e) {
    snprintf(why, why_size, "stopped after an error: %s", e.what());
    log_error(e.data());
  } catch (const std::exception& e) {
    snprintf(why, why_size, "stopped after an unexpected error: %s", e.what());
    log_stop(role, worker, why);
  } catch (...) {
    snprintf(why, why_size, "stopped after an unexpected error");
    log_stop(role, worker, why);
  }
  return false;
}

// Both entry points: `arg` is the worker's slot. Does not return.
void worker_main(Role role, Datum arg) {
  const int slot = DatumGetInt32(arg);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  BackgroundWorkerUnblockSignals();
  // The launcher found the database and passes its oid (relay/launcher.cpp).
  RelayStart start;
  memcpy(&start, MyBgworkerEntry->bgw_extra, sizeof(start));
  BackgroundWorkerInitializeConnectionByOid(start.database, InvalidOid, 0);
  // The replay worker's starts and exits are not the relays' (pg/relay_stats.hpp).
  const bool relay = role == Role::kRelay;
  pgstat_report_appname(relay ? "outbox relay" : "outbox replay");
  set_session_options();
  relay_worker_attach(slot);
  if (relay) relay_stats_started(MyDatabaseId);
  // A session that needs the database to itself (pg/database_commands.cpp) paused it before
  // this attached, or sends this worker SIGTERM: either way it leaves.
  if (relay_database_paused(MyDatabaseId)) {
    relay_worker_detach(slot, nullptr);
    if (relay) relay_stats_exited(MyDatabaseId, RelayExit::kClean);
    proc_exit(0);
  }
  char why[256] = "";
  const bool clean = run_role(role, slot, start.worker, why, sizeof(why));
  // outbox.status shows why it stopped.
  relay_worker_detach(slot, why[0] != '\0' ? why : nullptr);
  if (relay) relay_stats_exited(MyDatabaseId, clean ? RelayExit::kClean : RelayExit::kError);
  proc_exit(clean ? 0 : 1);
}

}  // namespace
}  // namespace outbox::pg::relay

void outbox_relay_main(Datum arg) {
  outbox::pg::relay::worker_main(outbox::pg::relay::Role::kRelay, arg);
}

void outbox_replay_main(Datum arg) {
  outbox::pg::relay::worker_main(outbox::pg::relay::Role::kReplay, arg);
}
