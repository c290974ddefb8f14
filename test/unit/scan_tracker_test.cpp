// The cases docs/design.md's proof of the low-water mark names, on the scan tracker alone.
#include "core/scan_tracker.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using outbox::ScanTracker;

std::string show(const outbox::SeqGaps& gaps) {
  std::string out;
  for (const auto& i : gaps.intervals()) {
    if (!out.empty()) out += ' ';
    out += std::to_string(i.lo);
    if (i.hi != i.lo) out += "-" + std::to_string(i.hi);
  }
  return out;
}

// One committed batch transaction whose scan copied `taken` and passed `others` up to `upto`.
void batch(ScanTracker& t, std::vector<int64_t> taken, std::vector<int64_t> others, int64_t upto) {
  t.transaction_started();
  t.scanned(others.data(), static_cast<int>(others.size()), taken.data(),
            static_cast<int>(taken.size()), upto);
  t.transaction_resolved();
}

// A probe after the horizon passed C = upto that found `seqs` (all in the first interval).
void probe(ScanTracker& t, std::vector<int64_t> seqs, int64_t upto) {
  const auto cover = t.probe_cover();
  std::vector<int64_t> index;
  for (int64_t s : seqs) {
    int64_t k = 1;
    while (cover[k - 1].hi < s) ++k;
    index.push_back(k);
  }
  t.probed(cover, {index.data(), seqs.data(), seqs.size()}, 100, upto);
}

TEST(ScanTracker, LateCommitBelowTheResumePoint) {
  ScanTracker t;
  t.start_from(1);
  t.delivered_read({});
  batch(t, {1, 2, 4, 5}, {}, 5);  // 3 was not committed yet
  EXPECT_EQ(t.fetch_from(), 6);
  EXPECT_EQ(show(t.gaps()), "3");
  // 3 commits; the horizon passes C = 5: the probe finds it, the mark stays at it.
  probe(t, {3}, 5);
  EXPECT_EQ(t.late(), std::vector<int64_t>{3});
  t.move_mark(6);
  EXPECT_EQ(t.mark(), 3);
  // The next fetch takes it; once that commits, the mark may pass it.
  t.transaction_started();
  const int64_t late = 3;
  t.fetched(&late, 1, true);
  t.scanned(nullptr, 0, nullptr, 0, 5);
  EXPECT_EQ(show(t.gaps()), "3");  // not before the commit
  t.transaction_resolved();
  EXPECT_TRUE(t.gaps().empty());
  EXPECT_TRUE(t.late().empty());
  t.move_mark(6);
  EXPECT_EQ(t.mark(), 6);
}

TEST(ScanTracker, RollbackGapIsDroppedOncePassed) {
  ScanTracker t;
  t.start_from(1);
  batch(t, {1, 3}, {}, 3);  // 2 rolled back
  EXPECT_EQ(show(t.gaps()), "2");
  probe(t, {}, 3);  // nothing there now: never will be
  EXPECT_TRUE(t.gaps().empty());
  t.move_mark(4);
  EXPECT_EQ(t.mark(), 4);
}

TEST(ScanTracker, HorizonPassingAGapKeepsWhatLiesAbove) {
  ScanTracker t;
  t.start_from(1);
  batch(t, {1, 5}, {}, 9);  // 2-4 and 6-9 passed over
  EXPECT_EQ(show(t.gaps()), "2-4 6-9");
  // The horizon passed C = 7 only: 6-7 and 2-4 held nothing; 8-9 may still.
  probe(t, {}, 7);
  EXPECT_EQ(show(t.gaps()), "8-9");
  t.move_mark(8);
  EXPECT_EQ(t.mark(), 8);
  // The mark never passes the first gap, and never moves down.
  t.move_mark(20);
  EXPECT_EQ(t.mark(), 8);
  t.move_mark(2);
  EXPECT_EQ(t.mark(), 8);
}

