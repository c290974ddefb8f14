// The relay's internal header: its parts and what they hand each other. A relay is a
// background worker that sends unpublished events through the configured sink and marks
// them published once the sink has acknowledged them (docs/design.md, "The relay").
//
//   loop.cpp          outbox_relay_main; the loop: when a pass runs, how the relay waits
//                     between passes, the back-off after a failure
//   pipeline.cpp      one pass's transaction: fetch, durability, send, mark, pipelined
//   queue.cpp         the queries on outbox.events: fetch into a batch, mark acknowledged and
//                     rejected events (retries, dead letters)
//   holds.cpp         failed events (rejected, transient) and the keys they hold back
//   late_keys.cpp     late commits: no newer event of their keys goes out before them
//   rows.cpp          a fetched row's values, copied into its batch by the executor
//   ownership.cpp     the shards this relay owns, claimed and given back
//   low_water.cpp     the low-water mark, its horizon, the gaps and their probes
//   seal.cpp          sealed partitions: past, resolved, unwritable; no query reads them
//   sink_session.cpp  the configured sink: created, created again, observed, its log
//   report.cpp        state and counters in shared memory, for outbox.status
//
// Declared in batch.hpp (rows, batches, results), session.hpp (Report, SinkSession),
// low_water.hpp (Sealer, Ownership, LowWater) and here (Queue, Relay).
//
// A crash anywhere before a pass's COMMIT releases its rows and they are sent again: at
// least once. The relay commits or aborts before it waits or backs off.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "core/key_holds.hpp"
#include "core/pacing.hpp"
#include "core/transient_failures.hpp"
#include "pg/postgres.hpp"
#include "relay/batch.hpp"
#include "relay/low_water.hpp"
#include "relay/session.hpp"
#include "sinks/common/sink.hpp"

extern "C" {
PGDLLEXPORT void outbox_relay_main(Datum arg);
}

namespace outbox::pg::relay {

// queue.cpp: the relay's statements on outbox.events.
class Queue {
 public:
  // Once, at start (inside guard()): the payload buffer, in TopMemoryContext.
  void init();
  // Fetches the next batch. The first of a transaction also moves the low-water mark, looks
  // for retries, and takes the late events a probe of the gaps found. Rows
  // of a held key (core/key_holds.hpp) go back on the retry path, behind their blocker,
  // instead of into the batch.
  void fetch(Batch& batch, bool first_of_transaction, LowWater& mark);
  // The holds must be read again before the next fetch (the owned shards changed, the
  // tracking restarted).
  void reload_holds() {
    holds_stale_ = true;
    retry_check_at_ = 0;
  }
  // After a batch's outcomes are recorded: its deferred rows go back on the retry path
  // behind the earlier event of their key that failed. False when one of them has no such
  // event to wait for (it stays where it is, and the scan must restart from the mark).
  bool defer(const Fetched& batch, const std::vector<sinks::Outcome>& outcomes);
  // Records the acknowledged rows of `batch` as published: in the delivery log, or on the
  // row for a retry.
  void mark_acked(const Fetched& batch, const std::vector<sinks::Outcome>& outcomes);
  // A rejected event: a later retry, or the dead letters. True when dead-lettered.
  bool mark_rejected(const Row& row, const std::string& error);
  // A transient failure of this event alone (others of its batch were acknowledged): a
  // later retry, backing off with its key's failures in a row; no attempt is counted.
  void mark_transient(const Row& row, const std::string& error);
  // When the next look for due retries is (a held key's retry time, at the latest a
  // poll_interval after the last look): the loop wakes for it.
  TimestampTz retry_check_at() const { return retry_check_at_; }

 private:
  void run_fetch(SPIPlanPtr plan, int nparams, const Datum* values, const Oid* types,
                 RowReceiver& receiver);
  void append_rows(SPIPlanPtr plan, int nparams, const Datum* values, const Oid* types,
                   Batch& batch, int limit, int64& bytes, int64 max_bytes);
  enum class Update { kPublished, kRejected, kTransient, kPutBack };
  // Holds the key of a failed event and moves the next look for retries.
  void hold_key(const Row& row, TimestampTz due);
  SPIPlanPtr partition_plan(boost::container::flat_map<Oid, SPIPlanPtr>& cache, Oid rel,
                            Update update);

