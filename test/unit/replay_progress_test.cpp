#include "core/replay_progress.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

using outbox::replay::advance;
using outbox::replay::Outcome;

TEST(ReplayProgress, AWholeBatchMovesToItsLastSeq) {
  const std::vector<std::int64_t> seqs = {11, 12, 15};
  const std::vector<Outcome> out = {Outcome::kSent, Outcome::kSent, Outcome::kSent};
  const auto p = advance(10, seqs.data(), out.data(), 3);
  EXPECT_EQ(p.position, 15);
  EXPECT_EQ(p.sent, 3);
  EXPECT_EQ(p.skipped, 0);
  EXPECT_EQ(p.first_not_sent, -1);
}

TEST(ReplayProgress, ARefusedEventIsSkippedAndPassed) {
  const std::vector<std::int64_t> seqs = {11, 12, 13};
  const std::vector<Outcome> out = {Outcome::kSent, Outcome::kRefused, Outcome::kSent};
  const auto p = advance(10, seqs.data(), out.data(), 3);
  EXPECT_EQ(p.position, 13);
  EXPECT_EQ(p.sent, 2);
  EXPECT_EQ(p.skipped, 1);
}

TEST(ReplayProgress, StopsBeforeTheFirstEventNotSent) {
  // Events after it that were acknowledged are not counted: the next batch sends them again,
  // after it, so that no key's events go out of order.
  const std::vector<std::int64_t> seqs = {11, 12, 13, 14};
  const std::vector<Outcome> out = {Outcome::kSent, Outcome::kNotSent, Outcome::kSent,
                                    Outcome::kSent};
  const auto p = advance(10, seqs.data(), out.data(), 4);
  EXPECT_EQ(p.position, 11);
  EXPECT_EQ(p.sent, 1);
  EXPECT_EQ(p.first_not_sent, 1);
}

TEST(ReplayProgress, NothingMovesWhenTheFirstIsNotSent) {
  const std::vector<std::int64_t> seqs = {11, 12};
  const std::vector<Outcome> out = {Outcome::kNotSent, Outcome::kSent};
  const auto p = advance(10, seqs.data(), out.data(), 2);
  EXPECT_EQ(p.position, 10);
  EXPECT_EQ(p.sent, 0);
  EXPECT_EQ(p.skipped, 0);
  EXPECT_EQ(p.first_not_sent, 0);
}

TEST(ReplayProgress, AnEmptyBatchChangesNothing) {
  const auto p = advance(42, nullptr, nullptr, 0);
  EXPECT_EQ(p.position, 42);
  EXPECT_EQ(p.first_not_sent, -1);
}

}  // namespace
