#include "core/seq_gaps.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

std::string show(const outbox::SeqGaps& gaps) {
  std::string out;
  for (const auto& i : gaps.intervals()) {
    if (!out.empty()) out += ' ';
    out += std::to_string(i.lo);
    if (i.hi != i.lo) out += "-" + std::to_string(i.hi);
  }
  return out;
}

TEST(SeqGaps, AddJoinsTouchingAndOverlappingIntervals) {
  outbox::SeqGaps gaps(16);
  gaps.add(10, 12);
  gaps.add(20, 20);
  gaps.add(5, 3);  // empty
  EXPECT_EQ(show(gaps), "10-12 20");
  gaps.add(13, 14);  // touches 10-12
  EXPECT_EQ(show(gaps), "10-14 20");
  gaps.add(1, 2);
  gaps.add(15, 19);  // bridges 10-14 and 20
  EXPECT_EQ(show(gaps), "1-2 10-20");
  gaps.add(0, 30);
  EXPECT_EQ(show(gaps), "0-30");
  EXPECT_EQ(gaps.first(), 0);
  EXPECT_EQ(gaps.width(), 31);
}

TEST(SeqGaps, RemoveSplits) {
  outbox::SeqGaps gaps(16);
  gaps.add(10, 14);
  gaps.add(20, 20);
  gaps.remove(12);
  EXPECT_EQ(show(gaps), "10-11 13-14 20");
  gaps.remove(10);
  gaps.remove(14);
  gaps.remove(20);
  gaps.remove(99);  // not a gap
  EXPECT_EQ(show(gaps), "11 13");
  gaps.remove(11);
  gaps.remove(13);
  EXPECT_TRUE(gaps.empty());
}

TEST(SeqGaps, ReplaceUpToKeepsWhatLiesAbove) {
  outbox::SeqGaps gaps(16);
  gaps.add(1, 5);
  gaps.add(8, 8);
  gaps.add(10, 20);
  gaps.add(30, 31);
  // A probe up to 15 found events at 3 and 12 only: the rest up to 15 holds nothing.
  gaps.replace_up_to(15, {{3, 3}, {12, 12}});
  EXPECT_EQ(show(gaps), "3 12 16-20 30-31");
  gaps.replace_up_to(40, {});
  EXPECT_TRUE(gaps.empty());
}

TEST(SeqGaps, TooManyIntervalsMergeTheClosestPair) {
  outbox::SeqGaps gaps(3);
  gaps.add(1, 1);
  gaps.add(10, 10);
  gaps.add(12, 12);
  gaps.add(30, 30);  // four intervals: 10 and 12 are the closest
  EXPECT_EQ(show(gaps), "1 10-12 30");
  gaps.remove(11);  // the split would make four again: it merges back (a wider gap is safe)
  EXPECT_EQ(show(gaps), "1 10-12 30");
}

}  // namespace
