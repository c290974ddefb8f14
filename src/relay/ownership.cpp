// Shard ownership (core/shards.hpp). A relay sends only the events of the shards whose advisory
// locks it holds (relay/shard_locks.hpp). Once a second, between transactions, it claims its
// preferred shards and those of workers that do not run, and gives back the shards of workers that
// run again. A shard it gives back has nothing of it in flight: the transaction that sent from it
// has committed, so the next owner's snapshot, taken after it got the lock, sees every mark.
#include "relay/ownership.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_slots.hpp"
#include "pg/settings.hpp"
#include "relay/shard_locks.hpp"

namespace outbox::pg::relay {
namespace {

constexpr int64 kRoundUs = 1000 * 1000;

}  // namespace

Ownership::Ownership(int slot, int worker) : slot_(slot), worker_(worker) {
  literal_ = shards::array_literal(owned_);
}

bool Ownership::round(TimestampTz now) {
  if (now - round_at_ < kRoundUs && owned_ != 0 && round_at_ != 0) return false;
  round_at_ = now;
  const int workers = settings.workers;
  const shards::Round plan = shards::plan_round(
      worker_, workers, owned_, [](int w) { return relay_worker_running(MyDatabaseId, w); });
  if (plan.claim == 0 && plan.release == 0) return false;
  // One lock call at a time, the mask updated after each: it always says what the session
  // holds, even when a later call fails.
  const shards::Mask before = owned_;
  for (int s = 0; s < shards::kShards; ++s) {
    const shards::Mask bit = shards::Mask{1} << s;
    if (plan.release & bit) owned_ &= ~guard([bit] { return release_shards(bit); });
    if (plan.claim & bit) owned_ |= guard([bit] { return claim_shards(bit); });
  }
  const bool gained = (owned_ & ~before) != 0;
  if (owned_ != before) {
    relay_worker_wake_shards(slot_, owned_);  // before the fetch that sends them
    ++version_;
    predicate_ = shards::predicate(owned_);
    literal_ = shards::array_literal(owned_);
  }
  return gained;
}

bool Ownership::round_wanted() const {
  if (owned_ == 0 || round_at_ == 0) return true;
  const shards::Round plan = shards::plan_round(worker_, settings.workers, owned_, [](int w) {
    return relay_worker_running(MyDatabaseId, w);
  });
  return plan.claim != 0 || plan.release != 0;
}

}  // namespace outbox::pg::relay
