// The shard of a key, outbox.shard_of(aggregatetype, aggregateid) in SQL: the same hash of the
// same bytes (a database's default collation is deterministic). The commit wake-up
// (commit_wake.cpp) and the relay's scan of several workers' events (rows.cpp) use it; TAP 035
// fails when it and the SQL function differ.
#pragma once

#include "pg/postgres.hpp"

extern "C" {
#include "catalog/pg_collation.h"
#include "utils/builtins.h"
}

namespace outbox::pg {

// Call inside guard().
inline int shard_of(Datum aggregatetype, Datum aggregateid) {
  const uint32 a =
      DatumGetUInt32(DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID, aggregatetype));
  const uint32 b =
      DatumGetUInt32(DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID, aggregateid));
  return static_cast<int>((a ^ b) & 63);
}

}  // namespace outbox::pg
