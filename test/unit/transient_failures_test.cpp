#include "core/transient_failures.hpp"

#include <gtest/gtest.h>

namespace {

using outbox::TransientFailures;

TEST(TransientFailures, CountsInARowPerKey) {
  TransientFailures counts;
  EXPECT_TRUE(counts.empty());
  EXPECT_EQ(counts.failed("order", "1"), 1);
  EXPECT_EQ(counts.failed("order", "1"), 2);
  EXPECT_EQ(counts.failed("order", "2"), 1);
  // The type is part of the key: ("order", "21") is not ("order2", "1").
  EXPECT_EQ(counts.failed("order2", "1"), 1);
  EXPECT_EQ(counts.failed("order", "21"), 1);
  EXPECT_EQ(counts.failed("order", "1"), 3);
}

TEST(TransientFailures, ADeliveryStartsTheKeyAgain) {
  TransientFailures counts;
  counts.failed("order", "1");
  counts.failed("order", "1");
  counts.failed("order", "2");
  counts.delivered("order", "1");
  EXPECT_EQ(counts.failed("order", "1"), 1);
  EXPECT_EQ(counts.failed("order", "2"), 2);
  counts.delivered("order", "unknown");  // nothing to forget
  EXPECT_EQ(counts.size(), 2u);
}

TEST(TransientFailures, MemoryIsBounded) {
  TransientFailures counts;
  for (std::size_t i = 0; i < TransientFailures::kMaxKeys; ++i) {
    counts.failed("k", std::to_string(i));
  }
  EXPECT_EQ(counts.size(), TransientFailures::kMaxKeys);
  EXPECT_EQ(counts.failed("k", "0"), 2);    // known: counted on
  EXPECT_EQ(counts.failed("k", "new"), 1);  // past the bound: the counts start again
  EXPECT_EQ(counts.size(), 1u);
}

}  // namespace
