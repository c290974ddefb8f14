#include "core/histogram.hpp"

#include <gtest/gtest.h>

namespace outbox::histogram {
namespace {

TEST(Histogram, BucketIsTheFirstBoundAtOrAbove) {
  const double* b = kSecondsBounds.data();
  const int n = static_cast<int>(kSecondsBounds.size());
  EXPECT_EQ(bucket_of(b, n, 0), 0);
  EXPECT_EQ(bucket_of(b, n, 0.00005), 0);  // le is inclusive
  EXPECT_EQ(bucket_of(b, n, 0.00006), 1);
  EXPECT_EQ(bucket_of(b, n, 1), 13);
  EXPECT_EQ(bucket_of(b, n, 60), 18);
  EXPECT_EQ(bucket_of(b, n, 61), n);  // +Inf
  EXPECT_EQ(bucket_of(b, n, -1), 0);  // a clock that stepped back
}

TEST(Histogram, BoundsAscend) {
  for (size_t i = 1; i < kSecondsBounds.size(); ++i) {
    EXPECT_LT(kSecondsBounds[i - 1], kSecondsBounds[i]);
  }
  for (size_t i = 1; i < kSizeBounds.size(); ++i) EXPECT_LT(kSizeBounds[i - 1], kSizeBounds[i]);
}

TEST(Histogram, TallyCountsAndSums) {
  Seconds t;
  t.add(kSecondsBounds, 0.002, kMicros);
  t.add(kSecondsBounds, 0.002, kMicros);
  t.add(kSecondsBounds, 100, kMicros);
  t.add(kSecondsBounds, -0.5, kMicros);  // counted, adds nothing to the sum
  EXPECT_EQ(t.count(), 4u);
  EXPECT_EQ(t.counts[5], 2u);  // 0.0025
  EXPECT_EQ(t.counts[Seconds::kBuckets - 1], 1u);
  EXPECT_EQ(t.counts[0], 1u);
  EXPECT_EQ(t.sum, 100004000u);
  Sizes s;
  s.add(kSizeBounds, 1000, kUnits);
  EXPECT_EQ(s.counts[9], 1u);
  EXPECT_EQ(s.sum, 1000u);
}

}  // namespace
}  // namespace outbox::histogram
