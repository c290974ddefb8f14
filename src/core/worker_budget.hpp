// The cluster's relay slots (outbox.max_workers), shared out among the databases that want
// relays: plain C++, no PostgreSQL (relay/launcher.cpp applies the plan).
#pragma once

#include <cstdint>
#include <vector>

namespace outbox::budget {

// A database and how many relays it wants now (0: none, for example while it is paused).
struct Want {
  std::uint32_t database;
  int wanted;
};

// A slot as the launcher sees it: which database's worker it is for (0: free), and whether
// a relay is in it, or being started, so that it cannot be taken away yet.
struct Slot {
  std::uint32_t database = 0;
  int worker = 0;
  bool busy = false;
};

struct Plan {
  std::vector<Slot> slots;              // the new assignment, busy copied through
  std::vector<std::uint32_t> starved;   // databases that want more relays than they got
  std::vector<std::uint32_t> draining;  // databases with busy slots no longer wanted
};

// Keeps every slot whose database still wants its worker; frees the others, except busy
// ones (kept until their relay has gone; the caller may tell it to go). Then gives the
// free slots out: worker 0 of every database in the order of `wants`, then worker 1, and so
// on, so that every database gets a relay before any gets a second.
Plan plan(const std::vector<Want>& wants, const std::vector<Slot>& slots);

}  // namespace outbox::budget
