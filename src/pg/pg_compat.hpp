// What differs between the PostgreSQL majors outbox builds against (15 to 18), in one place,
// as PostgreSQL's own idiom has it: #if PG_VERSION_NUM. Included by pg/postgres.hpp only.
// Each difference is a name of ours that means the same on every major, with the test that
// would fail if it were wrong (docs/install.md, "PostgreSQL versions").
#pragma once

extern "C" {
#include "catalog/pg_database.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/rangetypes.h"
}

// 15 to 18: built and tested on 15, 17 and 18; 16 takes the 15 side of each branch, untested.
// The minor releases of May 2025 on: durability.cpp reads WalSndCtl->sync_standbys_status,
// which they brought (with the fix of a race at start-up it tells apart).
#if PG_VERSION_NUM < 150000
#error "outbox needs PostgreSQL 15 or later: set PG_CONFIG to the pg_config of 15, 16, 17 or 18"
#elif PG_VERSION_NUM >= 190000
#error "outbox supports PostgreSQL 15 to 18: this PostgreSQL is newer than any it was tested on"
#elif PG_VERSION_NUM < 150013 || (PG_VERSION_NUM >= 160000 && PG_VERSION_NUM < 160009) || \
    (PG_VERSION_NUM >= 170000 && PG_VERSION_NUM < 170005)
#error "outbox needs a minor release of May 2025 or later: 15.13, 16.9, 17.5 (or any 18)"
#endif

// The library's magic block; 18 also records its name and version, which
// pg_get_loaded_modules() shows (TAP 010).
#if PG_VERSION_NUM >= 180000
#define OUTBOX_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "outbox", .version = OUTBOX_VERSION)
#else
#define OUTBOX_MODULE_MAGIC PG_MODULE_MAGIC
#endif

namespace outbox::pg {

// Whether this session holds the lock in exactly `mode` (17 added "or a stronger one").
// Shard ownership; isolation spec shard_ownership (a shard claimed twice is given back by one
// release).
inline bool lock_held_by_me(const LOCKTAG* tag, LOCKMODE mode) {
#if PG_VERSION_NUM >= 170000
  return LockHeldByMe(tag, mode, false);
#else
  return LockHeldByMe(tag, mode);
#endif
}

// The index entries of a row just inserted, no ON CONFLICT (16 added onlySummarizing).
// enqueue's insert (pg/event_insert.cpp); TAP 010 and every test that reads events by index.
inline void insert_index_entries(ResultRelInfo* info, TupleTableSlot* slot, EState* estate) {
#if PG_VERSION_NUM >= 160000
  (void)ExecInsertIndexTuples(info, slot, estate, false, false, nullptr, NIL, false);
#else
  (void)ExecInsertIndexTuples(info, slot, estate, false, false, nullptr, NIL);
#endif
}

// A range from its bounds, not empty (16 added escontext). The delivery log's rows
// (relay/spi.cpp); TAP 041 and 042 read them back.
inline RangeType* serialize_range(TypeCacheEntry* typcache, RangeBound* lower, RangeBound* upper) {
#if PG_VERSION_NUM >= 160000
  return range_serialize(typcache, lower, upper, false, nullptr);
#else
  return range_serialize(typcache, lower, upper, false);
#endif
}

// Whether the current role owns the database, or is a superuser (16 made the check one for
// every kind of object). The hook of database commands; TAP 044 (a role that does not own a
// database cannot stop its relays with a DROP DATABASE that fails).
inline bool owns_database(Oid database) {
#if PG_VERSION_NUM >= 160000
  return object_ownercheck(DatabaseRelationId, database, GetUserId());
#else
  return pg_database_ownercheck(database, GetUserId());
#endif
}

}  // namespace outbox::pg
