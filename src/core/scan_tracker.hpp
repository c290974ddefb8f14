// The scan tracker: what a relay's fetches accounted for above its low-water mark, and so how
// far the mark may move (docs/design.md, "The low-water mark", gives the proof). It takes seq
// values and horizons, not rows: relay/low_water.cpp runs the queries and hands it what they
// read.
//
// Below the resume point, every event from the mark up is resolved by this relay (published,
// dead-lettered or waiting for a retry, in transactions that committed), except in the gaps:
// the values a scan passed over, an event that had not committed yet or one that never will.
// The open transaction's share counts once it commits: the values its scans passed over, and
// the late events it took. A failure forgets all of it, and the next scan starts from the
// mark again (restart_tracking()).
//
// Plain C++, unit-tested without a server (test/unit/scan_tracker_test.cpp, with a model of
// writers, the sequence and snapshots in scan_tracker_model_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/seq_gaps.hpp"
#include "core/seq_set.hpp"

namespace outbox {

class ScanTracker {
 public:
  using Interval = SeqGaps::Interval;
  // A probe reads every partition's index once per interval of its cover: more gaps than
  // this are read over merged intervals (a wider read).
  static constexpr std::size_t kMaxProbeIntervals = 64;
  // While the mark is held, gaps of at most this many values in all are probed at every
  // check, wider ones every poll_interval (a probe reads every row its gaps cover).
  static constexpr int64_t kEagerProbeMaxWidth = 256;

  // The mark: every event of the owned shards below it is resolved; -1 until it is read.
  int64_t mark() const noexcept { return mark_; }
  bool mark_known() const noexcept { return mark_ >= 0; }
  // The saved mark was read (a start, gained shards, the extension came back): tracking
  // starts again from it.
  void start_from(int64_t mark);
  // The mark is to be read again.
  void forget_mark() noexcept { mark_ = -1; }
  // The sequence went back below the mark (a reset): the mark goes to 0. Tracking must
  // restart (restart_tracking()) once the reset is handled.
  bool sequence_went_back(int64_t last) const noexcept { return last < mark_ - 1; }
  void sequence_reset() noexcept { mark_ = 0; }

  // Where the next scan of new events starts: after the resume point, at least the mark.
  int64_t fetch_from() const noexcept;
  // Late events a probe or a look found, for the next fetch (taken first).
  const std::vector<int64_t>& late() const noexcept { return late_; }
  const SeqGaps& gaps() const noexcept { return gaps_; }

  // The delivery log from the mark up: read again when tracking restarted (stale), passed
  // over by the scans that start from the mark.
  const SeqSet& delivered() const noexcept { return delivered_; }
  bool delivered_stale() const noexcept { return delivered_stale_; }
  void delivered_read(std::vector<SeqSet::Interval> runs);

  // A fetch's accounting. fetched(): the late events it took (late_tried: it looked for
  // them; what it did not take for lack of room is found again). scanned(): what its scan of
  // new events accounted for from fetch_from() up to `upto`: the events it did not copy
  // (others, sorted) and the ones it copied (sorted); every value between is passed over.
  void fetched(const int64_t* late_seqs, int n_late, bool late_tried);
  void scanned(const int64_t* others, int n_others, const int64_t* new_seqs, int n_new,
               int64_t upto);

  // Late keys (relay/late_keys.cpp). Whether a fetch that copied n_new new events looks for
  // late commits in the gaps and in what this transaction passed over; where it looks
  // (`scratch` holds the union when there is one); which late events this transaction took.
  bool looks_for_late(int n_new) const noexcept;
  const SeqGaps& late_area(SeqGaps& scratch) const;
  const std::vector<int64_t>& late_fetched() const noexcept { return late_fetched_; }
  // The look found these late events (by seq): the next fetch takes the first `limit`.
  void found_late(const int64_t* seqs, int count, int64_t limit);
  // The scan's new events are cut after the first `kept` (a late event of their key goes
  // first): up to where the scan still accounts for everything, and how many of its others
  // lie at or below that.
  struct Cut {
    int64_t upto;
    int n_others;
  };
  Cut cut_scan(const int64_t* new_seqs, int kept, const int64_t* others, int n_others) const;

  // Around a batch transaction: its share counts once it commits with every batch resolved
  // (transaction_resolved()); otherwise tracking restarts.
  void transaction_started();
  void transaction_resolved();
  // The next scan starts from the mark, and nothing above it is known resolved.
  void restart_tracking() noexcept;

  // The cover a probe of the gaps reads, and whether it is narrow enough to probe at every
  // check.
  std::vector<Interval> probe_cover() const { return gaps_.cover(kMaxProbeIntervals); }
  static bool narrow(const std::vector<Interval>& cover);
  // What a probe over `cover` found: the waiting events in the gaps, by interval (index[r]:
  // 1 + its interval in cover) and by seq, at most `limit` per interval. The first `limit`
  // are the next fetch's late events. With upto >= 0 (the horizon passed C = upto, and the
  // probe's snapshot sees every event <= C that will ever exist), a gap up to C that holds
  // nothing now never will, and is dropped.
  struct Found {
    const int64_t* index;
    const int64_t* seqs;
    uint64_t count;
  };
  void probed(const std::vector<Interval>& cover, Found found, int64_t limit, int64_t upto);
  // The horizon passed and the gaps up to it were probed: the mark moves up to `tail` (the
  // first event to send from fetch_from() up to C, or C + 1), but not past the first gap,
  // and never down.
  void move_mark(int64_t tail);

 private:
  int64_t mark_ = -1;
  int64_t resume_after_seq_ = -1;
  SeqGaps gaps_;
  std::vector<Interval> passed_over_;
  std::vector<int64_t> late_fetched_;
  std::vector<int64_t> late_;
  SeqSet delivered_;
  bool delivered_stale_ = true;
};

}  // namespace outbox
