// Where a relay's scan for new events starts: the shards it owns, the sealed partitions it
// leaves out, and the low-water mark with its gaps (relay.hpp lists the relay's parts).
#pragma once

#include <string>
#include <vector>

#include "core/seq_gaps.hpp"
#include "core/seq_set.hpp"
#include "core/shards.hpp"
#include "pg/postgres.hpp"
#include "relay/batch.hpp"

extern "C" {
#include "access/transam.h"
#include "storage/lock.h"
}

namespace outbox::pg::relay {

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

// ownership.cpp: the shards whose events this relay sends, each held by its advisory lock.
class Ownership {
 public:
  explicit Ownership(int index);
  // At the start of a batch transaction, at most once a second (every pass while it owns
  // nothing): claims and gives back shards. True when it gained one: the mark must be read
  // again and the holds reloaded.
  bool round(TimestampTz now);
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
  // kLowWaterCheckUs), probes the gaps for late commits (late()), and reads the delivery log
  // from the mark up when tracking restarted (delivered()).
  void advance(TimestampTz now);
  // Where a fetch of new events starts: after the resume point, and at least the mark.
  int64 fetch_from() const;
  // The late events the last probe found, for the first fetch of the next transaction.
  const std::vector<int64>& late() const { return late_; }
  // The late events a fetch took (if it looked for them).
  void fetched(const Row* late_rows, int n_late, bool late_tried);
  // What a scan of new events accounted for from fetch_from() up to `upto`
  // (Queue::scan_new): the events it did not copy (sorted) and the ones it copied; the rest
  // becomes gaps once the transaction commits.
  void scanned(const int64* others, int n_others, const Row* new_rows, int n_new, int64 upto);
  // The seqs the delivery log holds from the mark up, as of the last restart of tracking:
  // a scan from the mark passes over them (docs/design.md, "The delivery log").
  const SeqSet& delivered() const { return delivered_; }
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
  // late_keys.cpp: the committed events in the gaps, and in what this
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
  void move(TimestampTz now);
  void read_mark();
  void read_delivered();
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
  SeqSet delivered_;
  bool delivered_stale_ = true;
  SPIPlanPtr delivered_plan_ = nullptr;
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

}  // namespace outbox::pg::relay
