// outbox._drop_guard(): the ddl_command_start event trigger on DROP EXTENSION and DROP
// SCHEMA. Dropping the extension deletes every event the relay has not delivered; that is
// refused unless outbox.drop_discards_events is on in the dropping transaction.
//
// It also takes outbox.events' lock before the drop takes any other: the relay takes that
// lock first in each of its transactions, so the two never wait for each other in a cycle
// (a deadlock, which killed the DROP now and then). And it tells the relay, at commit, to read
// its configuration again: it forgets the dropped sink.
#include "pg/boundary.hpp"
#include "pg/delivery_log.hpp"
#include "pg/commit_wake.hpp"
#include "pg/settings.hpp"

extern "C" {
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "storage/lmgr.h"
}

namespace outbox::pg {
namespace {

// Every event not yet published (nor discarded), and how many of them are dead letters. Index
// ranges only (the relay's low-water mark, the retries, the dead letters, the delivery log), like
// outbox.status.
constexpr const char* kUndeliveredSql =
    "SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE e.dead_at IS NOT NULL) "
    "  FROM outbox.events e "
    " WHERE (e.seq >= COALESCE((SELECT r.low_water FROM outbox.relay_state r), 0) "
    "        OR e.next_attempt_at IS NOT NULL OR e.dead_at IS NOT NULL) "
    "   AND e.published_at IS NULL AND e.discarded_at IS NULL "
    "   AND NOT " OUTBOX_IN_DELIVERY_LOG("e");
// The same while the SQL objects are still older than 0.6.0 (this library, no ALTER EXTENSION
// UPDATE yet): then the relay marked every delivered event on its row, and neither the
// delivery log nor discarded_at exists.
constexpr const char* kUndeliveredBefore060Sql =
    "SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE e.dead_at IS NOT NULL) "
    "  FROM outbox.events e WHERE e.published_at IS NULL";

bool names(List* objects, const char* name) {
  ListCell* cell;
  foreach (cell, objects) {
    Node* object = static_cast<Node*>(lfirst(cell));
    if (IsA(object, String) && strcmp(strVal(object), name) == 0) return true;
  }
  return false;
}

struct Undelivered {
  int64 events;
  int64 dead;
};

Undelivered count_undelivered(const char* sql) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox: SPI_connect failed");
  if (SPI_execute(sql, true, 1) != SPI_OK_SELECT || SPI_processed != 1) {
    elog(ERROR, "outbox: counting undelivered events failed");
  }
  bool isnull;
  Undelivered out;
  out.events =
      DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  out.dead = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
  SPI_finish();
  return out;
}

// Runs inside guard().
void check_drop(EventTriggerData* trigger) {
  if (!IsA(trigger->parsetree, DropStmt)) return;
  auto* stmt = reinterpret_cast<DropStmt*>(trigger->parsetree);
  // The extension is not relocatable: its schema is always outbox.
  const bool drops_us = (stmt->removeType == OBJECT_EXTENSION && names(stmt->objects, "outbox")) ||
                        (stmt->removeType == OBJECT_SCHEMA && stmt->behavior == DROP_CASCADE &&
                         names(stmt->objects, "outbox"));
  if (!drops_us || !OidIsValid(get_extension_oid("outbox", true))) return;
  const Oid schema = get_namespace_oid("outbox", true);
  const Oid events = get_relname_relid("events", schema);
  if (!OidIsValid(events) || !OidIsValid(get_relname_relid("relay_state", schema))) return;

  LockRelationOid(events, AccessExclusiveLock);
  relay_wake_at_commit(true);
  // Under that lock no event can be written or published any more: the count is exact.
  const bool has_log = OidIsValid(get_relname_relid("deliveries", schema));
  const Undelivered undelivered =
      count_undelivered(has_log ? kUndeliveredSql : kUndeliveredBefore060Sql);
  if (undelivered.events == 0) return;
  const char* command = GetCommandTagName(trigger->tag);
  if (settings.drop_discards_events) {
    ereport(WARNING,
            (errmsg_plural("outbox: %s discards %ld event that was not published (%ld "
                           "of them dead-lettered)",
                           "outbox: %s discards %ld events that were not published (%ld "
                           "of them dead-lettered)",
                           undelivered.events, command, static_cast<long>(undelivered.events),
                           static_cast<long>(undelivered.dead))));
    return;
  }
  ereport(ERROR,
          (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
           errmsg_plural("outbox: %s would discard %ld event that was not published (%ld of them "
                         "dead-lettered)",
                         "outbox: %s would discard %ld events that were not published (%ld of them "
                         "dead-lettered)",
                         undelivered.events, command, static_cast<long>(undelivered.events),
                         static_cast<long>(undelivered.dead)),
           errdetail("Dropping the extension deletes outbox.events; the relay has not delivered "
                     "these events to the sink."),
           errhint("Let the relay deliver them (SELECT unpublished, dead_lettered FROM "
                   "outbox.status), or discard them on purpose: BEGIN; SET LOCAL "
                   "outbox.drop_discards_events = on; %s ...; COMMIT;",
                   command)));
}

}  // namespace
}  // namespace outbox::pg

OUTBOX_FUNCTION(outbox_drop_guard) {
  outbox::pg::guard([&] {
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo)) {
      ereport(ERROR, (errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
                      errmsg("outbox._drop_guard is an event trigger")));
    }
    outbox::pg::check_drop(reinterpret_cast<EventTriggerData*>(fcinfo->context));
  });
  PG_RETURN_VOID();
}
