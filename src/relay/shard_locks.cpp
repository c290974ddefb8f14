// The locks behind shard ownership, and their SQL face: outbox._claim_shards() and
// outbox._release_shards() run the same code as the relay (the isolation spec races two
// sessions over them).
#include "relay/shard_locks.hpp"

#include "pg/boundary.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "storage/lock.h"
#include "utils/array.h"
}

namespace outbox::pg::relay {
namespace {

LOCKTAG shard_tag(int s) {
  LOCKTAG tag;
  SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, static_cast<uint32>(s), kShardLockField);
  return tag;
}

shards::Mask mask_of(ArrayType* array) {
  Datum* items;
  bool* nulls;
  int n;
  deconstruct_array(array, INT4OID, sizeof(int32), true, TYPALIGN_INT, &items, &nulls, &n);
  shards::Mask mask = 0;
  for (int i = 0; i < n; ++i) {
    const int32 s = nulls[i] ? -1 : DatumGetInt32(items[i]);
    if (s < 0 || s >= shards::kShards) {
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("outbox: shard numbers go from 0 to %d", shards::kShards - 1)));
    }
    mask |= shards::Mask{1} << s;
  }
  return mask;
}

Datum array_of(shards::Mask mask) {
  Datum items[shards::kShards];
  int n = 0;
  for (int s = 0; s < shards::kShards; ++s) {
    if (mask & (shards::Mask{1} << s)) items[n++] = Int32GetDatum(s);
  }
  return PointerGetDatum(construct_array(items, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

}  // namespace

shards::Mask claim_shards(shards::Mask want) {
  shards::Mask held = 0;
  for (int s = 0; s < shards::kShards; ++s) {
    const shards::Mask bit = shards::Mask{1} << s;
    if (!(want & bit)) continue;
    LOCKTAG tag = shard_tag(s);
    // Held already: not taken twice (a session lock taken twice needs two releases).
    if (lock_held_by_me(&tag, ExclusiveLock) ||
        LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL) {
      held |= bit;
    }
  }
  return held;
}

shards::Mask release_shards(shards::Mask give) {
  shards::Mask released = 0;
  for (int s = 0; s < shards::kShards; ++s) {
    const shards::Mask bit = shards::Mask{1} << s;
    if (!(give & bit)) continue;
    LOCKTAG tag = shard_tag(s);
    if (lock_held_by_me(&tag, ExclusiveLock) && LockRelease(&tag, ExclusiveLock, true)) {
      released |= bit;
    }
  }
  return released;
}

}  // namespace outbox::pg::relay

// outbox._claim_shards(int4[]): the shards this session owns of those asked for.
OUTBOX_FUNCTION(outbox_claim_shards) {
  return outbox::pg::guard([&] {
    return outbox::pg::relay::array_of(
        outbox::pg::relay::claim_shards(outbox::pg::relay::mask_of(PG_GETARG_ARRAYTYPE_P(0))));
  });
}

// outbox._release_shards(int4[]): the shards this session gave back.
OUTBOX_FUNCTION(outbox_release_shards) {
  return outbox::pg::guard([&] {
    return outbox::pg::relay::array_of(
        outbox::pg::relay::release_shards(outbox::pg::relay::mask_of(PG_GETARG_ARRAYTYPE_P(0))));
  });
}
