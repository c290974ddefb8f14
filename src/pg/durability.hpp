// The relay hands a batch to a sink only once the commits of its events cannot vanish.
//
// A writer with synchronous_commit = off returns from COMMIT before its commit record is
// flushed: until the WAL writer flushes it, a crash (or an immediate shutdown) loses the
// transaction, and its events with it. Its rows are visible meanwhile, so a relay that sent
// them would leave consumers holding events of transactions that never happened. (Logical
// decoding cannot do this: it reads only flushed WAL.)
//
// Every commit a snapshot sees was inserted into the WAL before the snapshot was taken, so
// the WAL insert position read after a fetch covers the commit of every fetched event.
// Flushing up to there (nothing to do when the writers' own commits flushed it) makes them
// durable locally. With outbox.wait_for_sync_standbys the relay also waits until the
// synchronous standbys have flushed it, so that a failover to one of them loses nothing that
// consumers already have.
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

// After a fetch, in its transaction: flushes the WAL up to every commit the fetch could see
// and returns that position. Runs inside guard().
XLogRecPtr flush_visible_commits();

// Whether the synchronous standbys (synchronous_standby_names) have yet to flush `lsn`. False
// when none are configured, as for a committing backend. Runs inside guard().
bool sync_standbys_behind(XLogRecPtr lsn);

}  // namespace outbox::pg
