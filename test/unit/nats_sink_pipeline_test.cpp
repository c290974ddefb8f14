// The NATS sink's start()/finish() against a real nats-server with JetStream: two batches
// started at a time, as the relay keeps them.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nats_test_support.hpp"
#include "test_support.hpp"
#include "sinks/nats/nats_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;
using outbox::test::kLongDeadline;

#define REQUIRE_NATS_SERVER() \
  if (!have_nats_server()) GTEST_SKIP() << "no nats-server (Debian: nats-server)"

// A started batch: its events, messages and outcomes stay put until finish() (as the relay
// keeps them). Not movable: the messages view the events.
struct Started {
  explicit Started(Events e)
      : events(std::move(e)), messages(events.messages()), outcomes(events.data.size(), kUnset) {}
  Started(const Started&) = delete;
  Started& operator=(const Started&) = delete;
  Events events;
  std::vector<Message> messages;
  std::vector<Outcome> outcomes;
};

TEST(NatsSinkPipeline, TwoStartedBatchesGetTheirOwnOutcomesInOrder) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server);
  const Events first = four_keys(30);
  Events second;
  for (int i = 0; i < 30; ++i) second.add("order", "k" + std::to_string(i % 4), "T", "{}");
  second.data[5].aggregatetype = "bad type";  // rejected before it is published
  Started a(first), b(second);
  sink->start(a.messages, a.outcomes, 10s);
  sink->start(b.messages, b.outcomes, 10s);
  sink->finish();
  EXPECT_EQ(summary(a.outcomes), std::string(30, 'A')) << first_error(a.outcomes);
  sink->finish();
  EXPECT_EQ(summary(b.outcomes), std::string(5, 'A') + "R" + std::string(24, 'A'));
  sink->finish();  // nothing started: returns at once

  const auto stored = client.read("OUTBOX");
  ASSERT_EQ(stored.size(), 59u);
  std::vector<std::string> expected;
  for (const auto& d : first.data) expected.push_back(d.id);
  for (std::size_t i = 0; i < second.data.size(); ++i) {
    if (i != 5) expected.push_back(second.data[i].id);
  }
  for (std::size_t i = 0; i < stored.size(); ++i)
    EXPECT_EQ(stored[i].headers.at("id"), expected[i]);
}

TEST(NatsSinkPipeline, AKeyThatFailedInAnUnfinishedBatchIsDeferredInTheNext) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server);
  Events first;
  first.add("order", "k1", "T", "{}", {{"x", "a\r\nb"}});            // R: header value
  first.add("order", "k2", "T", std::string(2 * 1024 * 1024, 'x'));  // R: > max_payload
  first.add("order", "k3", "T", "{}");                               // A
  Events second;
  second.add("order", "k1", "T", "{}");  // D
  second.add("order", "k3", "T", "{}");  // A
  second.add("order", "k2", "T", "{}");  // D
  Events third;  // started after the first finished, while the second is unfinished
  third.add("order", "k2", "T", "{}");  // D: the second deferred k2
  third.add("order", "k4", "T", "{}");  // A
  Started a(first), b(second), c(third);
  sink->start(a.messages, a.outcomes, 10s);
  sink->start(b.messages, b.outcomes, 10s);
  sink->finish();
  sink->start(c.messages, c.outcomes, 10s);
  sink->finish();
  sink->finish();
  EXPECT_EQ(summary(a.outcomes), "RRA");
  EXPECT_EQ(summary(b.outcomes), "DAD");
  EXPECT_EQ(summary(c.outcomes), "DA");
  EXPECT_NE(b.outcomes[0].error.find("not sent: an earlier event of its key was not sent"),
            std::string::npos)
      << b.outcomes[0].error;
  EXPECT_NE(c.outcomes[0].error.find("too large"), std::string::npos) << c.outcomes[0].error;
  // Nothing started any more: the keys are free again.
  EXPECT_EQ(summary(send(*sink, first, 10s)), "RRA");
  EXPECT_EQ(summary(send(*sink, second, 10s)), "AAA");
}

TEST(NatsSinkPipeline, NoStreamFailsOnlyItsOwnBatch) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("INVOICES", "outbox.event.invoice");
  auto sink = make_nats_sink(server);
  Events invoices, orders;
  for (int i = 0; i < 5; ++i) {
    invoices.add("invoice", "i" + std::to_string(i), "T", "{}");
    orders.add("order", "o" + std::to_string(i), "T", "{}");
  }
  {
    Started a(orders), b(invoices);
    sink->start(a.messages, a.outcomes, 5s);
    sink->start(b.messages, b.outcomes, 5s);
    try {
      sink->finish();
      ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("\"outbox.event.order\""), std::string::npos)
          << e.what();
    }
    EXPECT_NO_THROW(sink->finish());
    EXPECT_EQ(summary(b.outcomes), "AAAAA") << first_error(b.outcomes);
  }
  Started a(invoices), b(orders);
  sink->start(a.messages, a.outcomes, 5s);
  sink->start(b.messages, b.outcomes, 5s);
  EXPECT_NO_THROW(sink->finish());
  EXPECT_EQ(summary(a.outcomes), "AAAAA");  // duplicates of the ids above: acked
  EXPECT_THROW(sink->finish(), ConfigError);
}

