// The relay's pacing: how long it waits after a failure, and when a batch starts under a
// stream of commits. Plain C++, unit-tested without a server; times in microseconds (the
// caller's clock), delays in milliseconds.
#pragma once

#include <cstdint>
#include <random>

namespace outbox::pacing {

// The one back-off formula: min_ms * 2^(attempt - 1), at most max_ms. Attempt 1 is the first
// failure, and waits min_ms; an attempt below 1 counts as 1. No attempt count overflows: the
// doubling stops at the cap. min_ms and max_ms are not negative.
int backoff_ms(int min_ms, int max_ms, int attempt);

// `ms` times a factor drawn uniformly from [0.5, 1), and at least 1. The relay's back-off
// after a sink outage takes it, so that workers (and servers) that failed together do not
// all come back at once; a rejected event's retry time does not (docs/reference.md).
int with_jitter(int ms, std::mt19937_64& rng);

// A worker's failures in a row, and the wait after each: the one back-off of the relay and
// the replay worker (backoff_ms() with jitter).
class Failures {
 public:
  explicit Failures(uint64_t seed) : rng_(seed) {}
  // One more failure: the wait before the next try. `at_max`: the longest wait at once (a
  // configuration error, which no retry soon will mend).
  int failed(int min_ms, int max_ms, bool at_max = false);
  void succeeded() { count_ = 0; }
  int count() const { return count_; }
  // The first failure and then at doubling counts: a log line for those, not every retry.
  bool worth_a_log_line() const { return count_ > 0 && (count_ & (count_ - 1)) == 0; }

 private:
  int count_ = 0;
  std::mt19937_64 rng_;
};

// When the next batch starts: at once, unless the relay would then spend more than
// kShare of a core on batches that commits could share. Under a stream of small commits every
// commit wakes the relay, and a batch per commit costs the relay a fixed CPU price (its
// statements, the sink call), whatever it finds. So the next batch starts no sooner than
// cost / kShare after the last one started, cost being a moving average of the CPU a batch
// took: with a batch costing ~0.2 ms that is ~0.8 ms, so commits gather only when they come
// faster than that, and then by fractions of a millisecond, not by a fixed interval. Batches
// grow with the stream; the relay's share stays at kShare until they are full. A full batch
// (a backlog) never waits.
class BatchPacer {
 public:
  // The share of one core the relay may spend on batches that could have been one.
  static constexpr double kShare = 0.25;
  // Weight of the latest batch in the moving average of the cost.
  static constexpr double kCostWeight = 1.0 / 8;
  // A batch counts as at most twice the average cost plus this (see finished()).
  static constexpr double kCostFloorUs = 100;

  // How long a batch that would start at now_us waits (0: it starts now). max_interval_us
  // (outbox.min_batch_interval) caps the wait; 0 turns gathering off.
  int64_t wait_us(int64_t now_us, int64_t max_interval_us) const;
  // A batch starts at start_us.
  void started(int64_t start_us) { last_start_us_ = start_us; }
  // The batch that started last took cpu_us of the relay's CPU; `full`: it stopped at its
  // limits (more are waiting: no reason to gather).
  void finished(int64_t cpu_us, bool full);

  double cost_us() const { return cost_us_; }

 private:
  int64_t last_start_us_ = 0;
  double cost_us_ = 0;
  bool full_ = false;
};

// The CPU time the calling thread has used, in microseconds. The relay's own work, not a
// client library's threads, whose timers tick whether batches come or not.
int64_t thread_cpu_us();

}  // namespace outbox::pacing
