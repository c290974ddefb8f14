// The null sink keeps the per-key rule of the sink interface: once a message of a key is not
// acked, later messages of that key are deferred, within a batch and across batches started
// while it is unfinished (the relay's pipelining). reject_aggregateid fails one event a given
// number of times.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "null_test_support.hpp"
#include "sinks/null/null_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;

constexpr const char* kDeferred = "not sent: an earlier event of its key failed";

// The key is (aggregatetype, aggregateid): only the later messages of the failed one's key
// are deferred.
TEST(NullSinkOrder, PrefixRuleWithinABatch) {
  auto sink = create_null_sink({{"reject_aggregateid", "K"}});
  Batch b;
  b.add("A").add("K").add("B").add("K").add("K", "", "customer").add("A").add("K");
  const auto outcomes = send(*sink, b);
  EXPECT_EQ(summary(outcomes), "ARADAAD");
  EXPECT_EQ(outcomes[1].error, "rejected by the null sink (reject_aggregateid=K, 1 of 1)");
  EXPECT_EQ(outcomes[3].error, kDeferred);
  EXPECT_EQ(outcomes[6].error, kDeferred);
  EXPECT_EQ(outcomes[4].error, "");
}

// start() decides the batch at once; a key that failed in a started batch defers the
// messages of that key in batches started before it finishes, and no longer after.
TEST(NullSinkOrder, AcrossStartedBatches) {
  auto sink = create_null_sink({{"reject_aggregateid", "K"}, {"reject_times", "2"}});
  const Batch b1{"K", "A"};
  const Batch b2{"B", "K", "A"};
  std::vector<Outcome> o1, o2;
  sink->start(b1.messages(), o1, 1s);
  EXPECT_EQ(summary(o1), "RA");
  sink->start(b2.messages(), o2, 1s);
  EXPECT_EQ(summary(o2), "ADA");
  EXPECT_EQ(o2[1].error, kDeferred);
  sink->finish();
  sink->finish();
  sink->finish();  // nothing started: nothing to do

  // All finished: the key holds nothing back; K's first event is rejected a second time.
  Batch b3;
  b3.add("K", b1.id(0)).add("K", b2.id(1));
  std::vector<Outcome> o3;
  sink->start(b3.messages(), o3, 1s);
  EXPECT_EQ(summary(o3), "RD");
  EXPECT_EQ(o3[0].error, "rejected by the null sink (reject_aggregateid=K, 2 of 2)");

  // b3 is unfinished; a batch without K started now ...
  const Batch b4{"A"};
  std::vector<Outcome> o4;
  sink->start(b4.messages(), o4, 1s);
  EXPECT_EQ(summary(o4), "A");
  sink->finish();  // b3

  // ... does not hold K back: once b3 is finished, nothing failed of K is unfinished.
  Batch b5;
  b5.add("K", b1.id(0)).add("K", b2.id(1));
  std::vector<Outcome> o5;
  sink->start(b5.messages(), o5, 1s);
  EXPECT_EQ(summary(o5), "AA");
  sink->finish();
  sink->finish();
}

// A message deferred in an unfinished batch holds back its key in the batches started after
// it, like the rejected one it waits for.
TEST(NullSinkOrder, DeferredMessagesHoldBackLaterBatches) {
  auto sink = create_null_sink({{"reject_aggregateid", "K"}});
  const Batch b1{"K"}, b2{"K"}, b3{"K", "A"}, b4{"K"};
  std::vector<Outcome> o1, o2, o3, o4;
  sink->start(b1.messages(), o1, 1s);
  sink->start(b2.messages(), o2, 1s);
  sink->finish();  // b1
  sink->start(b3.messages(), o3, 1s);
  sink->finish();  // b2
  sink->finish();  // b3
  sink->start(b4.messages(), o4, 1s);
  sink->finish();
  EXPECT_EQ(summary(o1) + " " + summary(o2) + " " + summary(o3) + " " + summary(o4), "R D DA A");
}

