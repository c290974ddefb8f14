// Per-key order with several relay workers (docs/design.md, "Order"). Keys (aggregatetype,
// aggregateid) hash to a fixed set of shards (outbox.shard_of() in SQL); each shard has one
// owner at a time, a worker holding its session advisory lock, and only the owner sends a
// shard's events. The set is fixed, so a change of outbox.workers moves whole shards and never
// splits a key. Plain C++: which shards a worker prefers, which it claims and releases, and
// the predicate that restricts the relay's queries to what it owns.
#pragma once

#include <cstdint>
#include <string>

namespace outbox::shards {

inline constexpr int kShards = 64;
using Mask = std::uint64_t;
inline constexpr Mask kAll = ~Mask{0};

// The shards worker `worker` (0-based) of `workers` owns when every worker runs: s with
// s % workers == worker.
Mask preferred(int worker, int workers);
// The worker that prefers shard `s`.
int preferred_owner(int s, int workers);
int count(Mask mask);

// One round of ownership. `held`: what this worker owns. `alive(w)`: whether worker w runs.
// It claims its preferred shards, and the shards of workers that do not run (another worker
// may hold them: the lock decides); it gives back the shards it holds for a worker that runs
// again. A claim only takes shards that are free (pg_try_advisory_lock), so two workers never
// own one shard; a release happens between transactions, after the commit of everything the
// worker sent from it.
struct Round {
  Mask claim = 0;
  Mask release = 0;
};
template <typename Alive>
Round plan_round(int worker, int workers, Mask held, Alive alive) {
  Round round;
  const Mask mine = preferred(worker, workers);
  for (int s = 0; s < kShards; ++s) {
    const Mask bit = Mask{1} << s;
    if (mine & bit) {
      if (!(held & bit)) round.claim |= bit;
      continue;
    }
    const bool owner_runs = alive(preferred_owner(s, workers));
    if ((held & bit) && owner_runs) round.release |= bit;
    if (!(held & bit) && !owner_runs) round.claim |= bit;
  }
  return round;
}

// What the relay's queries on outbox.events add to see only the shards in `owned`: empty for
// all of them; " AND outbox.shard_of(aggregatetype, aggregateid) = ANY ('{..}')" otherwise
// (a literal: the plan is made again when the set changes). The SQL function is inlined.
std::string predicate(Mask owned);
// The shards of `mask` as a SQL array literal, "{0,4,8}".
std::string array_literal(Mask mask);

}  // namespace outbox::shards
