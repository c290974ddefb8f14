#include "core/pacing.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <random>

namespace {

using outbox::pacing::backoff_ms;
using outbox::pacing::BatchPacer;
using outbox::pacing::with_jitter;

TEST(Backoff, DoublesFromTheMinimumUpToTheCap) {
  // outbox.retry_backoff_min and _max at their defaults.
  const int expected[] = {100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 60000, 60000};
  for (int attempt = 1; attempt <= 12; ++attempt) {
    EXPECT_EQ(backoff_ms(100, 60000, attempt), expected[attempt - 1]) << "attempt " << attempt;
  }
}

TEST(Backoff, ReachesTheCapExactlyAndStaysThere) {
  EXPECT_EQ(backoff_ms(100, 400, 1), 100);
  EXPECT_EQ(backoff_ms(100, 400, 2), 200);
  EXPECT_EQ(backoff_ms(100, 400, 3), 400);
  EXPECT_EQ(backoff_ms(100, 400, 4), 400);
  // The settings' extremes: an hour doubling up to a day.
  const int hour = 3600 * 1000;
  const int day = 24 * hour;
  EXPECT_EQ(backoff_ms(hour, day, 4), 8 * hour);
  EXPECT_EQ(backoff_ms(hour, day, 5), 16 * hour);
  EXPECT_EQ(backoff_ms(hour, day, 6), day);
}

TEST(Backoff, AnAttemptBelowOneIsTheFirst) {
  EXPECT_EQ(backoff_ms(100, 60000, 0), 100);
  EXPECT_EQ(backoff_ms(100, 60000, -7), 100);
  EXPECT_EQ(backoff_ms(100, 60000, INT_MIN), 100);
}

TEST(Backoff, HugeAttemptCountsDoNotOverflow) {
  // 2^30 still fits below the cap; 2^31 would not fit an int.
  EXPECT_EQ(backoff_ms(1, INT_MAX, 31), 1 << 30);
  EXPECT_EQ(backoff_ms(1, INT_MAX, 32), INT_MAX);
  for (int attempt : {33, 62, 63, 64, 65, 1000, 1000000, INT_MAX}) {
    EXPECT_EQ(backoff_ms(1, INT_MAX, attempt), INT_MAX) << "attempt " << attempt;
    EXPECT_EQ(backoff_ms(INT_MAX, INT_MAX, attempt), INT_MAX) << "attempt " << attempt;
    EXPECT_EQ(backoff_ms(100, 60000, attempt), 60000) << "attempt " << attempt;
  }
}

TEST(Backoff, AMaximumBelowTheMinimumWins) {
  EXPECT_EQ(backoff_ms(500, 200, 1), 200);
  EXPECT_EQ(backoff_ms(500, 200, 9), 200);
}

TEST(Jitter, StaysWithinHalfToAllOfTheDelay) {
  std::mt19937_64 rng(42);
  int lowest = INT_MAX;
  int highest = 0;
  for (int i = 0; i < 10000; ++i) {
    const int ms = with_jitter(1000, rng);
    ASSERT_GE(ms, 500);
    ASSERT_LT(ms, 1000);
    lowest = std::min(lowest, ms);
    highest = std::max(highest, ms);
  }
  // It spreads over the whole range, not only part of it.
  EXPECT_LT(lowest, 510);
  EXPECT_GT(highest, 990);
}

TEST(Jitter, IsAtLeastOneMillisecond) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(with_jitter(1, rng), 1);
    EXPECT_EQ(with_jitter(0, rng), 1);
  }
}

TEST(Jitter, OfTheLongestDelayDoesNotOverflow) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 1000; ++i) {
    const int ms = with_jitter(INT_MAX, rng);
    ASSERT_GE(ms, INT_MAX / 2);
    ASSERT_LT(ms, INT_MAX);
  }
}

