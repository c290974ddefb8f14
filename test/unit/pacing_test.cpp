#include "core/pacing.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <vector>

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

// Batches `every_us` apart, each costing `cpu_us` of CPU (not full).
void stream(BatchPacer& pacer, int64_t& now, int64_t every_us, int64_t cpu_us, int batches) {
  for (int i = 0; i < batches; ++i) {
    pacer.started(now);
    pacer.finished(cpu_us, false);
    now += every_us;
  }
}

// Microseconds since 2000, as PostgreSQL counts: the first batch comes long after "0".
constexpr int64_t kStart = 800'000'000'000'000;
constexpr int64_t kInterval = 50'000;  // outbox.min_batch_interval's default
constexpr int64_t kCost = 200;         // a batch of one event, null sink, measured ~0.2 ms

TEST(BatchPacer, AnIdleRelaySendsACommitAtOnce) {
  BatchPacer pacer;
  EXPECT_EQ(pacer.wait_us(kStart, kInterval), 0);
  int64_t now = kStart;
  stream(pacer, now, 0, kCost, 1);
  EXPECT_EQ(pacer.wait_us(now + 1'000'000, kInterval), 0);
}

TEST(BatchPacer, StreamsTheRelayCanAffordAreSentACommitAtATime) {
  // 800 commits/s: a batch every 1,250 us costs 16 % of a core, under kShare.
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 1'250, kCost, 1000);
  EXPECT_NEAR(pacer.cost_us(), kCost, 1);
  EXPECT_EQ(pacer.wait_us(now, kInterval), 0);
}

TEST(BatchPacer, ABurstWaitsFractionsOfAMillisecondNotTheInterval) {
  // 20,000 commits/s: the next batch starts cost / kShare (800 us) after the last one.
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 50, kCost, 1000);
  now -= 50;  // the moment the last batch started
  EXPECT_EQ(pacer.wait_us(now + 50, kInterval), 750);
  EXPECT_EQ(pacer.wait_us(now + 800, kInterval), 0);
  EXPECT_EQ(pacer.wait_us(now + 50, 0), 0) << "min_batch_interval 0 turns it off";
  EXPECT_EQ(pacer.wait_us(now + 50, 300), 250) << "min_batch_interval caps the wait";
}

TEST(BatchPacer, TheWaitFollowsWhatABatchCosts) {
  BatchPacer cheap, dear;
  int64_t a = kStart, b = kStart;
  stream(cheap, a, 50, 100, 1000);
  stream(dear, b, 50, 2'000, 1000);
  EXPECT_EQ(cheap.wait_us(a - 50, kInterval), 400);
  EXPECT_EQ(dear.wait_us(b - 50, kInterval), 8'000);
}

TEST(BatchPacer, AFullBatchDoesNotWait) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 50, kCost, 100);
  pacer.started(now);
  pacer.finished(5'000, true);
  EXPECT_EQ(pacer.wait_us(now + 1, kInterval), 0);
}

TEST(BatchPacer, OneExpensiveBatchCountsAsTwiceTheAverage) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 1'000, 30'000, 1);  // the first batch prepares its plans
  EXPECT_NEAR(pacer.cost_us(), 12.5, 0.1);
  stream(pacer, now, 1'000, kCost, 200);
  stream(pacer, now, 1'000, kCost + 8'000, 1);  // a seal round, a checkpoint's stall
  EXPECT_NEAR(pacer.cost_us(), kCost + 300.0 / 8, 1);
  EXPECT_LT(pacer.wait_us(now - 1'000, kInterval), 1'000);
}

TEST(BatchPacer, ACostThatStaysHigherTakesOver) {
  BatchPacer pacer;
  int64_t now = kStart;
  stream(pacer, now, 1'000, kCost, 200);
  stream(pacer, now, 1'000, 5'000, 60);  // batches of a thousand events
  EXPECT_NEAR(pacer.cost_us(), 5'000, 50);
}

TEST(Cpu, ThreadCpuTimeMovesWithWork) {
  const int64_t before = outbox::pacing::thread_cpu_us();
  volatile uint64_t x = 0;
  for (int i = 0; i < 50'000'000; ++i) x = x + static_cast<uint64_t>(i);
  EXPECT_GT(outbox::pacing::thread_cpu_us(), before);
}

}  // namespace

TEST(Failures, EachFailureWaitsTheNextBackoffWithJitter) {
  outbox::pacing::Failures failures(7);
  for (int attempt = 1; attempt <= 8; ++attempt) {
    const int ms = failures.failed(100, 5000);
    const int full = outbox::pacing::backoff_ms(100, 5000, attempt);
    EXPECT_GE(ms, full / 2) << "attempt " << attempt;
    EXPECT_LT(ms, full) << "attempt " << attempt;
    EXPECT_EQ(failures.count(), attempt);
  }
}

TEST(Failures, AtMaxWaitsTheLongestAtOnce) {
  outbox::pacing::Failures failures(7);
  const int ms = failures.failed(100, 5000, true);
  EXPECT_GE(ms, 2500);
  EXPECT_LT(ms, 5000);
}

TEST(Failures, ASuccessStartsOver) {
  outbox::pacing::Failures failures(7);
  for (int i = 0; i < 5; ++i) failures.failed(100, 5000);
  failures.succeeded();
  EXPECT_EQ(failures.count(), 0);
  const int ms = failures.failed(100, 5000);
  EXPECT_GE(ms, 50);
  EXPECT_LT(ms, 100);
}

TEST(Failures, ALogLineForTheFirstAndThenAtDoublingCounts) {
  outbox::pacing::Failures failures(7);
  EXPECT_FALSE(failures.worth_a_log_line());
  std::vector<int> logged;
  for (int i = 1; i <= 20; ++i) {
    failures.failed(1, 10);
    if (failures.worth_a_log_line()) logged.push_back(failures.count());
  }
  EXPECT_EQ(logged, (std::vector<int>{1, 2, 4, 8, 16}));
}
