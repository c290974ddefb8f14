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
//   ownership.cpp     the shards this relay owns, claimed and given back (ordered mode)
//   low_water.cpp     the low-water mark, its horizon, the gaps and their probes
//   seal.cpp          sealed partitions: past, resolved, unwritable; no query reads them
//   sink_session.cpp  the configured sink: created, created again, observed, its log
//   report.cpp        state and counters in shared memory, for outbox.status
//
// A crash anywhere before a pass's COMMIT releases its rows and they are sent again: at
// least once. The relay commits or aborts before it waits or backs off.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "core/key_holds.hpp"
#include "core/pacing.hpp"
#include "core/seq_gaps.hpp"
#include "core/shards.hpp"
#include "core/transient_failures.hpp"
#include "pg/postgres.hpp"
#include "pg/relay_shmem.hpp"
#include "sinks/sink.hpp"

extern "C" {
#include "access/transam.h"
#include "storage/lock.h"
}

extern "C" {
PGDLLEXPORT void outbox_relay_main(Datum arg);
}

namespace outbox::pg::relay {

struct Text {
  const char* data;
  int len;
  std::string_view view() const { return {data, static_cast<size_t>(len)}; }
};

// One fetched row. Its texts are copies in the batch's memory, valid until the batch has
// been marked. Trivially destructible.
struct Row {
  Oid rel;
  ItemPointerData tid;
  Text id, aggregatetype, aggregateid, type, payload;
  int nheaders;
  Text* header_keys;
  Text* header_values;
  int attempts;
  TimestampTz created_at;
  int64 seq;
};

struct Fetched {
  Row* rows;
  int count;
  bool full;  // stopped by batch_size or batch_max_bytes: more work is likely waiting
  // The WAL position up to which the commits of the rows' transactions must be flushed
  // before they are sent (InvalidXLogRecPtr: they are durable).
  XLogRecPtr commits_upto;
};

// One batch of the pipeline. Two of them live as long as the relay, so the sink's view of
// `outcomes` outlives any one transaction.
struct Batch {
  MemoryContext memory;  // rows, headers, detoasted values: reset once the batch is marked
  Fetched fetched{};
  std::vector<sinks::Message> messages;
  std::vector<sinks::Outcome> outcomes;
  bool in_flight = false;     // started, not finished
  bool config_error = false;  // failed with a sinks::ConfigError
};

struct BatchResult {
  int batches = 0;
  int fetched = 0;
  bool full = false;
  int acked = 0;
  int rejected = 0;
  int dead = 0;
  // Unavailable in a batch that delivered nothing: the sink as a whole is in trouble.
  int unavailable = 0;
  // Unavailable in a batch that delivered others: put on the retry path, its key held.
  int transient = 0;
  int deferred = 0;  // not sent: an earlier event of its key failed (sinks::Delivery::kDeferred)
  // A deferred event stayed where it was (no rejected event of its key to wait behind).
  bool unresolved = false;
  // A batch was fetched but not sent: the wait for the synchronous standbys was given up.
  bool abandoned = false;
  // The first of each kind: later ones are mostly consequences (a batch purged because the
  // one before timed out).
  std::string first_rejection;
  std::string first_unavailable;
  std::string first_transient;
  bool config_error = false;  // the first unavailable one failed with a sinks::ConfigError
};

// rows.cpp: the executor's destination for a fetch. It copies each row into the batch's
// memory and stops the scan as soon as the batch is full, so that no row past
// outbox.batch_max_bytes is locked.
struct RowReceiver {
  DestReceiver dest;  // first: the executor holds a DestReceiver*
  Batch* batch;
  StringInfo scratch;  // where a payload's text is written before its fitted copy
  int limit;
  int64 bytes;  // payload and header bytes so far
  int64 max_bytes;
  TransactionId last_xmin;  // the last row's, whose commit LSN is counted
};
// Ready to receive up to `limit` rows into `batch`, counting on from `bytes`.
void init_row_receiver(RowReceiver& receiver, Batch& batch, StringInfo scratch, int limit,
                       int64 bytes, int64 max_bytes);

// report.cpp: what outbox.status shows of this relay, in its shared-memory slot.
class Report {
 public:
  explicit Report(int index) : index_(index) {}

