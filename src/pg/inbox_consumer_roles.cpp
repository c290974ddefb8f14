// See inbox_consumer_roles.hpp. Called by the table's statement trigger after every change,
// whoever makes it (bind_inbox_consumer, the owner by hand, or pg_restore's COPY), so the
// dependencies follow the rows without a hook on DROP ROLE (which runs in any database).
#include "pg/inbox_consumer_roles.hpp"

#include "pg/boundary.hpp"

extern "C" {
#include "catalog/dependency.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
}

namespace outbox::pg {
namespace {

// Distinct and in oid order, as updateAclDependencies() wants them.
constexpr const char* kBoundSql =
    "SELECT DISTINCT c.role::pg_catalog.oid FROM outbox.inbox_consumers c ORDER BY 1";
// The trigger pins search_path; the operators are named all the same.
constexpr const char* kRecordedSql =
    "SELECT DISTINCT d.refobjid FROM pg_catalog.pg_shdepend d"
    " WHERE d.dbid OPERATOR(pg_catalog.=) $1 AND d.objid OPERATOR(pg_catalog.=) $2"
    " AND d.objsubid OPERATOR(pg_catalog.=) $3"
    " AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
    " AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass"
    " AND d.deptype OPERATOR(pg_catalog.=) 'a' ORDER BY 1";

// The oids of the first column of SPI's result, in the caller's memory context (SPI_palloc:
// updateAclDependencies frees them).
Oid* result_oids(int* count) {
  *count = static_cast<int>(SPI_processed);
  auto* oids = static_cast<Oid*>(SPI_palloc(sizeof(Oid) * (*count > 0 ? *count : 1)));
  for (int i = 0; i < *count; ++i) {
    bool is_null = false;
    const Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &is_null);
    oids[i] = is_null ? InvalidOid : DatumGetObjectId(d);
  }
  return oids;
}

}  // namespace

void sync_binding_roles(Oid bindings) {
  guard([&] {
    const AttrNumber column = get_attnum(bindings, "role");
    if (column == InvalidAttrNumber) elog(ERROR, "outbox.inbox_consumers has no column role");
    // One change at a time, to the end of its transaction: the next one's statements (each
    // with a new snapshot, at READ COMMITTED) see what this one recorded. Not a lock on the
    // table, which the changing statements already hold: two of them would deadlock.
    LockDatabaseObject(RelationRelationId, bindings, column, ExclusiveLock);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox: SPI_connect failed");
    // Not read-only: sees the statement that fired the trigger.
    if (SPI_execute(kBoundSql, false, 0) != SPI_OK_SELECT) {
      elog(ERROR, "outbox: reading outbox.inbox_consumers failed");
    }
    int bound_count = 0;
    Oid* bound = result_oids(&bound_count);
    Oid types[3] = {OIDOID, OIDOID, INT4OID};
    Datum values[3] = {ObjectIdGetDatum(MyDatabaseId), ObjectIdGetDatum(bindings),
                       Int32GetDatum(column)};
    if (SPI_execute_with_args(kRecordedSql, 3, types, values, nullptr, false, 0) != SPI_OK_SELECT) {
      elog(ERROR, "outbox: reading pg_shdepend failed");
    }
    int recorded_count = 0;
    Oid* recorded = result_oids(&recorded_count);
    SPI_finish();
    updateAclDependencies(RelationRelationId, bindings, column, InvalidOid, recorded_count,
                          recorded, bound_count, bound);
  });
}

}  // namespace outbox::pg
