// Nothing in the DBA's way: DROP DATABASE, CREATE DATABASE ... TEMPLATE, ALTER DATABASE ...
// RENAME and ALTER DATABASE ... SET TABLESPACE need the database to themselves, and wait
// 5 s for other sessions to leave before they fail. Before one runs, this ProcessUtility
// hook stops the database's relays (SIGTERM: each ends its step, and what it had not
// delivered is sent again by the next relay) and keeps the launcher from starting new ones
// until the transaction ends. ALTER DATABASE ... ALLOW_CONNECTIONS or IS_TEMPLATE, and
// every one of those commands, make the launcher read pg_database again at the end (it
// stops the relays of a database that no longer takes connections, or is a template).
//
// COMMIT PREPARED wakes the relay too: the prepared transaction's own wake-up was dropped at
// PREPARE (its transaction enqueued in another session, or long ago).
#include "pg/database_commands.hpp"

#include "pg/boundary.hpp"
#include "pg/commit_wake.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"

extern "C" {
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "tcop/utility.h"
}

namespace outbox::pg {
namespace {

ProcessUtility_hook_type prev_process_utility = nullptr;

// The databases this transaction paused, resumed when it ends.
constexpr int kMaxPaused = 16;
Oid paused[kMaxPaused];
int n_paused = 0;
bool poke_at_end = false;

bool has_option(List* options, const char* name) {
  ListCell* cell;
  foreach (cell, options) {
    if (strcmp(static_cast<DefElem*>(lfirst(cell))->defname, name) == 0) return true;
  }
  return false;
}

const char* option_string(List* options, const char* name) {
  ListCell* cell;
  foreach (cell, options) {
    auto* def = static_cast<DefElem*>(lfirst(cell));
    if (strcmp(def->defname, name) == 0 && def->arg != nullptr) return defGetString(def);
  }
  return nullptr;
}

// The database that the statement needs to itself, or nullptr. Also notes whether the
// launcher must read pg_database again at the end.
const char* needs_alone(Node* stmt) {
  switch (nodeTag(stmt)) {
    case T_DropdbStmt:
      poke_at_end = true;
      return reinterpret_cast<DropdbStmt*>(stmt)->dbname;
    case T_CreatedbStmt:
      poke_at_end = true;  // the new database may have the extension
      return option_string(reinterpret_cast<CreatedbStmt*>(stmt)->options, "template");
    case T_RenameStmt: {
      auto* rename = reinterpret_cast<RenameStmt*>(stmt);
      if (rename->renameType != OBJECT_DATABASE) return nullptr;
      poke_at_end = true;
      return rename->subname;
    }
    case T_AlterDatabaseStmt: {
      auto* alter = reinterpret_cast<AlterDatabaseStmt*>(stmt);
      if (has_option(alter->options, "allow_connections") ||
          has_option(alter->options, "is_template")) {
        poke_at_end = true;
      }
      if (!has_option(alter->options, "tablespace")) return nullptr;
      poke_at_end = true;
      return alter->dbname;
    }
    default:
      return nullptr;
  }
}

void pause_relays(const char* name) {
  const Oid database = get_database_oid(name, true);
  // Each of these commands needs the database's owner (CREATE DATABASE ... TEMPLATE of a
  // database that is no template, too): a role that may not run it cannot stop the relays
  // by trying.
  if (!OidIsValid(database) || !owns_database(database)) return;
  bool known = false;
  for (int i = 0; i < n_paused; ++i) known = known || paused[i] == database;
  // Paused first: a relay that attaches after this sees it and leaves; one attached before
  // gets the signal. (Past kMaxPaused databases in one transaction, the signal alone.)
  if (!known && n_paused < kMaxPaused) {
    relay_database_pause(database);
    paused[n_paused++] = database;
  }
  relay_stop_database(database);
}

void xact_callback(XactEvent event, void*) {
  if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
      event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT &&
      event != XACT_EVENT_PREPARE) {
    return;
  }
  for (int i = 0; i < n_paused; ++i) relay_database_resume(paused[i]);
  if (poke_at_end && n_paused == 0) relay_launcher_poke();
  n_paused = 0;
  poke_at_end = false;
}

// A plain C hook: no C++ object lives in its frame, so an ERROR may pass through it.
void process_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree,
                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* env,
                     DestReceiver* dest, QueryCompletion* qc) {
  Node* stmt = pstmt->utilityStmt;
  if (IsA(stmt, TransactionStmt) &&
      reinterpret_cast<TransactionStmt*>(stmt)->kind == TRANS_STMT_COMMIT_PREPARED) {
    relay_wake_at_commit(false);
  }
  if (relay_shmem_available()) {
    const char* alone = needs_alone(stmt);
    if (alone != nullptr) pause_relays(alone);
  }
  if (prev_process_utility != nullptr) {
    prev_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
  } else {
    standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
  }
}

}  // namespace

void relay_register_database_commands() {
  prev_process_utility = ProcessUtility_hook;
  ProcessUtility_hook = process_utility;
  RegisterXactCallback(xact_callback, nullptr);
}

}  // namespace outbox::pg