  // The relay's number in the server log ("outbox relay 1"), 1-based.
  int number() const { return index_ + 1; }
  WorkerCounters& counters() { return counters_; }
  // Copies the counters to shared memory, with `state`, or the current one.
  void publish(WorkerState state);
  void publish();
  void record_error(const std::string& error);
  // What the sink's client library reports while a batch waits; on the sink's wait, so it
  // neither throws nor raises an ERROR.
  void client_error(std::string_view error) noexcept;
  // A transaction that fetched events: its batches, and its rejections (also logged).
  void count(const BatchResult& result);

 private:
  const int index_;
  WorkerCounters counters_{};
  int transient_passes_ = 0;  // passes in a row with transient failures
};

// sink_session.cpp: the configured sink, read from outbox.sink_config whenever the
// configuration generation moves (configure_sink and unconfigure_sink bump it at commit).
class SinkSession {
 public:
  explicit SinkSession(Report& report);

  // Makes sure the configured sink exists; false when there is nothing to send with. A
  // transaction of its own when the configuration has to be read; `iteration` is the memory
  // context it leaves current.
  bool ensure(MemoryContext iteration);
  // True once after ensure() found the extension missing, not updated or created again
  // (also when it then failed): a new extension has a new sequence, so the low-water mark
  // must be read again.
  bool take_new_extension();
  // The configuration changed since ensure() read it.
  bool changed() const;
  sinks::Sink& sink() { return *sink_; }
  const std::string& name() const { return name_; }
  // Destroys the sink (and with it, its client library's threads and buffers).
  void drop() { sink_.reset(); }
  // The client library's log lines, into the server log.
  void write_log();

 private:
  // Watches the sink's waits for acknowledgements, on the relay's thread.
  class WaitObserver final : public sinks::WaitObserver {
   public:
    WaitObserver(Report& report, const uint32& generation)
        : report_(report), generation_(generation) {}
    bool keep_waiting(std::string_view client_error) noexcept override;

   private:
    Report& report_;
    const uint32& generation_;
  };

  Report& report_;
  uint32 generation_ = 0;
  WaitObserver wait_observer_{report_, generation_};  // destroyed after sink_
  std::unique_ptr<sinks::Sink> sink_;
  std::string name_;
  // The installation of the extension the relay works for (pg_extension's oid).
  Oid extension_ = InvalidOid;
  bool new_extension_ = false;
  TimestampTz config_updated_at_ = 0;
  int isolation_ = -1;  // the outbox.sink_isolation sink_ was created with
};

// seal.cpp: the partitions below the floor are sealed. Every event in them is published or
// dead-lettered, and no transaction can route one there any more; no query reads them.
class Sealer {
 public:
  // What every query on outbox.events adds: part_at at or above the floor, as a literal, so
  // that the planner leaves the sealed partitions out of the plan. Empty while none is.
  const std::string& predicate() const { return predicate_; }
  // Moves with the predicate: a plan made for another version is made again.
  uint64 version() const { return version_; }
  // In the batch transaction, with the current mark (at most every second): a round of
  // sealing moves on (start_round, finish_round).
  void advance(TimestampTz now, int64 low_water);
  // Nothing is sealed any more (a new extension; an event may have come back).
  void reset();

 private:
  struct Partition {
    Oid rel;
    TimestampTz lower, upper;
  };
  std::vector<Partition> partitions() const;
  bool waiting(Oid partition, int64 low_water) const;
  bool audit(int64 low_water);
  void start_round(TimestampTz now);
  void finish_round(int64 low_water);
  void seal(TimestampTz floor);

  TimestampTz floor_ = DT_NOBEGIN;
  uint64 version_ = 0;
  std::string predicate_;
  uint32 generation_ = 0;
  TimestampTz checked_at_ = 0;
  TimestampTz audited_at_ = 0;
  // A round: the bound it seals below, and the transactions that ran when it was published.
  TimestampTz target_ = DT_NOBEGIN;
  std::vector<VirtualTransactionId> running_;
};

// ownership.cpp: the shards whose events this relay sends. Unordered (outbox.ordering =
// none): all of them, shared with every other worker, and no lock is taken.
class Ownership {
 public:
  explicit Ownership(int index);
  // At the start of a batch transaction, at most once a second (every pass while it owns
  // nothing): claims and gives back shards. True when it gained one: the mark must be read
  // again and the holds reloaded.
  bool round(TimestampTz now);
  bool ordered() const { return ordered_; }
  shards::Mask owned() const { return owned_; }
  // What the queries on outbox.events add (shards::predicate), and its version: it moves
  // whenever the owned shards change.
  const std::string& predicate() const { return predicate_; }
  // The owned shards as a SQL array literal (shards::array_literal), kept with the predicate
  // so that queries made inside guard() need no C++ temporary.
  const std::string& literal() const { return literal_; }
  uint64 version() const { return version_; }

