#include "core/pacing.hpp"

#include <cmath>

namespace outbox::pacing {

int backoff_ms(int min_ms, int max_ms, int attempt) {
  // min * 2^k <= max exactly when min <= max >> k: the shift happens only below the cap.
  const int k = attempt <= 1 ? 0 : attempt - 1 < 62 ? attempt - 1 : 62;
  const int64_t min = min_ms;
  const int64_t max = max_ms;
  if (min > (max >> k)) return max_ms;
  return static_cast<int>(min << k);
}

int with_jitter(int ms, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> factor(0.5, 1.0);
  const int jittered = static_cast<int>(ms * factor(rng));
  return jittered < 1 ? 1 : jittered;
}

int64_t BatchPacer::wait_us(int64_t now_us, int64_t min_interval_us) const {
  const int64_t gather_until = last_start_us_ + min_interval_us;
  return gather_next_ && now_us < gather_until ? gather_until - now_us : 0;
}

void BatchPacer::started(int64_t start_us) {
  previous_start_us_ = last_start_us_;
  last_start_us_ = start_us;
}

// The rate: a moving average of what each batch found over the time since the one before
// started (with a single time constant, each event adds 1 / kRateTimeConstantUs however the
// batches fall).
void BatchPacer::finished(int events, bool full) {
  const int64_t elapsed_us = last_start_us_ - previous_start_us_;
  if (elapsed_us > 0) {
    const double sample = static_cast<double>(events) * 1e6 / static_cast<double>(elapsed_us);
    const double weight = 1.0 - std::exp(-static_cast<double>(elapsed_us) / kRateTimeConstantUs);
    rate_ += weight * (sample - rate_);
    heavy_ = rate_ >= (heavy_ ? kGatherAbovePerSecond / 2 : kGatherAbovePerSecond);
  }
  gather_next_ = heavy_ && !full;
}

}  // namespace outbox::pacing
