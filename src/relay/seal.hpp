// Sealed partitions: what no query of the relay reads any more (relay.hpp lists the relay's
// parts).
#pragma once

#include <string>
#include <vector>

#include "pg/postgres.hpp"

extern "C" {
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
  // While no commit wrote events (relay/idle.cpp): when a pass is due for sealing, DT_NOEND
  // when none is: a round under way, or the end of the next past partition's range as the
  // last round saw the partitions (one made since waits for a pass that runs anyway).
  TimestampTz idle_due() const;

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
  // The first range end still to pass, of a partition that is not the newest (0: not known).
  TimestampTz next_end_ = 0;
  std::vector<VirtualTransactionId> running_;
};

}  // namespace outbox::pg::relay