 private:
  const int index_;
  bool ordered_;
  shards::Mask owned_ = 0;
  std::string predicate_;
  std::string literal_;
  uint64 version_ = 0;
  TimestampTz round_at_ = 0;
};

// low_water.cpp: where the scan for new events starts (docs/design.md, "The low-water
// mark"). Every event below the mark is published, dead-lettered or waiting for a retry,
// in the shards the relay owns (each shard's mark is saved in outbox.relay_shards).
class LowWater {
 public:
  explicit LowWater(const Ownership& ownership);
  // In the batch transaction, before its first fetch: moves the mark (at most every
  // kLowWaterCheckUs) and probes the gaps for late commits (late()).
  void advance(TimestampTz now);
  // Where a fetch of new events starts: after the resume point, and at least the mark.
  int64 fetch_from() const;
  // The late events the last probe found, for the first fetch of the next transaction.
  const std::vector<int64>& late() const { return late_; }
  // What a fetch took: the late events (if it looked for them), then the new events in seq
  // order from fetch_from() (whatever they passed over becomes gaps once it commits).
  void fetched(const Row* late_rows, int n_late, bool late_tried, const Row* new_rows, int n_new);
  // What a fetch of some shards only accounted for up to `upto` (Queue::scan_new): the other
  // shards' events it passed (sorted) and its own new events; the rest becomes gaps.
  void scanned(const int64* others, int n_others, const Row* new_rows, int n_new, int64 upto);
  // Around a batch transaction: what its fetches resolved counts once it commits with every
  // batch resolved (transaction_resolved()); otherwise tracking restarts from the mark.
  void transaction_started();
  void transaction_resolved();
  // At the end of the batch transaction, inside guard(): saves the mark to
  // outbox.relay_state, at most every kLowWaterSaveUs.
  void save(TimestampTz now);
  // After a failure, or when the mark was read or reset: the next fetch starts from the
  // mark, and nothing above it is known resolved.
  void restart_tracking();
  // The extension is gone or was created again (a new sequence): read the mark again.
  void forget();
  // The relay gained shards: read the marks of its shards again.
  void reread();
  // late_keys.cpp (ordered mode): the committed events in the gaps, and in what this
  // transaction's fetches passed over, that none of its fetches took: seqs and keys
  // (palloc'd), by seq; complete is false when there may be more.
  struct Late {
    int64* seqs;
    char** types;
    char** ids;
    int count;
    bool complete;
  };
  Late find_late();
  bool may_hold_late() const { return !gaps_.empty() || !passed_over_.empty(); }
  // The next fetch takes these first.
  void take_late_first(const Late& late);
  // A pass skipped the check (the one before was too recent) while gaps wait to be probed:
  // when the next check is due; 0 otherwise.
  TimestampTz skipped_check_due() const;
  // What every query on outbox.events adds: the sealed partitions left out, and only the
  // owned shards; the version moves with it (plans made for another are made again).
  // (A copy, made when the version moves: the queries are made inside guard(), where no
  // C++ temporary may live.)
  const std::string& scope() const { return scope_; }
  const std::string& sealed_scope() const { return sealer_.predicate(); }
  shards::Mask owned() const { return ownership_.owned(); }
  uint64 scope_version() const { return sealer_.version() + ownership_.version(); }

 private:
  void read_mark();
  int64 first_new_after_resume_point(bool& passed);
  bool read_horizon();
  void probe_gaps(TimestampTz now, int64 upto);
  // Drops the plans that read outbox.events when the scope changed.
  void check_plans();
  // Below every shard's mark (the saved ones, and this relay's own for its shards): what
  // sealing may rely on.
  int64 floor_for_sealing() const;