// An unavailable message (unavailable_every) holds its key back like a rejection: the later
// messages of its key in the batch, and in batches started while it is unfinished, are
// deferred, and are not counted.
TEST(NullSinkOrder, UnavailableHoldsItsKeyAcrossStartedBatches) {
  constexpr const char* kUnavailable = "unavailable: the null sink's unavailable_every=2";
  auto sink = create_null_sink({{"unavailable_every", "2"}});
  const Batch b1{"A", "K", "K", "B"};  // offered: A 1st, K 2nd (U), B 3rd
  const Batch b2{"K", "C", "A", "K"};  // offered: C 4th (U), A 5th
  std::vector<Outcome> o1, o2;
  sink->start(b1.messages(), o1, 1s);
  sink->start(b2.messages(), o2, 1s);
  EXPECT_EQ(summary(o1), "AUDA");
  EXPECT_EQ(summary(o2), "DUAD");
  const std::vector<std::string> e1 = {"", kUnavailable, kDeferred, ""};
  const std::vector<std::string> e2 = {kDeferred, kUnavailable, "", kDeferred};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(o1[i].error, e1[i]) << i;
    EXPECT_EQ(o2[i].error, e2[i]) << i;
  }
  sink->finish();  // b1

  // b2 is unfinished: its deferred K and unavailable C hold their keys back.
  const Batch b3{"K", "C", "D"};  // offered: D 6th (U)
  std::vector<Outcome> o3;
  sink->start(b3.messages(), o3, 1s);
  EXPECT_EQ(summary(o3), "DDU");
  sink->finish();  // b2
  sink->finish();  // b3

  // All finished: nothing held; 7th A, 8th U.
  const Batch b4{"K", "C"};
  std::vector<Outcome> o4;
  sink->start(b4.messages(), o4, 1s);
  EXPECT_EQ(summary(o4), "AU");
  sink->finish();
}

// reject_times=2: the remembered event is rejected twice, acked the third time; other
// events of its aggregateid are not remembered, other keys not affected.
TEST(NullSinkOrder, RejectAggregateidRejectTimes) {
  auto sink = create_null_sink({{"reject_aggregateid", "K"}, {"reject_times", "2"}});
  EXPECT_EQ(sink->describe(), "null reject_aggregateid=K reject_times=2");
  Batch first;
  first.add("A").add("K").add("K").add("B");
  auto outcomes = send(*sink, first);
  EXPECT_EQ(summary(outcomes), "ARDA");
  EXPECT_EQ(outcomes[1].error, "rejected by the null sink (reject_aggregateid=K, 1 of 2)");
  EXPECT_EQ(outcomes[2].error, kDeferred);

  // The relay sends the two again.
  Batch again;
  again.add("K", first.id(1)).add("K", first.id(2)).add("C");
  outcomes = send(*sink, again);
  EXPECT_EQ(summary(outcomes), "RDA");
  EXPECT_EQ(outcomes[0].error, "rejected by the null sink (reject_aggregateid=K, 2 of 2)");

  outcomes = send(*sink, again);
  EXPECT_EQ(summary(outcomes), "AAA");
  outcomes = send(*sink, again);  // a replay: acked again
  EXPECT_EQ(summary(outcomes), "AAA");

  // Another aggregatetype with that aggregateid, first seen later: not rejected.
  Batch other;
  other.add("K", "", "customer").add("K");
  EXPECT_EQ(summary(send(*sink, other)), "AA");
}

// The remembered event is the first seen with that aggregateid, whatever its aggregatetype.
TEST(NullSinkOrder, RejectAggregateidRemembersTheFirstSeen) {
  auto sink = create_null_sink({{"reject_aggregateid", "K"}, {"reject_times", "1"}});
  Batch b;
  b.add("K", "", "customer").add("K");
  EXPECT_EQ(summary(send(*sink, b)), "RA");
}

}  // namespace
