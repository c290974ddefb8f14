#include "pg/commit_wake.hpp"

#include "pg/boundary.hpp"
#include "pg/relay_databases.hpp"
#include "pg/relay_slots.hpp"
#include "pg/settings.hpp"
#include "pg/shard_of.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/latch.h"
}

namespace outbox::pg {
namespace {

// Per-backend, per-transaction flags for the commit callback: the shards whose owners to
// wake, and whether the configuration changed.
uint64 wake_pending = 0;
// Events were written through outbox's functions, with or without outbox.wake_at_commit:
// the commit moves the database's count, which an idle relay reads (relay/idle.cpp).
bool events_pending = false;
bool config_pending = false;
bool replay_pending = false;  // outbox.replay() ran: the replay worker is wanted at commit
constexpr uint64 kAllShards = ~uint64{0};

// Runs once the commit is visible (transaction callbacks come after ProcArrayEndTransaction),
// and a relay turns wake_on_commit on before it takes its fetch's snapshot: under the slot's
// spinlock (relay_slot_wake), either this reads it on and sets the latch, or that snapshot
// sees the commit. A shard's owner publishes its mask before the first fetch that may send
// the shard, so the same holds for a commit that wakes only the owners of its shards.
// An idle relay (relay/idle.cpp) sleeps past outbox.poll_interval: with wake_at_commit off
// (`shards` 0), a commit that wrote events sets its latch too; it publishes that before
// it reads the commit count, which this commit moved before.
void wake_workers(bool config_changed, uint64 shards, bool events) {
  for (int i = 0; i < relay_slot_count(); ++i) {
    const SlotWake slot = relay_slot_wake(i);
    const bool wake =
        slot.database == MyDatabaseId &&
        (config_changed || (slot.wake_on_commit && (slot.wake_shards & shards) != 0) ||
         (slot.idle && events && shards == 0));
    if (wake && slot.latch != nullptr) SetLatch(slot.latch);
  }
}

void xact_callback(XactEvent event, void*) {
  switch (event) {
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PARALLEL_COMMIT:
      if (relay_shmem_available()) {
        if (config_pending) relay_database_changed(MyDatabaseId);
        if (replay_pending) relay_database_replay_requested(MyDatabaseId);
        // Before the latches: a relay that wakes for this commit sees the count moved.
        if (events_pending || config_pending || replay_pending) {
          relay_database_count_commit(MyDatabaseId);
        }
        if (wake_pending != 0 || config_pending || events_pending) {
          wake_workers(config_pending, wake_pending, events_pending);
        }
      }
      wake_pending = 0;
      events_pending = false;
      config_pending = false;
      replay_pending = false;
      break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
    case XACT_EVENT_PREPARE:
      wake_pending = 0;
      events_pending = false;
      config_pending = false;
      replay_pending = false;
      break;
    default:
      break;
  }
}

}  // namespace

void relay_wake_at_commit(bool config_changed) {
  events_pending = true;
  if (settings.wake_at_commit) wake_pending = kAllShards;
  config_pending = config_pending || config_changed;
}

void relay_wake_owner_at_commit(Datum aggregatetype, Datum aggregateid) {
  events_pending = true;
  if (!settings.wake_at_commit) return;
  wake_pending |= uint64{1} << shard_of(aggregatetype, aggregateid);
}

void relay_replay_at_commit() { replay_pending = true; }

void relay_register_xact_callback() { RegisterXactCallback(xact_callback, nullptr); }

}  // namespace outbox::pg

// outbox._replay_requested(): the replay worker is wanted at commit (relay/replay.cpp).
OUTBOX_FUNCTION(outbox_replay_requested) {
  (void)fcinfo;
  outbox::pg::relay_replay_at_commit();
  return outbox::pg::guard([] { PG_RETURN_VOID(); });
}

// outbox._notify_relay(): wake the relay and make it reread its sink at commit.
OUTBOX_FUNCTION(outbox_notify_relay) {
  (void)fcinfo;
  outbox::pg::relay_wake_at_commit(true);
  return outbox::pg::guard([] { PG_RETURN_VOID(); });
}
