// What the fetches of a relay accounted for above the mark: the resume point, after which
// the next scan of new events continues, and the values it passed over, which become gaps
// once their transaction commits (low_water.cpp says why, docs/design.md proves it). The
// mark hands a fetch its request and accounts for its report; the fetch never calls back.
#include <algorithm>

#include "relay/low_water.hpp"

namespace outbox::pg::relay {

int64 LowWater::fetch_from() const { return std::max<int64>(low_water_, resume_after_seq_ + 1); }

FetchRequest LowWater::request() const {
  FetchRequest request;
  request.from = fetch_from();
  request.owned = ownership_.owned();
  request.late = &late_;
  request.delivered = &delivered_;
  request.scope = &scope_;
  request.sealed_scope = &sealer_.predicate();
  request.scope_version = scope_version();
  return request;
}

void LowWater::account(Fetched& out, FetchReport& report) {
  keep_before_late(out, report);
  fetched(out.rows + report.late_from, report.new_from - report.late_from, report.late_tried);
  scanned(report.others, report.n_others, out.rows + report.new_from, out.count - report.new_from,
          report.upto);
}

// The late events a fetch took (if it looked for them).
void LowWater::fetched(const Row* late_rows, int n_late, bool late_tried) {
  for (int k = 0; k < n_late; ++k) late_fetched_.push_back(late_rows[k].seq);
  if (late_tried) late_.clear();  // what was not taken (no room) is found again
}

// What a scan of new events accounted for from fetch_from() up to `upto`: the events it did
// not copy (sorted) and the ones it copied.
void LowWater::scanned(const int64* others, int n_others, const Row* new_rows, int n_new,
                       int64 upto) {
  int64 last = fetch_from() - 1;
  // The two sorted lists, merged: every value between two accounted ones is passed over.
  int i = 0;
  int k = 0;
  while (i < n_others || k < n_new) {
    const bool take_other = k >= n_new || (i < n_others && others[i] < new_rows[k].seq);
    const int64 seq = take_other ? others[i++] : new_rows[k++].seq;
    if (seq > last + 1) passed_over_.push_back({last + 1, seq - 1});
    last = std::max(last, seq);
  }
  if (upto > last) passed_over_.push_back({last + 1, upto});
  resume_after_seq_ = std::max(resume_after_seq_, std::max(last, upto));
}

void LowWater::transaction_started() {
  passed_over_.clear();
  late_fetched_.clear();
}

// Committed: the late events fetched are resolved, and what the new ones passed over
// becomes gaps.
void LowWater::transaction_resolved() {
  for (const SeqGaps::Interval& gap : passed_over_) gaps_.add(gap.lo, gap.hi);
  for (int64 seq : late_fetched_) gaps_.remove(seq);
}

void LowWater::restart_tracking() {
  resume_after_seq_ = -1;
  delivered_stale_ = true;
  gaps_.clear();
  late_.clear();
}

void LowWater::forget() {
  reread();
  sealer_.reset();
  saved_floor_ = -1;
}

void LowWater::reread() {
  low_water_ = -1;
  horizon_valid_ = false;
}

}  // namespace outbox::pg::relay
