// The shards a relay owns (relay.hpp lists the relay's parts).
#pragma once

#include <string>

#include "core/shards.hpp"
#include "pg/postgres.hpp"

namespace outbox::pg::relay {

// ownership.cpp: the shards whose events this relay sends, each held by its advisory lock.
class Ownership {
 public:
  Ownership(int slot, int worker);
  // At the start of a batch transaction, at most once a second (every pass while it owns
  // nothing): claims and gives back shards. True when it gained one: the mark must be read
  // again and the holds reloaded.
  bool round(TimestampTz now);
  shards::Mask owned() const { return owned_; }
  // While no commit wrote events (relay/idle.cpp): whether a round would claim or give back
  // a shard (a worker started or stopped), or the relay owns none. No transaction needed.
  bool round_wanted() const;
  // What the queries on outbox.events add (shards::predicate), and its version: it moves
  // whenever the owned shards change.
  const std::string& predicate() const { return predicate_; }
  // The owned shards as a SQL array literal (shards::array_literal), kept with the predicate
  // so that queries made inside guard() need no C++ temporary.
  const std::string& literal() const { return literal_; }
  uint64 version() const { return version_; }

 private:
  const int slot_;
  const int worker_;
  shards::Mask owned_ = 0;
  std::string predicate_;
  std::string literal_;
  uint64 version_ = 0;
  TimestampTz round_at_ = 0;
};

}  // namespace outbox::pg::relay
