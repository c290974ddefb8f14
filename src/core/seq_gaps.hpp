// The relay's gaps: sequence values below its resume point that none of its fetches
// returned. Each is an event that had not committed yet when the relay passed it, or one
// that never will exist (its transaction aborted). Everything else below the resume point
// the relay has resolved itself, so finding late commits means probing the gaps, not
// walking again over what was just published.
//
// The gaps are kept exactly: a value the relay resolved must never count as a gap, since a
// probe cannot tell an event it sent (delivery writes no event row) from one to send. A
// probe reads a bounded cover of them (cover()) and keeps only what lies in a gap.
//
// Plain C++, unit-tested without a server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace outbox {

class SeqGaps {
 public:
  struct Interval {
    int64_t lo;
    int64_t hi;  // inclusive
  };

  // Adds [lo, hi] (nothing if lo > hi), joining the intervals it touches or overlaps.
  void add(int64_t lo, int64_t hi);
  // Takes one value out (it was resolved), splitting its interval.
  void remove(int64_t value);
  // At or below `upto`, keeps only what also lies in `kept` (sorted; above upto ignored):
  // after a probe has shown which of those values can still hold an event.
  void keep_up_to(int64_t upto, const std::vector<Interval>& kept);
  void clear() { intervals_.clear(); }

  bool empty() const { return intervals_.empty(); }
  int64_t first() const { return intervals_.front().lo; }
  const std::vector<Interval>& intervals() const { return intervals_; }

  // At most max_intervals intervals covering every gap: the closest ones merge, so a cover
  // may also span resolved values (a query over it must keep only what is in a gap).
  std::vector<Interval> cover(std::size_t max_intervals) const;
  // How many values `intervals` span.
  static int64_t width(const std::vector<Interval>& intervals);

 private:
  std::vector<Interval> intervals_;  // sorted, disjoint, not adjacent
};

}  // namespace outbox
