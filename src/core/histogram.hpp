// The relay's histograms (docs/monitoring.md): fixed bucket bounds, Prometheus-style, and a
// tally a relay fills over one transaction before it adds it to shared memory. Plain C++,
// unit-tested without a server.
#pragma once

#include <array>
#include <cstdint>

namespace outbox::histogram {

// Seconds, 0.05 ms to 60 s: the range from a commit acknowledged at once to a broker outage
// retried at outbox.retry_backoff_max.
inline constexpr std::array<double, 19> kSecondsBounds = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1,     0.25,   0.5,     1,      2.5,   5,      10,    30,   60};
// Events per batch: 1 to outbox.batch_size's maximum.
inline constexpr std::array<double, 13> kSizeBounds = {1,   2,   5,    10,   20,   50,   100,
                                                       200, 500, 1000, 2000, 5000, 10000};

// The bucket of `value`: the first bound at or above it (Prometheus' `le`), or `n` (+Inf).
int bucket_of(const double* bounds, int n, double value);

// Counts per bucket (not cumulative; the last one is +Inf) and the sum of the values, in the
// value's unit times `kSumScale` (whole microseconds for seconds), so that shared memory
// holds integers only.
template <std::size_t N>
struct Tally {
  static constexpr int kBuckets = static_cast<int>(N) + 1;
  std::array<std::uint64_t, N + 1> counts{};
  std::uint64_t sum = 0;

  void add(const std::array<double, N>& bounds, double value, double sum_scale) {
    ++counts[bucket_of(bounds.data(), static_cast<int>(N), value)];
    sum += value > 0 ? static_cast<std::uint64_t>(value * sum_scale + 0.5) : 0;
  }
  std::uint64_t count() const {
    std::uint64_t n = 0;
    for (std::uint64_t c : counts) n += c;
    return n;
  }
};

using Seconds = Tally<kSecondsBounds.size()>;
using Sizes = Tally<kSizeBounds.size()>;
inline constexpr double kMicros = 1e6;  // Seconds' sum: microseconds
inline constexpr double kUnits = 1;     // Sizes' sum: events

}  // namespace outbox::histogram
