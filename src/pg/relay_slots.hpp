// Shared memory of the relay: one slot per relay worker of the cluster (outbox.max_workers
// of them), each assigned by the launcher to a worker of one database: its state and
// counters for outbox.status, the latch that wakes it, which commits set that latch
// (pg/commit_wake.hpp reads it), and what the launcher says while no relay runs in it.
// What a database's relays share is in pg/relay_databases.hpp; the hooks that make the
// segments are in pg/shmem_hooks.cpp.
#pragma once

#include "pg/postgres.hpp"

extern "C" {
#include "storage/latch.h"
}

namespace outbox::pg {

enum class WorkerState {
  kStarting,
  kIdle,
  kSending,
  kBackoff,
  kUnconfigured,
  kWaitingForUpdate,
  kWaitingForStandbys,
  kStopped
};

const char* worker_state_name(WorkerState state);

struct WorkerCounters {
  int pid;
  WorkerState state;
  char sink[512];  // the sink's description (describe())
  uint64 batches;
  uint64 events_sent;
  uint64 events_failed;
  uint64 events_dead;
  char last_error[256];
  TimestampTz last_error_at;
  TimestampTz last_success_at;
  TimestampTz backoff_until;
  int shards;  // how many shards it owns (core/shards.hpp)
};

// A consistent copy of one slot, for outbox.status.
struct SlotView {
  Oid database;             // assigned by the launcher; InvalidOid: free
  int worker;               // the relay's number in its database, from 0
  bool in_use;              // a relay runs in it
  WorkerCounters counters;  // the relay's, or the last ones of the relay that ran in it
  TimestampTz restart_at;   // set by the launcher while no relay runs: when it starts one
  char detail[256];         // set by the launcher: why no relay runs
};

// What a committing backend reads of one slot to decide whether to set its latch, as one
// consistent copy (pg/commit_wake.cpp).
struct SlotWake {
  Oid database;         // assigned by the launcher
  bool wake_on_commit;  // commits that only enqueued set the latch
  uint64 wake_shards;   // ... if they enqueued in one of these shards
  bool idle;            // any commit that wrote events sets the latch (relay/idle.cpp)
  Latch* latch;         // the relay's; null while none runs in the slot
};

// True when outbox is in shared_preload_libraries and the segment exists.
bool relay_shmem_available();

// From pg/shmem_hooks.cpp: the segment's size, and its initialisation with `slots` slots.
Size relay_slots_size();
void relay_slots_init(int slots);

// Called by a worker at start and exit; both wake the other relays of its database (an
// ownership round). Detaching keeps the counters (state kStopped), with `why` (if not
// null) as the last error.
void relay_worker_attach(int index);
void relay_worker_detach(int index, const char* why);

// Worker side: publish counters (copied under the slot's spinlock).
void relay_worker_publish(int index, const WorkerCounters& counters);
// Worker side: whether commits that enqueued set its latch (yes from attach on). A signal
// to a relay that has nothing to do with it costs the committer a syscall and the relay a
// wake-up. Configuration changes set the latch either way.
void relay_worker_wake_on_commit(int index, bool wake);
// Worker side: the shards (a mask of 64) whose commits wake it: all of them from attach on,
// then those it owns. A commit wakes only the owners of its events' shards.
void relay_worker_wake_shards(int index, uint64 shards);
// Worker side: the relay may skip its passes and sleep past outbox.poll_interval
// (relay/idle.cpp): every commit that wrote events in its database sets its latch, with
// outbox.wake_at_commit off too. Set before it reads the database's commit count.
void relay_worker_idle(int index, bool idle);
// Launcher side: which database's worker the slot is for (InvalidOid frees it); whether a
// relay runs in it; why none does and when one starts.
void relay_slot_assign(int index, Oid database, int worker);
bool relay_slot_in_use(int index);
// Launcher side, once the postmaster says the slot's relay has exited: whether it stopped
// after an error. One that exited without detaching (a FATAL) did, and no longer holds the
// slot.
bool relay_slot_stopped(int index);
void relay_slot_explain(int index, const char* detail, TimestampTz restart_at);
// Reader side: a consistent copy of one slot.
SlotView relay_slot_read(int index);
// Committer side: what decides whether the slot's latch is set (pg/commit_wake.cpp).
SlotWake relay_slot_wake(int index);
int relay_slot_count();
// The batches that the database's relays have sent, summed over their slots: it moves while
// live events flow (the replay worker's share, relay/replay.cpp).
uint64 relay_database_batches(Oid database);
// Whether worker `worker` of the database runs (shard ownership, relay/ownership.cpp).
bool relay_worker_running(Oid database, int worker);
// Sends SIGTERM to every relay of the database: each stops after its current step, and what
// it had not delivered is sent again by the next relay (at least once).
void relay_stop_database(Oid database);

}  // namespace outbox::pg
