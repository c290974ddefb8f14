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
  outbox::SeqGaps gaps;
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
  EXPECT_EQ(outbox::SeqGaps::width(gaps.intervals()), 31);
}

TEST(SeqGaps, RemoveSplits) {
  outbox::SeqGaps gaps;
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

TEST(SeqGaps, KeepUpToIntersectsAndKeepsWhatLiesAbove) {
  outbox::SeqGaps gaps;
  gaps.add(1, 5);
  gaps.add(8, 8);
  gaps.add(10, 20);
  gaps.add(30, 31);
  // A probe up to 15 found events at 3 and 12, and 7 (no gap: resolved); past 13 it does
  // not know (its limit): only what lies in a gap stays.
  gaps.keep_up_to(15, {{3, 3}, {7, 7}, {12, 12}, {13, 40}});
  EXPECT_EQ(show(gaps), "3 12-20 30-31");
  gaps.keep_up_to(40, {});
  EXPECT_TRUE(gaps.empty());
}

TEST(SeqGaps, KeepUpToJoinsAdjacentPieces) {
  outbox::SeqGaps gaps;
  gaps.add(1, 10);
  gaps.keep_up_to(10, {{3, 3}, {4, 4}, {6, 6}});
  EXPECT_EQ(show(gaps), "3-4 6");
}

TEST(SeqGaps, CoverMergesTheClosestButTheGapsStayExact) {
  outbox::SeqGaps gaps;
  gaps.add(1, 1);
  gaps.add(10, 10);
  gaps.add(12, 12);
  gaps.add(30, 30);  // four intervals: 10 and 12 are the closest
  const auto cover = gaps.cover(3);
  ASSERT_EQ(cover.size(), 3u);
  EXPECT_EQ(cover[1].lo, 10);
  EXPECT_EQ(cover[1].hi, 12);
  EXPECT_EQ(outbox::SeqGaps::width(cover), 5);
  EXPECT_EQ(show(gaps), "1 10 12 30");  // 11 was resolved: it never counts as a gap
  EXPECT_EQ(gaps.cover(1).size(), 1u);
  EXPECT_EQ(gaps.cover(1)[0].hi, 30);
  EXPECT_EQ(gaps.cover(8).size(), 4u);
}

TEST(SeqGaps, CoverWithEqualDistancesMergesOnlyAsManyAsNeeded) {
  outbox::SeqGaps gaps;
  for (int64_t v = 0; v < 100; v += 2) gaps.add(v, v);  // 50 intervals, all 2 apart
  const auto cover = gaps.cover(7);
  ASSERT_EQ(cover.size(), 7u);
  EXPECT_EQ(cover.front().lo, 0);
  EXPECT_EQ(cover.back().hi, 98);
  for (std::size_t k = 0; k + 1 < cover.size(); ++k) EXPECT_LT(cover[k].hi, cover[k + 1].lo);
}

}  // namespace