TEST(ScanTracker, GapStaysOpenAcrossRestarts) {
  ScanTracker t;
  t.start_from(1);
  batch(t, {1, 3}, {}, 3);  // 2 is a running transaction's
  // A failure: tracking restarts from the mark, the gap with it; the scan passes 2 again.
  t.restart_tracking();
  EXPECT_TRUE(t.gaps().empty());
  EXPECT_TRUE(t.delivered_stale());
  EXPECT_EQ(t.fetch_from(), 1);
  t.delivered_read({{1, 1}, {3, 3}});
  batch(t, {}, {1, 3}, 3);  // the log's events are accounted for, 2 is again a gap
  EXPECT_EQ(show(t.gaps()), "2");
  probe(t, {2}, 3);  // committed meanwhile
  t.move_mark(4);
  EXPECT_EQ(t.mark(), 2);
}

TEST(ScanTracker, FailedTransactionsShareIsForgotten) {
  ScanTracker t;
  t.start_from(1);
  t.transaction_started();
  const int64_t taken[] = {1, 2};
  t.scanned(nullptr, 0, taken, 2, 5);  // 3-5 passed over
  t.restart_tracking();                // the batch failed
  EXPECT_EQ(t.fetch_from(), 1);
  t.transaction_started();
  t.transaction_resolved();
  EXPECT_TRUE(t.gaps().empty());
}

TEST(ScanTracker, TwoWorkersInterleavedBatches) {
  // Odd seqs are worker A's, even ones B's: each accounts for the other's as others.
  ScanTracker a;
  ScanTracker b;
  a.start_from(1);
  b.start_from(1);
  batch(a, {1, 3}, {2, 4}, 4);
  batch(b, {2}, {1, 3}, 4);  // 4 not visible to B's snapshot yet
  batch(a, {5, 9}, {6, 8}, 9);
  EXPECT_EQ(show(a.gaps()), "7");
  EXPECT_EQ(show(b.gaps()), "4");
  probe(a, {}, 9);
  a.move_mark(10);
  EXPECT_EQ(a.mark(), 10);
  probe(b, {4}, 9);
  b.move_mark(5);
  EXPECT_EQ(b.mark(), 4);
}

TEST(ScanTracker, RestartFromSavedMark) {
  ScanTracker t;
  t.start_from(40);  // the least saved mark of the owned shards
  EXPECT_EQ(t.fetch_from(), 40);
  t.delivered_read({{10, 45}, {50, 50}});  // the log from the mark up
  EXPECT_FALSE(t.delivered().contains(39));
  EXPECT_TRUE(t.delivered().contains(45));
  batch(t, {46}, {40, 41, 42, 43, 44, 45, 50}, 50);
  EXPECT_EQ(show(t.gaps()), "47-49");
  t.forget_mark();
  EXPECT_FALSE(t.mark_known());
}

TEST(ScanTracker, CutBeforeALateKey) {
  ScanTracker t;
  t.start_from(1);
  batch(t, {1}, {}, 3);  // 2-3 gaps
  ASSERT_TRUE(t.looks_for_late(2));
  const int64_t found[] = {2};
  t.found_late(found, 1, 10);
  EXPECT_EQ(t.late(), std::vector<int64_t>{2});
  const int64_t news[] = {5, 8};
  const int64_t others[] = {4, 6, 7};
  const ScanTracker::Cut cut = t.cut_scan(news, 1, others, 3);
  EXPECT_EQ(cut.upto, 5);
  EXPECT_EQ(cut.n_others, 1);
  EXPECT_EQ(t.cut_scan(news, 0, others, 3).upto, 3);
  EXPECT_EQ(t.cut_scan(news, 0, others, 3).n_others, 0);
}

TEST(ScanTracker, SequenceReset) {
  ScanTracker t;
  t.start_from(100);
  EXPECT_FALSE(t.sequence_went_back(99));
  EXPECT_TRUE(t.sequence_went_back(50));
  t.sequence_reset();
  EXPECT_EQ(t.mark(), 0);
}

}  // namespace
