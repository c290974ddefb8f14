#include "core/worker_budget.hpp"

#include <gtest/gtest.h>

#include <map>

namespace {

using namespace outbox::budget;

// database => how many slots it holds.
std::map<std::uint32_t, int> held(const Plan& p) {
  std::map<std::uint32_t, int> out;
  for (const Slot& s : p.slots) {
    if (s.database != 0) ++out[s.database];
  }
  return out;
}

TEST(WorkerBudget, EveryDatabaseGetsOneBeforeAnyGetsASecond) {
  const Plan p = plan({{10, 2}, {20, 2}, {30, 2}}, std::vector<Slot>(4));
  EXPECT_EQ(held(p), (std::map<std::uint32_t, int>{{10, 2}, {20, 1}, {30, 1}}));
  EXPECT_EQ(p.starved, (std::vector<std::uint32_t>{20, 30}));
  EXPECT_TRUE(p.draining.empty());
  // Each database's workers are numbered from 0, once each.
  for (std::uint32_t db : {10u, 20u, 30u}) {
    bool zero = false;
    for (const Slot& s : p.slots) zero = zero || (s.database == db && s.worker == 0);
    EXPECT_TRUE(zero) << db;
  }
}

TEST(WorkerBudget, PastTheCapWholeDatabasesWait) {
  const Plan p = plan({{10, 1}, {20, 1}, {30, 1}}, std::vector<Slot>(2));
  EXPECT_EQ(held(p), (std::map<std::uint32_t, int>{{10, 1}, {20, 1}}));
  EXPECT_EQ(p.starved, (std::vector<std::uint32_t>{30}));
}

TEST(WorkerBudget, KeepsWhatIsStillWantedAndFreesTheRest) {
  std::vector<Slot> slots = {{10, 0, true}, {20, 0, false}, {30, 0, true}, {10, 1, true}};
  // 20 no longer wants a relay (its slot is idle: freed and given to 40); 30 no longer wants
  // one either, but its relay still runs: kept until it has gone; 10 now wants one only.
  const Plan p = plan({{10, 1}, {40, 1}}, slots);
  EXPECT_EQ(p.slots[0].database, 10u);
  EXPECT_EQ(p.slots[1].database, 40u);
  EXPECT_EQ(p.slots[1].worker, 0);
  EXPECT_EQ(p.slots[2].database, 30u);
  EXPECT_EQ(p.slots[3].database, 10u);  // worker 1 of 10, busy: kept until it has gone
  EXPECT_EQ(p.draining, (std::vector<std::uint32_t>{30, 10}));
  EXPECT_TRUE(p.starved.empty());
}

TEST(WorkerBudget, AFreedSlotGoesToTheDatabaseThatHadNone) {
  std::vector<Slot> slots = {{10, 0, true}, {20, 0, true}};
  Plan p = plan({{10, 1}, {20, 1}, {30, 1}}, slots);
  EXPECT_EQ(p.starved, (std::vector<std::uint32_t>{30}));
  // 20 is dropped and its relay has gone.
  slots[1].busy = false;
  p = plan({{10, 1}, {30, 1}}, slots);
  EXPECT_EQ(held(p), (std::map<std::uint32_t, int>{{10, 1}, {30, 1}}));
  EXPECT_TRUE(p.starved.empty());
}

TEST(WorkerBudget, ASlotTwiceForTheSameWorkerIsOneTooMany) {
  // An earlier launcher's slot and a new one for the same worker: one is let go.
  const Plan p = plan({{10, 1}}, {{10, 0, true}, {10, 0, false}});
  EXPECT_EQ(held(p), (std::map<std::uint32_t, int>{{10, 1}}));
}

TEST(WorkerBudget, NoWantsNoSlots) {
  const Plan p = plan({}, std::vector<Slot>(3));
  EXPECT_TRUE(held(p).empty());
  EXPECT_TRUE(p.starved.empty());
  EXPECT_TRUE(plan({{10, 1}}, {}).starved == std::vector<std::uint32_t>{10});
}

}  // namespace
