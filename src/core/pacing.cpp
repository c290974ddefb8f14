#include "core/pacing.hpp"

#include <time.h>

#include <algorithm>
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

int Failures::failed(int min_ms, int max_ms, bool at_max) {
  if (count_ < INT32_MAX) ++count_;
  return with_jitter(at_max ? max_ms : backoff_ms(min_ms, max_ms, count_), rng_);
}

int64_t BatchPacer::wait_us(int64_t now_us, int64_t max_interval_us) const {
  if (full_ || max_interval_us <= 0) return 0;
  const auto spacing = std::min<int64_t>(max_interval_us, std::llround(cost_us_ / kShare));
  const int64_t start_at = last_start_us_ + spacing;
  return now_us < start_at ? start_at - now_us : 0;
}

// A batch that did more than send (the first one prepares its plans; a seal round, a
// checkpoint's stall) counts as at most twice the average: it must not make the next commits
// wait. A cost that stays higher still takes over, by an eighth more per batch.
void BatchPacer::finished(int64_t cpu_us, bool full) {
  const double sample = std::clamp(static_cast<double>(cpu_us), 0.0, 2 * cost_us_ + kCostFloorUs);
  cost_us_ += kCostWeight * (sample - cost_us_);
  full_ = full;
}

int64_t thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace outbox::pacing
