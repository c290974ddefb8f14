// Shared memory of the relay: one slot per relay worker of the cluster (outbox.max_workers
// of them), each assigned by the launcher to a worker of one database: its state and
// counters for outbox.status, the latch that wakes it, and what the launcher says while no
// relay runs in it. What a database's relays share is in pg/relay_databases.hpp.
//
// Wake at commit: a transaction that enqueued sets a flag; at COMMIT a transaction callback
// sets the latches of its database's relay workers (pg_net's model). No NOTIFY: it
// serialises committers on a global lock (measured here: -40 % writer throughput at 8
// writers, -55 % at 32). A commit that asked for a configuration reload
// (relay_wake_at_commit(true): configure_sink, unconfigure_sink, CREATE EXTENSION, DROP
// EXTENSION) moves its database's configuration generation and sets the latch of every
// relay of that database; a commit that only enqueued sets the latches of the relays that
// own its shards and want commit wake-ups (a relay with no sink, or one that lets commits
// gather, does not).
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

constexpr int kMaxWorkers = 32;      // per database (outbox.workers)
constexpr int kMaxRelaySlots = 256;  // in the cluster (outbox.max_workers)

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

// True when outbox is in shared_preload_libraries and the segment exists.
bool relay_shmem_available();

// _PG_init (preload only): reserve the segment and install the hooks.
void relay_shmem_request(int slots);

// Called by a worker at start and exit. Detaching keeps the counters (state kStopped), with
// `why` (if not null) as the last error.
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
int relay_slot_count();
// The batches that the database's relays have sent, summed over their slots: it moves while
// live events flow (the replay worker's share, relay/replay.cpp).
uint64 relay_database_batches(Oid database);
// Whether worker `worker` of the database runs (shard ownership, relay/ownership.cpp).
bool relay_worker_running(Oid database, int worker);
// Sends SIGTERM to every relay of the database: each stops after its current step, and what
// it had not delivered is sent again by the next relay (at least once).
void relay_stop_database(Oid database);

// Backend side: ask for a wake-up of every relay of this database (and, for configure_sink,
// a configuration reload) at the commit of the current transaction. Cheap: only sets flags.
void relay_wake_at_commit(bool config_changed);
// Backend side: ask for a wake-up, at commit, of the relay that owns the shard of this key
// (enqueue; text Datums). Raises PostgreSQL errors: call inside guard().
void relay_wake_owner_at_commit(Datum aggregatetype, Datum aggregateid);

// Backend side: the database's replay worker is wanted at commit (outbox.replay()).
void relay_replay_at_commit();

// Registers the transaction callback; called once from _PG_init.
void relay_register_xact_callback();

// Preload only: the ProcessUtility hook of pg/database_commands.cpp (DROP DATABASE and the
// commands like it; COMMIT PREPARED's wake-up).
void relay_register_database_commands();

}  // namespace outbox::pg
