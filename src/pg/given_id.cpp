#include "pg/given_id.hpp"

extern "C" {
#include "catalog/pg_collation.h"
#include "storage/lmgr.h"
#include "utils/snapmgr.h"
}

namespace outbox::pg {
namespace {

// The event with a given id (each partition's _id index).
constexpr const char* kFindIdSql =
    "SELECT aggregatetype::pg_catalog.text, aggregateid::pg_catalog.text, type::pg_catalog.text, "
    "       payload, headers "
    "  FROM outbox.events WHERE id OPERATOR(pg_catalog.=) $1 LIMIT 1";
// Advisory locks on ids carry this in their fourth field (pg_locks.objsubid);
// pg_advisory_lock() uses 1 and 2.
constexpr uint16 kIdLockField = 0x6f62;

SPIPlanPtr find_id_plan = nullptr;  // kept for the backend's life

bool equal_text(Datum a, Datum b) {
  return DatumGetBool(DirectFunctionCall2Coll(texteq, C_COLLATION_OID, a, b));
}

bool equal_jsonb(Datum a, Datum b) { return DatumGetBool(DirectFunctionCall2(jsonb_eq, a, b)); }

}  // namespace

GivenId find_given_id(Datum id, const EventFields& event, bool headers_null) {
  uint64 halves[2];
  memcpy(halves, DatumGetUUIDP(id)->data, sizeof(halves));
  const uint64 key = halves[0] ^ halves[1];
  LOCKTAG tag;
  SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(key >> 32), static_cast<uint32>(key),
                       kIdLockField);
  (void)LockAcquire(&tag, ExclusiveLock, false, false);  // held until the transaction ends

  if (find_id_plan == nullptr) {
    Oid types[1] = {UUIDOID};
    SPIPlanPtr plan = SPI_prepare(kFindIdSql, 1, types);
    if (plan == nullptr) elog(ERROR, "outbox: SPI_prepare failed: %s", kFindIdSql);
    SPI_keepplan(plan);
    find_id_plan = plan;
  }
  Datum values[1] = {id};
  if (SPI_execute_snapshot(find_id_plan, values, nullptr, GetLatestSnapshot(), InvalidSnapshot,
                           true, false, 1) != SPI_OK_SELECT) {
    elog(ERROR, "outbox: looking up an event id failed");
  }
  if (SPI_processed == 0) return GivenId::kNew;
  HeapTuple row = SPI_tuptable->vals[0];
  TupleDesc desc = SPI_tuptable->tupdesc;
  bool isnull;
  const Datum texts[3] = {event.aggregatetype, event.aggregateid, event.type};
  for (int i = 0; i < 3; ++i) {
    if (!equal_text(SPI_getbinval(row, desc, i + 1, &isnull), texts[i])) {
      return GivenId::kOtherEvent;
    }
  }
  if (!equal_jsonb(SPI_getbinval(row, desc, 4, &isnull), event.payload)) {
    return GivenId::kOtherEvent;
  }
  const Datum headers = SPI_getbinval(row, desc, 5, &isnull);
  if (isnull != headers_null || (!isnull && !equal_jsonb(headers, event.headers))) {
    return GivenId::kOtherEvent;
  }
  return GivenId::kSameEvent;
}

}  // namespace outbox::pg
