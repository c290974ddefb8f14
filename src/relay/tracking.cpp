// A fetch and the mark meet here: the mark hands a fetch its request and accounts for its
// report; the fetch never calls back. What the report means for the resume point and the
// gaps, the scan tracker decides (core/scan_tracker.hpp; low_water.cpp says why,
// docs/design.md proves it).
#include "relay/low_water.hpp"

namespace outbox::pg::relay {

FetchRequest LowWater::request() const {
  FetchRequest request;
  request.from = tracker_.fetch_from();
  request.owned = ownership_.owned();
  request.late = &tracker_.late();
  request.delivered = &tracker_.delivered();
  request.scope = &scope_;
  request.sealed_scope = &sealer_.predicate();
  request.scope_versions = scope_versions();
  return request;
}

// The seqs of the late and new rows, then the cut before a late event's key, then the late
// events taken and what the scan of new events accounted for.
void LowWater::account(Fetched& out, FetchReport& report) {
  seqs_.clear();
  for (int i = report.late_from; i < out.count; ++i) seqs_.push_back(out.rows[i].seq);
  const int n_late = report.new_from - report.late_from;
  keep_before_late(out, report, seqs_.data() + n_late);
  tracker_.fetched(seqs_.data(), n_late, report.late_tried);
  tracker_.scanned(report.others, report.n_others, seqs_.data() + n_late,
                   out.count - report.new_from, report.upto);
}

void LowWater::forget() {
  reread();
  saved_floor_ = -1;
}

void LowWater::reread() {
  tracker_.forget_mark();
  horizon_valid_ = false;
}

}  // namespace outbox::pg::relay