  // What scan_new() accounted for: the other shards' events it passed (sorted), and up to
  // which seq; more: it stopped at a limit.
  struct Scanned {
    int64* others;
    int n_others;
    int64 upto;
    bool more;
  };
  Scanned scan_new(Batch& batch, int64 start, TimestampTz future, shards::Mask owned,
                   const SeqSet* delivered, int limit, int64& bytes, int64 max_bytes);
  void load_holds();
  int keep_before_late(const Fetched& out, int new_from, LowWater& mark);
  struct PutBack {
    Oid rel;
    ItemPointerData tid;
    TimestampTz at;
  };
  // Puts fetched rows back on the retry path, each due at its `at`; no attempt is counted.
  void put_back(const std::vector<PutBack>& rows);
  // Removes the rows of held keys from the batch (put back behind their blockers); from
  // `behind_all_from` on, also those whose blocker is in the batch.
  void hold_back(Fetched& out, int behind_all_from);

  KeyHolds holds_;
  bool holds_stale_ = true;  // read them at the next look for retries
  SPIPlanPtr holds_plan_ = nullptr;
  SPIPlanPtr scan_new_plan_ = nullptr;
  // Made for the scope of plans_version_ (LowWater::scope_version()).
  uint64 plans_version_ = 0;
  SPIPlanPtr fetch_retry_plan_ = nullptr;
  SPIPlanPtr fetch_late_plan_ = nullptr;
  SPIPlanPtr log_plan_ = nullptr;  // kLogSql: no scope, made once
  // Where each payload is written before its fitted copy (in TopMemoryContext).
  StringInfoData payload_scratch_{};
  // When retries are looked for next.
  TimestampTz retry_check_at_ = 0;
  boost::container::flat_map<Oid, SPIPlanPtr> mark_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> reject_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> put_back_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> transient_plans_;
  TransientFailures transient_;
};

// loop.cpp and pipeline.cpp: the worker.
class Relay {
 public:
  explicit Relay(int index);
  void run();

 private:
  // What a pass asks the loop to wait for. Every wait ends at its timeout, at a signal
  // (reload, shutdown) and at a new sink configuration.
  struct Pause {
    enum Kind {
      kForEvents,   // and for a commit that enqueued: the next pass sends its events
      kForSink,     // nothing to send with: commits that enqueue do not wake the relay
      kGathering,   // commits gather for the next batch (core/pacing.hpp): they do not wake it
      kBackingOff,  // after a failure: commits do not wake it, the back-off's end does
    } kind;
    int ms;
  };

  // loop.cpp
  Pause step();
  // at_max: wait retry_backoff_max at once (a configuration error is not fixed in a moment).
  int back_off(const std::string& error, bool at_max = false);
  void wait(Pause pause);
  void wake_on_commit(bool wake);
  // pipeline.cpp
  BatchResult run_transaction();
  void start_batch(Batch& batch);
  void finish_batch(Batch& batch, BatchResult& result);
  void fail_batch(Batch& batch, const std::exception& e);
  bool make_durable(const Fetched& fetched);
  void abort_transaction();

  const int index_;
  std::mt19937_64 rng_;
  MemoryContext iteration_ = nullptr;
  // What the relay's shared-memory slot says: commits that enqueue set its latch.
  bool wake_on_commit_ = true;
  Report report_;
  // Before the session: a batch's messages outlive the sink that may still read them.
  Batch batches_[2];
  SinkSession session_{report_};
  Ownership ownership_;
  LowWater mark_{ownership_};
  Queue queue_;
  // Failed passes in a row: the back-off's attempt.
  int failures_ = 0;
  pacing::BatchPacer pacer_;
};

}  // namespace outbox::pg::relay
