// The low-water mark with its gaps: where a relay's scan for new events starts (relay.hpp
// lists the relay's parts).
#pragma once

#include <string>
#include <vector>

#include "core/scan_tracker.hpp"
#include "core/shards.hpp"
#include "pg/postgres.hpp"
#include "relay/batch.hpp"
#include "relay/ownership.hpp"
#include "relay/seal.hpp"

extern "C" {
#include "access/transam.h"
}

namespace outbox::pg::relay {

// low_water.cpp: where the scan for new events starts (docs/design.md, "The low-water
// mark"). Every event below the mark is published, dead-lettered or waiting for a retry,
// in the shards the relay owns (each shard's mark is saved in outbox.relay_shards). The
// queries around the mark are here; what they read decides through core/scan_tracker.hpp.
// The sealed partitions and the owned shards are read, not driven: Relay drives them.
class LowWater {
 public:
  LowWater(const Ownership& ownership, const Sealer& sealer);
  // In the batch transaction, before advance(): below every shard's mark (the saved ones,
  // and this relay's own for its shards, read first when unknown), what sealing may rely on.
  int64 floor_for_sealing();
  // In the batch transaction, before its first fetch: moves the mark (at most every
  // kLowWaterCheckUs), probes the gaps for late commits (FetchRequest::late), and reads the
  // delivery log from the mark up when tracking restarted (FetchRequest::delivered).
  void advance(TimestampTz now);
  // What the next fetch reads: from after the resume point (at least the mark), the late
  // events first, in the scope of the owned shards and unsealed partitions.
  FetchRequest request() const;
  // After a fetch: first, no new event goes out before a late one of its key (late_keys.cpp:
  // the batch may be cut, and the report with it); then what it took and passed over is
  // accounted for. The values between the accounted ones become gaps once the transaction
  // commits.
  void account(Fetched& out, FetchReport& report);
  // Around a batch transaction: what its fetches resolved counts once it commits with every
  // batch resolved (transaction_resolved()); otherwise tracking restarts from the mark.
  void transaction_started() { tracker_.transaction_started(); }
  void transaction_resolved() { tracker_.transaction_resolved(); }
  // At the end of the batch transaction, inside guard(): saves the mark to
  // outbox.relay_state, at most every kLowWaterSaveUs.
  void save(TimestampTz now);
  // After a failure, or when the mark was read or reset: the next fetch starts from the
  // mark, and nothing above it is known resolved.
  void restart_tracking() { tracker_.restart_tracking(); }
  // The extension is gone or was created again (a new sequence): read the mark again (the
  // relay resets its Sealer with it).
  void forget();
  // The relay gained shards: read the marks of its shards again.
  void reread();
  // A pass skipped the check (the one before was too recent) while gaps wait to be probed:
  // when the next check is due; 0 otherwise.
  TimestampTz skipped_check_due() const;
  // While no commit wrote events (relay/idle.cpp): when a pass is due for the mark, DT_NOEND
  // when none is. The mark settled (past every value the sequence had handed out at the
  // last check, no gap, nothing to reread) and saved needs none; one that can still move, a
  // gap to probe or a save that waits need one as they do now.
  TimestampTz idle_due(bool owns) const;
  // Moves with the scope of the queries (the sealed partitions, the owned shards).
  ScopeVersions scope_versions() const { return {sealer_.version(), ownership_.version()}; }

 private:
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
  void keep_before_late(Fetched& out, FetchReport& report, const int64* new_seqs);
  void move(TimestampTz now);
  int64 read_mark();
  void read_delivered();
  int64 first_new_after_resume_point(bool& passed);
  bool read_horizon();
  void probe_gaps(TimestampTz now, int64 upto, const std::vector<SeqGaps::Interval>& cover);
  // Drops the plans that read outbox.events when the scope changed.
  void check_plans();

  const Ownership& ownership_;
  const Sealer& sealer_;
  std::string scope_;
  bool scope_made_ = false;
  int64 saved_floor_ = -1;  // the least mark of outbox.relay_shards, read at each save
  ScopeVersions plans_scope_;
  SPIPlanPtr probe_plan_ = nullptr;
  SPIPlanPtr low_water_plan_ = nullptr;
  SPIPlanPtr save_plan_ = nullptr;
  SPIPlanPtr floor_plan_ = nullptr;
  SPIPlanPtr late_keys_plan_ = nullptr;
  SPIPlanPtr sequence_plan_ = nullptr;
  // The low-water mark (ScanTracker::mark(); -1: not read yet) and the horizon it may move
  // up to.
  int64 low_water_saved_ = -1;
  TimestampTz low_water_saved_at_ = 0;
  TimestampTz low_water_checked_at_ = 0;
  // The last pass skipped the check because the one before was too recent.
  bool check_skipped_ = false;
  // The resume point, the gaps, the open transaction's share, the delivery log from the mark
  // up, the late events for the next fetch; and the seqs of a fetch's rows (account()).
  ScanTracker tracker_;
  std::vector<int64> seqs_;
  SPIPlanPtr delivered_plan_ = nullptr;
  // When gaps are probed.
  TimestampTz gap_probe_at_ = 0;
  bool horizon_valid_ = false;
  int64 horizon_seq_ = 0;
  FullTransactionId horizon_xid_{};
  bool warned_sequence_cache_ = false;
  Oid sequence_filenode_ = InvalidOid;
  Oid sequence_filenode_saved_ = InvalidOid;
};

}  // namespace outbox::pg::relay
