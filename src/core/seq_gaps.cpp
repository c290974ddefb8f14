#include "core/seq_gaps.hpp"

#include <algorithm>
#include <utility>

namespace outbox {

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
  }
}

// The intersection, at or below upto, of the gaps with `kept` (two sorted lists walked
// together); what lies above upto stays.
void SeqGaps::keep_up_to(int64_t upto, const std::vector<Interval>& kept) {
  std::vector<Interval> out;
  auto push = [&out](int64_t lo, int64_t hi) {
    if (!out.empty() && out.back().hi + 1 >= lo) {
      out.back().hi = std::max(out.back().hi, hi);
    } else {
      out.push_back({lo, hi});
    }
  };
  std::size_t k = 0;
  for (const Interval& gap : intervals_) {
    const int64_t below = std::min(gap.hi, upto);
    while (k < kept.size() && kept[k].hi < gap.lo) ++k;
    for (std::size_t j = k; j < kept.size() && kept[j].lo <= below; ++j) {
      const int64_t lo = std::max(gap.lo, kept[j].lo);
      const int64_t hi = std::min(below, kept[j].hi);
      if (lo <= hi) push(lo, hi);
    }
    if (gap.hi > upto) push(std::max(gap.lo, upto + 1), gap.hi);
  }
  intervals_ = std::move(out);
}

// The closest neighbours merge until at most max_intervals remain.
std::vector<SeqGaps::Interval> SeqGaps::cover(std::size_t max_intervals) const {
  std::vector<Interval> out = intervals_;
  max_intervals = std::max<std::size_t>(1, max_intervals);
  if (out.size() <= max_intervals) return out;
  // The distances between neighbours; merging everything closer than the threshold that
  // leaves at most max_intervals intervals (one pass, not one merge at a time).
  std::vector<int64_t> distances;
  distances.reserve(out.size() - 1);
  for (std::size_t k = 0; k + 1 < out.size(); ++k) distances.push_back(out[k + 1].lo - out[k].hi);
  const std::size_t merges = out.size() - max_intervals;
  std::vector<int64_t> sorted = distances;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(merges - 1),
                   sorted.end());
  const int64_t threshold = sorted[merges - 1];
  // Distances below the threshold all merge; of those equal to it, only as many as needed.
  std::size_t below = 0;
  for (int64_t d : distances) below += d < threshold ? 1 : 0;
  std::size_t equal_left = merges - below;
  std::vector<Interval> merged;
  merged.push_back(out[0]);
  for (std::size_t k = 1; k < out.size(); ++k) {
    const int64_t d = distances[k - 1];
    const bool merge = d < threshold || (d == threshold && equal_left > 0);
    if (d == threshold && merge) --equal_left;
    if (merge) {
      merged.back().hi = out[k].hi;
    } else {
      merged.push_back(out[k]);
    }
  }
  return merged;
}

int64_t SeqGaps::width(const std::vector<Interval>& intervals) {
  int64_t sum = 0;
  for (const Interval& i : intervals) sum += i.hi - i.lo + 1;
  return sum;
}

}  // namespace outbox
