// How far a replay's batch moved it (relay/replay.cpp): plain C++, no PostgreSQL.
#pragma once

#include <cstdint>

namespace outbox::replay {

// What became of one message of a replay's batch.
enum class Outcome {
  kSent,     // acknowledged
  kRefused,  // rejected by the destination: skipped, not sent again
  kNotSent,  // unavailable, deferred, timed out: sent again by a later batch
};

struct Progress {
  std::int64_t position;  // every event of the replay up to this seq is done with
  std::int64_t sent;      // acknowledged within that prefix
  std::int64_t skipped;   // refused within that prefix
  int first_not_sent;     // the index where the prefix stopped; -1: the whole batch is done
};

// The prefix of a batch (`seqs` ascending, `outcomes` alongside) that is done with: the
// position moves only over events sent or refused in order, so that a key whose event was
// not sent has none of its later events counted (they go again, after it).
Progress advance(std::int64_t position, const std::int64_t* seqs, const Outcome* outcomes, int n);

}  // namespace outbox::replay
