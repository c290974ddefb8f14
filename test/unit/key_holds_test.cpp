#include "core/key_holds.hpp"

#include <gtest/gtest.h>

namespace {

using outbox::KeyHolds;

TEST(KeyHolds, NoHoldsSendsEverything) {
  KeyHolds holds;
  const auto out = holds.decide({{"order", "1"}, {"order", "1"}}, {1, 2});
  EXPECT_EQ(out, (std::vector<std::int64_t>{-1, -1}));
  EXPECT_EQ(holds.earliest_at(99), 99);
}

TEST(KeyHolds, LaterEventsOfAHeldKeyWaitForItsBlocker) {
  KeyHolds holds;
  holds.failed("order", "1", {10, 500});
  // Key order/1's blocker (seq 10) is not in the batch: its later events wait until 500.
  // Other keys, and the type-qualified key ("order2", "1" is not ("order", "21")), flow.
  auto out = holds.decide({{"order", "1"}, {"order", "2"}, {"order2", "1"}, {"order", "1"}},
                          {11, 12, 13, 14});
  EXPECT_EQ(out, (std::vector<std::int64_t>{500, -1, -1, 500}));
  // The blocker comes back in the batch: what follows it goes out behind it.
  out = holds.decide({{"order", "1"}, {"order", "1"}}, {10, 11});
  EXPECT_EQ(out, (std::vector<std::int64_t>{-1, -1}));
  EXPECT_EQ(holds.earliest_at(1000), 500);
}

TEST(KeyHolds, TheEarliestFailureStaysTheBlocker) {
  KeyHolds holds;
  holds.failed("a", "1", {10, 500});
  holds.failed("a", "1", {12, 300});  // a later event failed too: 10 still blocks
  ASSERT_NE(holds.find("a", "1"), nullptr);
  EXPECT_EQ(holds.find("a", "1")->seq, 10);
  EXPECT_EQ(holds.find("a", "1")->at, 500);
  holds.failed("a", "1", {10, 900});  // the blocker failed again: its new time
  EXPECT_EQ(holds.find("a", "1")->at, 900);
  holds.set("a", "1", {12, 300});  // a reload: 10 was delivered or dead-lettered
  EXPECT_EQ(holds.find("a", "1")->seq, 12);
  holds.clear();
  EXPECT_TRUE(holds.empty());
  EXPECT_EQ(holds.find("a", "1"), nullptr);
}

}  // namespace
