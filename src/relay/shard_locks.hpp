// Shard ownership (core/shards.hpp): a shard is owned by the session holding its advisory
// lock, taken for the session (it outlives transactions, and ends with the process: a worker
// that exits or is killed frees its shards). The lock manager makes two owners impossible.
// In pg_locks: locktype 'advisory', classid 0, objid = the shard, objsubid = kShardLockField.
#pragma once

#include "core/shards.hpp"
#include "pg/postgres.hpp"

namespace outbox::pg::relay {

// pg_locks.objsubid of shard locks ('os'); pg_advisory_lock() uses 1 and 2, given ids 0x6f62.
constexpr uint16 kShardLockField = 0x6f73;

// Takes each free shard of `want` for this session, without waiting. Returns what this
// session holds of `want` afterwards (taken now or before). Call inside guard().
shards::Mask claim_shards(shards::Mask want);
// Gives back the shards of `give` this session holds; returns those it gave back.
shards::Mask release_shards(shards::Mask give);

}  // namespace outbox::pg::relay
