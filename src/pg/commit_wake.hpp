// Wake at commit: a transaction that enqueued sets a flag; at COMMIT a transaction callback
// sets the latches of its database's relay workers (pg_net's model). No NOTIFY: it
// serialises committers on a global lock (measured here: -40 % writer throughput at 8
// writers, -55 % at 32). A commit that asked for a configuration reload
// (relay_wake_at_commit(true): configure_sink, unconfigure_sink, CREATE EXTENSION, DROP
// EXTENSION) moves its database's configuration generation and sets the latch of every
// relay of that database; a commit that only enqueued sets the latches of the relays that
// own its shards and want commit wake-ups (a relay with no sink, or one that lets commits
// gather, does not). What it reads of each relay is in its slot (pg/relay_slots.hpp).
// Every such commit, outbox.wake_at_commit on or off, first moves its database's commit
// count (pg/relay_databases.hpp): an idle relay whose count did not move skips its pass.
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

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

}  // namespace outbox::pg