TEST(NatsSinkPipeline, AnOutageMidPipelineIsUnavailableAndHoldsBackTheNextBatch) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  add_outbox_stream(server);
  auto sink = make_nats_sink(server);
  CountingObserver observer;
  sink->observe_waits(&observer);
  EXPECT_EQ(summary(send(*sink, four_keys(1), 5s)), "A");

  const Events first = four_keys(8), second = four_keys(8);
  Started a(first), b(second);
  sink->start(a.messages, a.outcomes, 1500ms);
  server.stop();
  // Not connected (or its messages in the reconnect buffer, unacknowledged) until the deadline.
  sink->start(b.messages, b.outcomes, 1000ms);
  // A stopping nats-server shuts JetStream down before it closes connections: a publish of the
  // first batch may be answered "no responders". Unavailability, not a missing stream.
  EXPECT_NO_THROW(sink->finish());
  EXPECT_NO_THROW(sink->finish());
  EXPECT_EQ(unset(a.outcomes), 0u);
  for (const Outcome& o : a.outcomes) {  // its PubAcks may have come before the stop
    EXPECT_TRUE(o.delivery == Delivery::kAcked || o.delivery == Delivery::kUnavailable) << o.error;
  }
  EXPECT_TRUE(all_unavailable(b.outcomes, ""));
  EXPECT_GE(observer.calls_, 2);  // asked during the waits, not only as they began

  // While the first is unfinished, a batch started after it publishes nothing, even once the
  // server is back.
  Started c(four_keys(2)), d(four_keys(2));
  sink->start(c.messages, c.outcomes, 300ms);
  EXPECT_TRUE(all_unavailable(c.outcomes, "not connected"));  // settled in start()
  server.start();
  wait_for_outbox_stream(server);
  sink->start(d.messages, d.outcomes, kLongDeadline);
  sink->finish();
  sink->finish();
  EXPECT_TRUE(all_unavailable(d.outcomes, "not sent: an earlier batch was not published"));
  // Right after the restart JetStream may still answer "no responders" to the sink's own
  // connection for a moment: unavailable (never a ConfigError), and tried again as the relay does.
  std::string recovered;
  const Events last = four_keys(3);
  const auto t2 = Clock::now();
  while (recovered != "AAA" && Clock::now() - t2 < kLongDeadline) {
    recovered = summary(send(*sink, last, 2s));
  }
  EXPECT_EQ(recovered, "AAA");
}

TEST(NatsSinkPipeline, TheObserverEndsTheWaitOfStartAndFinish) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  // Made while the server is down, the sink knows it is not connected: only the observer
  // ends the wait. (Stopped after, the first publish could still go out and come back as
  // "connection lost before its PubAck".)
  server.stop();
  auto sink = make_nats_sink(server);
  struct Stop : WaitObserver {
    bool keep_waiting(std::string_view) noexcept override { return ++calls < 3; }
    int calls = 0;
  } observer;
  sink->observe_waits(&observer);
  Started a(four_keys(4)), b(four_keys(4));
  // The deadlines only bound a hang: the errors say the observer ended the waits.
  sink->start(a.messages, a.outcomes, kLongDeadline);
  sink->start(b.messages, b.outcomes, kLongDeadline);
  sink->finish();
  sink->finish();
  EXPECT_TRUE(all_unavailable(a.outcomes, "the relay stopped waiting"));
  EXPECT_TRUE(all_unavailable(b.outcomes, "not sent: an earlier batch was not published"));
}

TEST(NatsSinkPipeline, ABatchStillStartedIsNotTouchedAfterTheDestructor) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  for (int round = 0; round < 3; ++round) {
    auto sink = make_nats_sink(server);
    auto a = std::make_unique<Started>(four_keys(500));
    auto b = std::make_unique<Started>(four_keys(500));
    sink->start(a->messages, a->outcomes, 10s);
    sink->start(b->messages, b->outcomes, 10s);
    if (round == 1) sink->finish();
    sink.reset();
    // Freed right after the destructor: a late PubAck writing them would be caught by ASan.
    a.reset();
    b.reset();
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GE(client.read("OUTBOX").size(), 500u);
}

}  // namespace
