// The relay hands a batch to a sink only once the commits of its events cannot vanish.
//
// A writer with synchronous_commit = off returns from COMMIT before its commit record is
// flushed: until the WAL writer flushes it, a crash (or an immediate shutdown) loses the
// transaction, and its events with it. Its rows are visible meanwhile, so a relay that sent
// them would leave consumers holding events of transactions that never happened. (Logical
// decoding cannot do this: it reads only flushed WAL.)
//
// An asynchronous commit leaves its WAL position in the commit log (the group LSN that hint
// bits use: a commit-log page goes to disk only after the WAL up to it). The fetch reads each
// row's xmin, and the relay flushes up to the newest such position (flush_commits): nothing
// to do when the writers committed synchronously, or when the WAL writer got there first.
// The relay's own asynchronous marks are not flushed for it.
//
// With outbox.wait_for_sync_standbys the relay also waits until the synchronous standbys
// have flushed the commits. A writer with synchronous_commit = local leaves no position in
// the commit log, so there the relay uses the WAL insert position read after the fetch:
// every commit a snapshot sees was inserted before it was taken (flush_visible_commits).
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg::relay {

// Flushes the WAL up to `upto` (the fetched rows' Fetched::commits_upto), unless it is
// flushed already or invalid. Runs inside guard().
void flush_commits(XLogRecPtr upto);

// After a fetch, in its transaction: flushes the WAL up to every commit the fetch could see
// and returns that position. Runs inside guard().
XLogRecPtr flush_visible_commits();

// Whether the synchronous standbys (synchronous_standby_names) have yet to flush `lsn`. False
// when none are configured, as for a committing backend. Runs inside guard().
bool sync_standbys_behind(XLogRecPtr lsn);

}  // namespace outbox::pg::relay
