// A model test of the scan tracker: writers begin, draw seqs (their xid first), commit or roll
// back in random interleavings; relays scan what their snapshots see, read the horizon as
// low_water.cpp does (C from the sequence, then the next xid N; passed once no writer with an
// xid below N runs), probe the gaps, cut before late keys, fail, restart from saved marks.
// The mark must never pass a committed event that was not delivered, no event is delivered
// twice, and at the end every committed event was delivered. Fixed seeds: deterministic.
#include "core/scan_tracker.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace {

using outbox::ScanTracker;
constexpr int kShards = 4;
constexpr int kWriters = 3;
constexpr int kLimit = 3;  // batch_size

struct Event {
  bool committed = false;
  long commit_time = 0;
  int shard = 0;
};

struct Relay {
  ScanTracker t;
  int owned_count = 0;
  unsigned owned = 0;
  bool horizon_valid = false;
  int64_t c = 0, n = 0;
};

struct World {
  std::mt19937 rng;
  std::vector<Event> events{Event{}};  // seq 0 unused
  struct Writer {
    long xid = 0;  // 0: no transaction
    std::vector<int64_t> seqs;
  } writers[kWriters];
  long clock = 1, next_xid = 1;
  std::set<int64_t> log;
  int64_t saved[kShards] = {};
  std::vector<Relay> relays;
  bool failures = true;

  explicit World(unsigned seed, int n_relays) : rng(seed), relays(n_relays) {
    for (int r = 0; r < n_relays; ++r) {
      for (int s = r; s < kShards; s += n_relays) relays[r].owned |= 1u << s;
      relays[r].owned_count = kShards / n_relays;
    }
  }
  int pick(int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); }
  bool visible(int64_t s, long snap) const {
    return events[s].committed && events[s].commit_time <= snap;
  }
  bool own(const Relay& r, int64_t s) const { return (r.owned >> events[s].shard) & 1u; }

  void writer_step() {
    Writer& w = writers[pick(kWriters)];
    const int a = pick(4);
    if (w.xid == 0) {
      if (a < 2) w.xid = next_xid++;  // the xid before the first seq
      return;
    }
    if (a < 2 || w.seqs.empty()) {
      Event e;
      e.shard = pick(kShards);
      events.push_back(e);
      w.seqs.push_back(static_cast<int64_t>(events.size()) - 1);
      return;
    }
    const bool commit = a == 2;
    ++clock;
    for (int64_t s : w.seqs) {
      events[s].committed = commit;
      events[s].commit_time = clock;
    }
    w = Writer{};
  }
  void churn() {
    if (!failures) return;  // the end: no writer runs
    for (int k = pick(3); k > 0; --k) writer_step();
  }
  int64_t last_seq() const { return static_cast<int64_t>(events.size()) - 1; }

  void probe(Relay& r, int64_t upto) {
    churn();
    const long snap = clock;
    const auto cover = r.t.probe_cover();
    std::vector<int64_t> index, seqs;
    for (std::size_t k = 0; k < cover.size(); ++k) {
      int found = 0;
      for (int64_t s = std::max<int64_t>(1, cover[k].lo);
           s <= std::min(cover[k].hi, last_seq()) && found < kLimit; ++s) {
        if (!in_gaps(r, s) || !visible(s, snap) || !own(r, s)) continue;
        index.push_back(static_cast<int64_t>(k) + 1);
        seqs.push_back(s);
        ++found;
      }
    }
    r.t.probed(cover, {index.data(), seqs.data(), seqs.size()}, kLimit, upto);
  }
  static bool in(const outbox::SeqGaps& g, int64_t s) {
    for (const auto& i : g.intervals()) {
      if (i.lo <= s && s <= i.hi) return true;
    }
    return false;
  }
  bool in_gaps(const Relay& r, int64_t s) const { return in(r.t.gaps(), s); }

  void read_horizon(Relay& r) {
    r.c = last_seq();
    churn();
    r.n = next_xid;
    r.horizon_valid = true;
  }
  // LowWater::move(), over the model.
  void move(Relay& r) {
    if (r.horizon_valid && pick(4) == 0) return;  // the check is not due
    if (r.horizon_valid) {
      churn();
      const long snap = clock;
      bool passed = true;
      for (const Writer& w : writers) passed = passed && (w.xid == 0 || w.xid >= r.n);
      if (!passed) {
        if (pick(2) == 0) probe(r, -1);
        return;
      }
      int64_t tail = r.c + 1;
      for (int64_t s = r.t.fetch_from(); s <= r.c; ++s) {
        if (visible(s, snap) && own(r, s)) {
          tail = s;
          break;
        }
      }
      probe(r, r.c);
      r.t.move_mark(tail);
      r.horizon_valid = false;
    } else if (pick(2) == 0) {
      probe(r, -1);
    }
    read_horizon(r);
  }
  // One fetch (queue.cpp and LowWater::account()); returns whether it came full.
  bool fetch(Relay& r, std::vector<int64_t>& handed) {
    churn();
    const long snap = clock;
    std::vector<int64_t> late, news, others;
    bool late_tried = false;
    if (!r.t.late().empty()) {
      late_tried = true;
      for (int64_t s : r.t.late()) {
        if (visible(s, snap) && own(r, s) && static_cast<int>(late.size()) < kLimit) {
          late.push_back(s);
        }
      }
    }
    const int room = kLimit - static_cast<int>(late.size());
    const int64_t scan_limit = static_cast<int64_t>(room) * kShards / r.owned_count;
    int64_t upto = r.t.fetch_from() - 1, scanned = 0;
    for (int64_t s = r.t.fetch_from(); s <= last_seq() && room > 0; ++s) {
      if (!visible(s, snap)) continue;
      ++scanned;
      upto = s;
      if (!own(r, s) || r.t.delivered().contains(s)) {
        others.push_back(s);
      } else {
        news.push_back(s);
      }
      if (static_cast<int>(news.size()) == room || scanned == scan_limit) break;
    }
    bool full = static_cast<int>(news.size()) == room || (room > 0 && scanned == scan_limit);
    int n_others = static_cast<int>(others.size());
    int n_new = static_cast<int>(news.size());
    if (r.t.looks_for_late(n_new) && pick(2) == 0) {
      churn();  // the look's snapshot, after the fetch's; a late event cuts from a random place
      outbox::SeqGaps scratch;
      const outbox::SeqGaps& area = r.t.late_area(scratch);
      std::vector<int64_t> found;
      const auto& taken = r.t.late_fetched();
      for (int64_t s = 1; s <= last_seq(); ++s) {
        if (in(area, s) && visible(s, clock) && own(r, s) &&
            std::find(taken.begin(), taken.end(), s) == taken.end()) {
          found.push_back(s);
        }
      }
      if (!found.empty()) {
        r.t.found_late(found.data(), static_cast<int>(found.size()), kLimit);
        const int kept = pick(n_new + 1);
        if (kept < n_new) {
          const ScanTracker::Cut cut = r.t.cut_scan(news.data(), kept, others.data(), n_others);
          upto = cut.upto;
          n_others = cut.n_others;
          n_new = kept;
          full = true;
        }
      }
    }
    r.t.fetched(late.data(), static_cast<int>(late.size()), late_tried);
    r.t.scanned(others.data(), n_others, news.data(), n_new, upto);
    handed.insert(handed.end(), late.begin(), late.end());
    handed.insert(handed.end(), news.begin(), news.begin() + n_new);
    return full;
  }
  void transaction(Relay& r) {
    r.t.transaction_started();
    if (!r.t.mark_known()) {
      int64_t least = -1;
      for (int s = 0; s < kShards; ++s) {
        if (((r.owned >> s) & 1u) && (least < 0 || saved[s] < least)) least = saved[s];
      }
      r.t.start_from(least);
    }
    move(r);
    if (r.t.delivered_stale()) {
      std::vector<outbox::SeqSet::Interval> runs;
      for (int64_t s : log) runs.push_back({s, s});
      r.t.delivered_read(runs);
    }
    std::vector<int64_t> handed;
    for (int k = 0; k < 3 && fetch(r, handed); ++k) {
    }
    for (int64_t s : handed) ASSERT_TRUE(events[s].committed) << "uncommitted seq " << s;
    const int outcome = failures ? pick(10) : 9;
    if (outcome == 0) {  // aborted: nothing delivered
      r.t.restart_tracking();
      return;
    }
    for (int64_t s : handed) {
      if (outcome == 1 && pick(2) == 0) continue;  // not acknowledged
      ASSERT_TRUE(log.insert(s).second) << "seq " << s << " delivered twice";
    }
    if (pick(2) == 0) {
      for (int s = 0; s < kShards; ++s) {
        if ((r.owned >> s) & 1u) saved[s] = r.t.mark();
      }
    }
    if (outcome == 1) {
      r.t.restart_tracking();
    } else {
      r.t.transaction_resolved();
    }
  }
  void check() {
    for (const Relay& r : relays) {
      for (int64_t s : r.t.late()) ASSERT_TRUE(events[s].committed) << "late " << s;
      for (int64_t s = 1; s < std::min(r.t.mark(), last_seq() + 1); ++s) {
        if (events[s].committed && own(r, s)) {
          ASSERT_TRUE(log.count(s)) << "mark " << r.t.mark() << " passed undelivered " << s;
        }
      }
    }
    for (int64_t s = 1; s <= last_seq(); ++s) {
      if (events[s].committed && s < saved[events[s].shard]) {
        ASSERT_TRUE(log.count(s)) << "saved mark passed undelivered " << s;
      }
    }
  }
};

