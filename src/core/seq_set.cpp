#include "core/seq_set.hpp"

#include <algorithm>

namespace outbox {

void SeqSet::assign(std::vector<Interval> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  intervals_.clear();
  for (const Interval& run : runs) {
    if (!intervals_.empty() && run.lo <= intervals_.back().hi + 1) {
      intervals_.back().hi = std::max(intervals_.back().hi, run.hi);
    } else {
      intervals_.push_back(run);
    }
  }
}

void SeqSet::append_runs(const int64_t* values, int n, std::vector<Interval>& runs) {
  for (int i = 0; i < n; ++i) {
    if (i > 0 && values[i] <= values[i - 1] + 1) {
      runs.back().hi = std::max(runs.back().hi, values[i]);
    } else {
      runs.push_back({values[i], values[i]});
    }
  }
}

bool SeqSet::contains(int64_t value) const noexcept {
  // The first interval that ends at or after the value.
  auto it = std::lower_bound(intervals_.begin(), intervals_.end(), value,
                             [](const Interval& i, int64_t v) { return i.hi < v; });
  return it != intervals_.end() && it->lo <= value;
}

void SeqSet::drop_below(int64_t floor) {
  auto it = std::lower_bound(intervals_.begin(), intervals_.end(), floor,
                             [](const Interval& i, int64_t v) { return i.hi < v; });
  intervals_.erase(intervals_.begin(), it);
  if (!intervals_.empty()) intervals_.front().lo = std::max(intervals_.front().lo, floor);
}

}  // namespace outbox
