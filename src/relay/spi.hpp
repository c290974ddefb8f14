// SPI as the relay, a background worker, uses it: plans made once and kept, int8[] parameters,
// and the worker's own transactions (a worker has no client to start them).
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg::relay {

// A generic plan (no custom plan per execution), kept for the life of the process. Runs
// inside guard().
SPIPlanPtr prepare_kept(const char* sql, int nargs, const Oid* types);

// An int8[] of n values (Int64GetDatum), in the current memory context. Runs inside guard().
Datum int8_array(Datum* values, int n);

// Starts a transaction with SPI connected and a snapshot pushed; `activity` shows in
// pg_stat_activity.
void begin_worker_transaction(const char* activity);
// Commits it. The commit leaves TopMemoryContext current: `resume` is made current instead.
void commit_worker_transaction(MemoryContext resume);
// Aborts the transaction, if one is open (or failed), and makes `resume` current.
void abort_worker_transaction(MemoryContext resume);

}  // namespace outbox::pg::relay
