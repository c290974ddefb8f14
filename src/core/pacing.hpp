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

// Whether the next batch starts at once or waits for commits to gather. Under a stream of
// small commits every one of them wakes the relay, and a batch per commit costs CPU that
// writers need, even when each batch finds one event (a single fast writer). While the
// stream is heavy, the next batch starts min_interval after the last one started, so that
// commits gather; slower streams, and an idle relay, send a commit at once.
class BatchPacer {
 public:
  // Heavy from this rate (events per second) until it falls under half of it: a dip in one
  // gathering interval does not bring back a batch per commit. Slower streams (200
  // commits/s: the latency target), and bursts of a few commits, are sent a commit at a time.
  static constexpr double kGatherAbovePerSecond = 1000;
  // The rate is a moving average with this time constant.
  static constexpr double kRateTimeConstantUs = 50 * 1000;

  // How long a batch that would start at now_us waits: until min_interval_us after the last
  // one started, while the stream is heavy and the last batch was not full; else 0.
  int64_t wait_us(int64_t now_us, int64_t min_interval_us) const;
  // A batch starts at start_us.
  void started(int64_t start_us);
  // The batch that started last found `events` events; `full`: it stopped at its limits
  // (more are waiting: no reason to gather).
  void finished(int events, bool full);

  double rate() const { return rate_; }
  bool heavy() const { return heavy_; }

 private:
  int64_t last_start_us_ = 0;
  int64_t previous_start_us_ = 0;
  bool gather_next_ = false;
  double rate_ = 0;  // events per second
  bool heavy_ = false;
};

}  // namespace outbox::pacing
