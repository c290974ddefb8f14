// The relay's statements on outbox.events (relay.hpp lists the relay's parts).
#pragma once

#include <string>
#include <vector>

#include <boost/container/flat_map.hpp>

#include "core/key_holds.hpp"
#include "core/transient_failures.hpp"
#include "pg/postgres.hpp"
#include "relay/batch.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::pg::relay {

class Queue {
 public:
  // Once, at start (inside guard()): the payload buffer, in TopMemoryContext.
  void init();
  // Fetches the next batch as `request` says: the retries due (the first fetch of a
  // transaction), the late events, then the new ones. What it passed over goes to the
  // report, for the mark.
  FetchReport fetch(Batch& batch, bool first_of_transaction, TimestampTz now,
                    const FetchRequest& request);
  // After the mark has accounted for a fetch: the rows of a held key (core/key_holds.hpp) go
  // back on the retry path, behind their blocker; from `behind_all_from` on, also those whose
  // blocker is in the batch.
  void hold_back(Fetched& out, int behind_all_from);
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
  // No retry of this relay's shards waits: no key is held, none is left to learn, and the
  // last look took every due one. Only this relay schedules retries in its shards.
  bool retries_idle() const { return !holds_stale_ && holds_.empty() && !retries_cut_; }

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

  bool scan_new(Batch& batch, const FetchRequest& request, TimestampTz future, int limit,
                int64& bytes, int64 max_bytes, FetchReport& report);
  void load_holds();
  struct PutBack {
    Oid rel;
    ItemPointerData tid;
    TimestampTz at;
  };
  // Puts fetched rows back on the retry path, each due at its `at`; no attempt is counted.
  void put_back(const std::vector<PutBack>& rows);

  KeyHolds holds_;
  bool holds_stale_ = true;  // read them at the next look for retries
  SPIPlanPtr holds_plan_ = nullptr;
  SPIPlanPtr scan_new_plan_ = nullptr;
  // Made for this scope (FetchRequest::scope_versions).
  ScopeVersions plans_scope_;
  SPIPlanPtr fetch_retry_plan_ = nullptr;
  SPIPlanPtr fetch_late_plan_ = nullptr;
  SPIPlanPtr log_plan_ = nullptr;  // kLogSql: no scope, made once
  // Where each payload is written before its fitted copy (in TopMemoryContext).
  StringInfoData payload_scratch_{};
  // When retries are looked for next.
  TimestampTz retry_check_at_ = 0;
  bool retries_cut_ = false;  // the last look for retries stopped at its limit
  boost::container::flat_map<Oid, SPIPlanPtr> mark_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> reject_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> put_back_plans_;
  boost::container::flat_map<Oid, SPIPlanPtr> transient_plans_;
  TransientFailures transient_;
};

}  // namespace outbox::pg::relay