  const Ownership& ownership_;
  Sealer sealer_;
  std::string scope_;
  bool scope_made_ = false;
  int64 saved_floor_ = -1;  // the least mark of outbox.relay_shards, read at each save
  uint64 plans_version_ = 0;
  SPIPlanPtr probe_plan_ = nullptr;
  SPIPlanPtr low_water_plan_ = nullptr;
  SPIPlanPtr save_plan_ = nullptr;
  SPIPlanPtr floor_plan_ = nullptr;
  SPIPlanPtr late_keys_plan_ = nullptr;
  SPIPlanPtr sequence_plan_ = nullptr;
  // The low-water mark (-1: not read yet) and the horizon it may move up to.
  int64 low_water_ = -1;
  int64 low_water_saved_ = -1;
  TimestampTz low_water_saved_at_ = 0;
  TimestampTz low_water_checked_at_ = 0;
  // The last pass skipped the check because the one before was too recent.
  bool check_skipped_ = false;
  // Below the resume point, every event from the mark up is resolved by this relay
  // (published, dead-lettered or waiting for a retry, in transactions that committed),
  // except in the gaps. The open transaction's share counts once it commits: the values
  // its new events passed over, and the late events it took.
  int64 resume_after_seq_ = -1;
  SeqGaps gaps_;
  std::vector<SeqGaps::Interval> passed_over_;
  std::vector<int64> late_fetched_;
  // Late events found by the last probe, for the next fetch; when gaps are probed.
  std::vector<int64> late_;
  TimestampTz gap_probe_at_ = 0;
  bool horizon_valid_ = false;
  int64 horizon_seq_ = 0;
  FullTransactionId horizon_xid_{};
  bool warned_sequence_cache_ = false;
  Oid sequence_filenode_ = InvalidOid;
  Oid sequence_filenode_saved_ = InvalidOid;
};

// queue.cpp: the relay's statements on outbox.events.
class Queue {
 public:
  // Once, at start (inside guard()): the payload buffer, in TopMemoryContext.
  void init();
  // Fetches the next batch. The first of a transaction also moves the low-water mark, looks
  // for retries, and takes the late events a probe of the gaps found. In ordered mode, rows
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
  // Marks the acknowledged rows of `batch` published.
  void mark_acked(const Fetched& batch, const std::vector<sinks::Outcome>& outcomes);
  // A rejected event: a later retry, or the dead letters. True when dead-lettered.
  bool mark_rejected(const Row& row, const std::string& error);
  // A transient failure of this event alone (others of its batch were acknowledged): a
  // later retry, backing off with its key's failures in a row; no attempt is counted.
  void mark_transient(const Row& row, const std::string& error);
  void set_ordered(bool ordered) { ordered_ = ordered; }
  // When the next look for due retries is (a held key's retry time, at the latest a
  // poll_interval after the last look): the loop wakes for it.
  TimestampTz retry_check_at() const { return retry_check_at_; }

 private:
  void append_rows(SPIPlanPtr plan, int nparams, const Datum* values, const Oid* types,
                   Batch& batch, int limit, int64& bytes, int64 max_bytes);
  enum class Update { kPublished, kRejected, kTransient, kPutBack };
  // Holds the key of a failed event (ordered mode) and moves the next look for retries.
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
  Scanned scan_new(Batch& batch, int64 start, TimestampTz future, shards::Mask owned, int limit,
                   int64& bytes, int64 max_bytes);
  void load_holds();
  int keep_before_late(const Fetched& out, int new_from, LowWater& mark);
  // Puts a fetched row back on the retry path until `at`; no attempt is counted.
  void put_back(const Row& row, TimestampTz at);
  // Removes the rows of held keys from the batch (put back behind their blockers).
  void hold_back(Fetched& out);

  bool ordered_ = false;
  KeyHolds holds_;
  bool holds_stale_ = true;  // read them at the next look for retries
  SPIPlanPtr holds_plan_ = nullptr;
  SPIPlanPtr scan_new_plan_ = nullptr;
  // Made for the scope of plans_version_ (LowWater::scope_version()).
  uint64 plans_version_ = 0;
  SPIPlanPtr fetch_new_plan_ = nullptr;
  SPIPlanPtr fetch_retry_plan_ = nullptr;
  SPIPlanPtr fetch_late_plan_ = nullptr;
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
