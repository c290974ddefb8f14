#include "core/scan_tracker.hpp"

#include <algorithm>
#include <utility>

namespace outbox {

void ScanTracker::start_from(int64_t mark) {
  mark_ = mark;
  restart_tracking();
}

int64_t ScanTracker::fetch_from() const noexcept {
  return std::max<int64_t>(mark_, resume_after_seq_ + 1);
}

void ScanTracker::delivered_read(std::vector<SeqSet::Interval> runs) {
  delivered_.assign(std::move(runs));
  delivered_.drop_below(mark_);
  delivered_stale_ = false;
}

void ScanTracker::fetched(const int64_t* late_seqs, int n_late, bool late_tried) {
  for (int k = 0; k < n_late; ++k) late_fetched_.push_back(late_seqs[k]);
  if (late_tried) late_.clear();  // what was not taken (no room) is found again
}

void ScanTracker::scanned(const int64_t* others, int n_others, const int64_t* new_seqs, int n_new,
                          int64_t upto) {
  int64_t last = fetch_from() - 1;
  // The two sorted lists, merged: every value between two accounted ones is passed over.
  int i = 0;
  int k = 0;
  while (i < n_others || k < n_new) {
    const bool take_other = k >= n_new || (i < n_others && others[i] < new_seqs[k]);
    const int64_t seq = take_other ? others[i++] : new_seqs[k++];
    if (seq > last + 1) passed_over_.push_back({last + 1, seq - 1});
    last = std::max(last, seq);
  }
  if (upto > last) passed_over_.push_back({last + 1, upto});
  resume_after_seq_ = std::max(resume_after_seq_, std::max(last, upto));
}

bool ScanTracker::looks_for_late(int n_new) const noexcept {
  return n_new > 0 && !(gaps_.empty() && passed_over_.empty());
}

// A copy only when this transaction passed values over.
const SeqGaps& ScanTracker::late_area(SeqGaps& scratch) const {
  if (passed_over_.empty()) return gaps_;
  scratch = gaps_;
  for (const Interval& gap : passed_over_) scratch.add(gap.lo, gap.hi);
  return scratch;
}

void ScanTracker::found_late(const int64_t* seqs, int count, int64_t limit) {
  late_.assign(seqs, seqs + std::min<int64_t>(count, limit));
}

// The scan resumes before the first new event left out.
ScanTracker::Cut ScanTracker::cut_scan(const int64_t* new_seqs, int kept, const int64_t* others,
                                       int n_others) const {
  Cut cut{kept > 0 ? new_seqs[kept - 1] : fetch_from() - 1, n_others};
  while (cut.n_others > 0 && others[cut.n_others - 1] > cut.upto) --cut.n_others;
  return cut;
}

void ScanTracker::transaction_started() {
  passed_over_.clear();
  late_fetched_.clear();
}

// Committed: the late events fetched are resolved, and what the new ones passed over
// becomes gaps.
void ScanTracker::transaction_resolved() {
  for (const Interval& gap : passed_over_) gaps_.add(gap.lo, gap.hi);
  for (int64_t seq : late_fetched_) gaps_.remove(seq);
}

void ScanTracker::restart_tracking() noexcept {
  resume_after_seq_ = -1;
  delivered_stale_ = true;
  gaps_.clear();
  late_.clear();
}

bool ScanTracker::narrow(const std::vector<Interval>& cover) {
  return SeqGaps::width(cover) <= kEagerProbeMaxWidth;
}

void ScanTracker::probed(const std::vector<Interval>& cover, Found found, int64_t limit,
                         int64_t upto) {
  late_.clear();
  if (gaps_.empty()) return;
  // The rows come by seq: the first `limit` of them are the next fetch's (the rest: next
  // time). (A gap holds values passed over while their transactions ran: no event the log
  // holds. One it did would count as found, but never be fetched.)
  const uint64_t take = std::min<uint64_t>(found.count, static_cast<uint64_t>(limit));
  for (uint64_t r = 0; r < take; ++r) {
    if (!delivered_.contains(found.seqs[r])) late_.push_back(found.seqs[r]);
  }
  if (upto < 0) return;
  // Interval k's finds are the run of rows numbered k + 1. What may still hold an event: the
  // finds, and past the last find of an interval that gave its limit, the rest of it.
  std::vector<Interval> kept;
  uint64_t r = 0;
  const int n = static_cast<int>(cover.size());
  for (int k = 0; k < n && cover[k].lo <= upto; ++k) {
    while (r < found.count && found.index[r] < k + 1) ++r;
    int64_t count = 0;
    for (; r < found.count && found.index[r] == k + 1; ++r, ++count) {
      if (!delivered_.contains(found.seqs[r])) kept.push_back({found.seqs[r], found.seqs[r]});
    }
    if (count >= limit) kept.push_back({found.seqs[r - 1] + 1, cover[k].hi});
  }
  gaps_.keep_up_to(upto, kept);
}

void ScanTracker::move_mark(int64_t tail) {
  int64_t mark = tail;
  if (!gaps_.empty()) mark = std::min(mark, gaps_.first());
  mark_ = std::max(mark_, mark);
  delivered_.drop_below(mark_);
}

}  // namespace outbox