// A stream of batches `every_us` apart, each finding `events` events (not full).
void stream(BatchPacer& pacer, int64_t& now, int64_t every_us, int events, int batches) {
  for (int i = 0; i < batches; ++i) {
    pacer.started(now);
    pacer.finished(events, false);
    now += every_us;
  }
}

// Microseconds since 2000, as PostgreSQL counts: the first batch comes long after "0".
constexpr int64_t kStart = 800'000'000'000'000;
constexpr int64_t kInterval = 50'000;  // outbox.min_batch_interval's default

TEST(BatchPacer, AnIdleRelaySendsACommitAtOnce) {
  BatchPacer pacer;
  int64_t now = kStart;
  EXPECT_EQ(pacer.wait_us(now, kInterval), 0);
  stream(pacer, now, 1'000'000, 1, 5);  // one commit a second
  EXPECT_FALSE(pacer.heavy());
  EXPECT_EQ(pacer.wait_us(now, kInterval), 0);
}

TEST(BatchPacer, SlowStreamsAreSentACommitAtATime) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 5'000, 1, 1000);  // 200 commits/s for five seconds
  EXPECT_NEAR(pacer.rate(), 200, 1);
  EXPECT_FALSE(pacer.heavy());
  EXPECT_EQ(pacer.wait_us(now, kInterval), 0);
}

TEST(BatchPacer, AHeavyStreamGathers) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 500, 1, 1000);  // 2000 commits/s, each batch finds one
  EXPECT_NEAR(pacer.rate(), 2000, 1);
  EXPECT_TRUE(pacer.heavy());
  // The next batch waits until min_interval after the last one started (500 µs ago).
  EXPECT_EQ(pacer.wait_us(now, kInterval), kInterval - 500);
  EXPECT_EQ(pacer.wait_us(now + kInterval - 500, kInterval), 0);
  EXPECT_EQ(pacer.wait_us(now, 0), 0) << "min_batch_interval 0 disables it";
  // Gathered: 100 events per 50 ms batch is still 2000/s.
  stream(pacer, now, kInterval, 100, 100);
  EXPECT_TRUE(pacer.heavy());
}

TEST(BatchPacer, AFullBatchDoesNotWait) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 500, 1, 1000);
  pacer.started(now);
  pacer.finished(1000, true);
  EXPECT_TRUE(pacer.heavy());
  EXPECT_EQ(pacer.wait_us(now + 1, kInterval), 0);
}

TEST(BatchPacer, HeavyUntilTheRateFallsUnderHalf) {
  BatchPacer light;
  int64_t now = kStart;
  stream(light, now, 1'000'000 / 700, 1, 2000);  // 700/s: not heavy from light
  EXPECT_FALSE(light.heavy());

  BatchPacer heavy;
  now = kStart;
  stream(heavy, now, 500, 1, 1000);
  ASSERT_TRUE(heavy.heavy());
  stream(heavy, now, 1'000'000 / 700, 1, 2000);  // 700/s: stays heavy
  EXPECT_TRUE(heavy.heavy());
  stream(heavy, now, 1'000'000 / 400, 1, 2000);  // 400/s: light again
  EXPECT_FALSE(heavy.heavy());
  EXPECT_EQ(heavy.wait_us(now, kInterval), 0);
}

TEST(BatchPacer, AQuietSecondEndsAHeavyStream) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 500, 1, 1000);
  ASSERT_TRUE(pacer.heavy());
  now += 1'000'000;
  stream(pacer, now, 0, 1, 1);
  EXPECT_FALSE(pacer.heavy());
}

TEST(BatchPacer, BatchesStartingTogetherLeaveTheRateAsItIs) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 500, 1, 1000);
  pacer.started(now);
  pacer.finished(1, false);
  const double rate = pacer.rate();
  pacer.started(now);  // no time since the last start
  pacer.finished(50, false);
  EXPECT_EQ(pacer.rate(), rate);
}

}  // namespace
