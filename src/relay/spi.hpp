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

// The bounds of n intervals (anything with int64 lo and hi) as two int8[], for a query that
// unnests them side by side. Runs inside guard().
template <typename Interval>
void int8_bounds(const Interval* intervals, int n, Datum& lo, Datum& hi) {
  Datum* los = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  Datum* his = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
  for (int k = 0; k < n; ++k) {
    los[k] = Int64GetDatum(intervals[k].lo);
    his[k] = Int64GetDatum(intervals[k].hi);
  }
  lo = int8_array(los, n);
  hi = int8_array(his, n);
}

// The int8multirange of n sorted, disjoint, non-adjacent intervals [lo, hi] (anything with
// int64 lo and hi), built here rather than by range_agg() over unnested bounds: the delivery
// log's row for a batch, hundreds of ranges when several workers' seqs interleave. Runs
// inside guard().
Datum int8_multirange(const int64* los, const int64* his, int n);
template <typename Interval>
Datum int8_multirange(const Interval* intervals, int n) {
  int64* los = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
  int64* his = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
  for (int k = 0; k < n; ++k) {
    los[k] = intervals[k].lo;
    his[k] = intervals[k].hi;
  }
  return int8_multirange(los, his, n);
}

// Starts a transaction with SPI connected and a snapshot pushed; `activity` shows in
// pg_stat_activity.
void begin_worker_transaction(const char* activity);
// Commits it. The commit leaves TopMemoryContext current: `resume` is made current instead.
void commit_worker_transaction(MemoryContext resume);
// The first lock of every transaction of a relay or the replay worker: outbox.events, before
// relay_state, the sequence or a partition. DROP EXTENSION takes this one first too
// (pg/drop_guard.cpp), so the two never wait for each other in a cycle.
void lock_events_first();
// Aborts the transaction, if one is open (or failed), and makes `resume` current.
void abort_worker_transaction(MemoryContext resume);

}  // namespace outbox::pg::relay
