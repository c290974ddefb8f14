#include "relay/spi.hpp"

#include "pg/boundary.hpp"

extern "C" {
#include "pgstat.h"
#include "utils/array.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/multirangetypes.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"
}

namespace outbox::pg::relay {

SPIPlanPtr prepare_kept(const char* sql, int nargs, const Oid* types) {
  // SPI takes the types as Oid* but only reads them.
  SPIPlanPtr plan =
      SPI_prepare_cursor(sql, nargs, const_cast<Oid*>(types), CURSOR_OPT_GENERIC_PLAN);
  if (plan == nullptr) elog(ERROR, "outbox relay: SPI_prepare failed: %s", sql);
  SPI_keepplan(plan);
  return plan;
}

Datum int8_array(Datum* values, int n) {
  return PointerGetDatum(construct_array(values, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

// Each range serialized as [lo, hi + 1), int8range's canonical form, so no canonical
// function call; make_multirange() sorts them again (already in order) and joins nothing.
Datum int8_multirange(const int64* los, const int64* his, int n) {
  TypeCacheEntry* typcache = lookup_type_cache(INT8RANGEOID, TYPECACHE_RANGE_INFO);
  RangeType** ranges = static_cast<RangeType**>(palloc(sizeof(RangeType*) * (n + 1)));
  for (int k = 0; k < n; ++k) {
    RangeBound lower{Int64GetDatum(los[k]), false, true, true};
    RangeBound upper{Int64GetDatum(his[k] + 1), false, false, false};
    ranges[k] = serialize_range(typcache, &lower, &upper);
  }
  return MultirangeTypePGetDatum(make_multirange(INT8MULTIRANGEOID, typcache, n, ranges));
}

void begin_worker_transaction(const char* activity) {
  guard([&] {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox relay: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, activity);
  });
}

void commit_worker_transaction(MemoryContext resume) {
  guard([&] {
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_stat(false);
    MemoryContextSwitchTo(resume);
  });
}

void abort_worker_transaction(MemoryContext resume) {
  guard([&] {
    if (IsTransactionState() || IsAbortedTransactionBlockState() ||
        GetCurrentTransactionNestLevel() > 0) {
      AbortCurrentTransaction();
    }
    MemoryContextSwitchTo(resume);
  });
}

void lock_events_first() {
  guard([] {
    const Oid events = get_relname_relid("events", get_namespace_oid("outbox", true));
    if (OidIsValid(events)) LockRelationOid(events, RowShareLock);
  });
}

}  // namespace outbox::pg::relay
