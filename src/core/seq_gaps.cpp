#include "core/seq_gaps.hpp"

#include <algorithm>
#include <limits>

namespace outbox {

SeqGaps::SeqGaps(std::size_t max_intervals)
    : max_intervals_(std::max<std::size_t>(1, max_intervals)) {}

void SeqGaps::add(int64_t lo, int64_t hi) {
  if (lo > hi) return;
  // The first interval that ends at or after lo - 1 (it may touch or overlap [lo, hi]).
  auto first = std::lower_bound(intervals_.begin(), intervals_.end(), lo,
                                [](const Interval& i, int64_t v) { return i.hi < v - 1; });
  auto last = first;
  while (last != intervals_.end() && last->lo <= hi + 1) {
    lo = std::min(lo, last->lo);
    hi = std::max(hi, last->hi);
    ++last;
  }
  first = intervals_.erase(first, last);
  intervals_.insert(first, Interval{lo, hi});
  fit();
}

void SeqGaps::remove(int64_t value) {
  auto it = std::lower_bound(intervals_.begin(), intervals_.end(), value,
                             [](const Interval& i, int64_t v) { return i.hi < v; });
  if (it == intervals_.end() || it->lo > value) return;
  if (it->lo == value && it->hi == value) {
    intervals_.erase(it);
  } else if (it->lo == value) {
    it->lo = value + 1;
  } else if (it->hi == value) {
    it->hi = value - 1;
  } else {
    const Interval upper{value + 1, it->hi};
    it->hi = value - 1;
    intervals_.insert(it + 1, upper);
    fit();
  }
}

void SeqGaps::replace_up_to(int64_t upto, const std::vector<Interval>& kept) {
  std::vector<Interval> above;
  for (const Interval& i : intervals_) {
    if (i.hi > upto) above.push_back({std::max(i.lo, upto + 1), i.hi});
  }
  intervals_.clear();
  for (const Interval& i : kept) add(i.lo, std::min(i.hi, upto));
  for (const Interval& i : above) add(i.lo, i.hi);
}

int64_t SeqGaps::width() const {
  int64_t sum = 0;
  for (const Interval& i : intervals_) sum += i.hi - i.lo + 1;
  return sum;
}

// Merges the two intervals with the smallest distance between them until few enough remain.
void SeqGaps::fit() {
  while (intervals_.size() > max_intervals_) {
    std::size_t best = 0;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    for (std::size_t k = 0; k + 1 < intervals_.size(); ++k) {
      const int64_t gap = intervals_[k + 1].lo - intervals_[k].hi;
      if (gap < best_gap) {
        best_gap = gap;
        best = k;
      }
    }
    intervals_[best].hi = intervals_[best + 1].hi;
    intervals_.erase(intervals_.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

}  // namespace outbox