void run(unsigned seed, int n_relays) {
  World w(seed, n_relays);
  for (int step = 0; step < 300; ++step) {
    const int a = w.pick(10);
    if (a < 6) {
      w.writer_step();
    } else if (a == 6) {
      Relay& r = w.relays[w.pick(n_relays)];
      const unsigned owned = r.owned;
      const int count = r.owned_count;
      r = Relay{};  // a relay restarts: from the saved marks
      r.owned = owned;
      r.owned_count = count;
    } else {
      w.transaction(w.relays[w.pick(n_relays)]);
    }
    w.check();
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (auto& writer : w.writers) {  // every writer ends
    ++w.clock;
    const bool commit = w.pick(2) == 0;
    for (int64_t s : writer.seqs) {
      w.events[s].committed = commit;
      w.events[s].commit_time = w.clock;
    }
    writer = World::Writer{};
  }
  w.failures = false;
  for (int pass = 0; pass < 100; ++pass) {
    for (Relay& r : w.relays) w.transaction(r);
    w.check();
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (int64_t s = 1; s <= w.last_seq(); ++s) {
    if (w.events[s].committed) {
      ASSERT_TRUE(w.log.count(s)) << "never delivered " << s;
    }
  }
}

TEST(ScanTrackerModel, OneRelay) {
  for (unsigned seed = 1; seed <= 1000; ++seed) {
    SCOPED_TRACE(seed);
    run(seed, 1);
    if (HasFatalFailure()) return;
  }
}

TEST(ScanTrackerModel, TwoRelays) {
  for (unsigned seed = 1; seed <= 1000; ++seed) {
    SCOPED_TRACE(seed);
    run(seed, 2);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
