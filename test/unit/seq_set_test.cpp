#include "core/seq_set.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace {

// The set of `values`, given in ascending pieces of at most `piece` values.
outbox::SeqSet set_of(std::vector<int64_t> values, std::size_t piece = 3) {
  std::vector<outbox::SeqSet::Interval> runs;
  for (std::size_t i = 0; i < values.size(); i += piece) {
    std::vector<int64_t> part(values.begin() + i,
                              values.begin() + std::min(values.size(), i + piece));
    std::sort(part.begin(), part.end());
    outbox::SeqSet::append_runs(part.data(), static_cast<int>(part.size()), runs);
  }
  outbox::SeqSet set;
  set.assign(runs);
  return set;
}

TEST(SeqSet, AssignSortsAndJoinsRuns) {
  const outbox::SeqSet set = set_of({7, 3, 4, 5, 10, 5, 11});
  EXPECT_EQ(set.interval_count(), 3u);  // 3-5 7 10-11
  for (int64_t v : {3, 4, 5, 7, 10, 11}) EXPECT_TRUE(set.contains(v)) << v;
  for (int64_t v : {-1, 2, 6, 8, 9, 12}) EXPECT_FALSE(set.contains(v)) << v;
}

TEST(SeqSet, DropBelowCutsAnInterval) {
  outbox::SeqSet set = set_of({1, 2, 3, 4, 8, 9, 20});
  set.drop_below(3);
  EXPECT_FALSE(set.contains(2));
  EXPECT_TRUE(set.contains(3));
  EXPECT_TRUE(set.contains(9));
  set.drop_below(10);
  EXPECT_EQ(set.interval_count(), 1u);
  EXPECT_TRUE(set.contains(20));
  set.drop_below(21);
  EXPECT_TRUE(set.empty());
}

TEST(SeqSet, NeverHoldsWhatWasNotGiven) {
  std::vector<int64_t> given;
  for (int64_t v = 999; v >= 0; --v) {
    if (v % 3 != 0) given.push_back(v);
  }
  outbox::SeqSet set = set_of(given, 7);
  for (int64_t v = 0; v < 1000; ++v) EXPECT_EQ(set.contains(v), v % 3 != 0) << v;
  set.assign({});
  EXPECT_TRUE(set.empty());
  EXPECT_FALSE(set.contains(0));
}

}  // namespace
