// The NATS sink against a real nats-server with JetStream (started on a free loopback port
// with a temporary store, stopped at the end of each test), read back with cnats itself.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "nats_test_support.hpp"
#include "test_support.hpp"
#include "sinks/nats/nats_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;
using outbox::test::kLongDeadline;

const auto kEnv = ::testing::AddGlobalTestEnvironment(new NatsLibraryEnvironment);

#define REQUIRE_NATS_SERVER() \
  if (!have_nats_server()) GTEST_SKIP() << "no nats-server (Debian: nats-server)"

std::set<std::string> ids_of(const Events& events) {
  std::set<std::string> ids;
  for (const auto& d : events.data) ids.insert(d.id);
  return ids;
}

std::multiset<std::string> msg_ids(const std::vector<StoredMessage>& stored) {
  std::multiset<std::string> ids;
  for (const StoredMessage& m : stored) ids.insert(m.headers.at("Nats-Msg-Id"));
  return ids;
}

TEST(NatsSink, DeliversWithHeadersInOrder) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server);
  EXPECT_EQ(sink->describe(),
            "nats servers=" + server.url() + " subject.template=outbox.event.${aggregatetype}");
  Events events;
  for (int i = 0; i < 40; ++i) {
    events.add(i % 2 ? "order" : "invoice", "k" + std::to_string(i % 4), "T" + std::to_string(i),
               "{\"n\": " + std::to_string(i) + "}", {{"tenant", "t" + std::to_string(i)}});
  }
  auto outcomes = send(*sink, events, 10s);
  EXPECT_EQ(summary(outcomes), std::string(40, 'A')) << first_error(outcomes);
  EXPECT_GT(sink->max_message_bytes(), 0u);
  EXPECT_TRUE(sink->usable());

  const auto stored = client.read("OUTBOX");
  ASSERT_EQ(stored.size(), 40u);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const StoredMessage& m = stored[i];
    const auto& d = events.data[i];  // one connection, one stream: the order sent
    EXPECT_EQ(m.headers.at("Nats-Msg-Id"), d.id);
    EXPECT_EQ(m.headers.at("id"), d.id);
    EXPECT_EQ(m.headers.at("type"), d.type);
    EXPECT_EQ(m.headers.at("aggregatetype"), d.aggregatetype);
    EXPECT_EQ(m.headers.at("aggregateid"), d.aggregateid);
    EXPECT_EQ(m.headers.at("tenant"), d.headers.at(0).second);
    EXPECT_EQ(m.subject, "outbox.event." + d.aggregatetype);
    EXPECT_EQ(m.data, d.payload);
    EXPECT_EQ(m.headers.count("ce-id"), 0u);
    seen.insert(m.headers.at("id"));
  }
  EXPECT_EQ(seen, ids_of(events));
}

TEST(NatsSink, ASecondSendIsAckedAsDuplicateAndStoredOnce) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server);
  const Events events = four_keys(20);
  EXPECT_EQ(summary(send(*sink, events, 10s)), std::string(20, 'A'));
  auto again = send(*sink, events, 10s);
  EXPECT_EQ(summary(again), std::string(20, 'A')) << first_error(again);
  const auto stored = client.read("OUTBOX");
  const auto ids = msg_ids(stored);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()), ids_of(events));
  EXPECT_EQ(ids.size(), 20u);  // each once
}

TEST(NatsSink, NoStreamIsAConfigErrorNamingTheSubject) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  auto sink = make_nats_sink(server);
  const Events events = four_keys(3);
  std::vector<Outcome> outcomes(3);
  try {
    sink->send(events.messages(), outcomes, 5s);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"outbox.event.order\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nats stream add"), std::string::npos) << e.what();
  }
  // Once the stream is there, the same batch goes through.
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  EXPECT_EQ(summary(send(*sink, events, 10s)), "AAA");
  EXPECT_EQ(client.read("OUTBOX").size(), 3u);
}

TEST(NatsSink, AWrongExpectedStreamIsAConfigError) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server, {{"stream", "OTHER"}});
  std::vector<Outcome> outcomes(1);
  const Events events = four_keys(1);
  EXPECT_THROW(sink->send(events.messages(), outcomes, 5s), ConfigError);
  auto right = make_nats_sink(server, {{"stream", "OUTBOX"}});
  EXPECT_EQ(summary(send(*right, events, 5s)), "A");
}

TEST(NatsSink, BadSubjectsAndHeadersAreRejectedAndHoldBackTheirKey) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server);
  Events events;
  events.add("bad type", "k1", "T", "{}");                            // R: subject with a space
  events.add("bad type", "k1", "T", "{}");                            // D: same key
  events.add("order", "k2", "T", "{}", {{"x", "a\r\nb"}});            // R: header value
  events.add("order", "k2", "T", "{}");                               // D
  events.add("order", "k3", "T", "{}", {{"Nats-Rollup", "all"}});     // R: reserved
  events.add("order", "k4", "T", "{}");                               // A
  events.add("order", "k5", "T", std::string(2 * 1024 * 1024, 'x'));  // R: > max_payload
  events.add("order", "k5", "T", "{}");                               // D
  auto outcomes = send(*sink, events, 10s);
  EXPECT_EQ(summary(outcomes), "RDRDRARD");
  EXPECT_NE(outcomes[0].error.find("not a valid NATS subject"), std::string::npos);
  EXPECT_NE(outcomes[1].error.find("not sent: an earlier event of its key"), std::string::npos);
  EXPECT_NE(outcomes[6].error.find("too large"), std::string::npos) << outcomes[6].error;
  const auto stored = client.read("OUTBOX");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].headers.at("id"), events.data[5].id);
}

TEST(NatsSink, TooLargeForTheStreamIsRejectedByThePubAck) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>", 1000);
  auto sink = make_nats_sink(server);
  Events events;
  events.add("order", "k1", "T", std::string(5000, 'x'));
  events.add("order", "k2", "T", "{}");
  auto outcomes = send(*sink, events, 10s);
  EXPECT_EQ(summary(outcomes), "RA");
  EXPECT_NE(outcomes[0].error.find("10054"), std::string::npos) << outcomes[0].error;
}

TEST(NatsSink, ServerStoppedIsUnavailableWithinTheTimeoutThenRecovers) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  add_outbox_stream(server);
  auto sink = make_nats_sink(server);
  CountingObserver observer;
  sink->observe_waits(&observer);
  EXPECT_EQ(summary(send(*sink, four_keys(1), 5s)), "A");

  server.stop();
  const Events events = four_keys(12);
  const auto t0 = Clock::now();
  auto outcomes = send(*sink, events, 1500ms);
  const auto took = Clock::now() - t0;
  // Not connected, or (if the client had not noticed the stop yet) published and lost with
  // the connection: unavailable at once.
  EXPECT_TRUE(all_unavailable(outcomes, ""));
  const std::string error = first_error(outcomes);
  const bool lost = error.find("connection lost before its PubAck") != std::string::npos ||
                    error.find("not published: the connection is down") != std::string::npos;
  EXPECT_TRUE(lost || error.find("not connected to NATS") != std::string::npos) << error;
  if (!lost) {
    EXPECT_GE(took, 1500ms);        // not before the deadline
    EXPECT_GE(observer.calls_, 2);  // asked during the wait, not only as it began
    EXPECT_NE(observer.last_error_.find("nats: disconnected"), std::string::npos)
        << observer.last_error_;
  }
  EXPECT_TRUE(sink->usable());
  bool logged = false;
  for (const LogLine& line : sink->take_log()) {
    logged = logged || line.text.find("disconnected") != std::string::npos;
  }
  EXPECT_TRUE(logged);

  server.start();  // same port, same store: the stream is still there
  wait_for_outbox_stream(server);
  outcomes = send(*sink, events, 15s);
  EXPECT_EQ(summary(outcomes), std::string(12, 'A')) << first_error(outcomes);
  NatsClient client(server.url());
  EXPECT_EQ(client.read("OUTBOX").size(), 13u);
}

TEST(NatsSink, TheObserverEndsTheWait) {
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
  } stop;
  sink->observe_waits(&stop);
  // The deadline only bounds a hang: the error says the observer ended the wait.
  auto outcomes = send(*sink, four_keys(4), kLongDeadline);
  EXPECT_TRUE(all_unavailable(outcomes, "the relay stopped waiting"));
}

TEST(NatsSink, CreatedWhileTheServerIsDownConnectsLater) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  add_outbox_stream(server);
  server.stop();
  auto sink = make_nats_sink(server);
  EXPECT_EQ(sink->max_message_bytes(), 0u);
  EXPECT_TRUE(all_unavailable(send(*sink, four_keys(2), 300ms), "not connected"));
  server.start();
  wait_for_outbox_stream(server);
  EXPECT_EQ(summary(send(*sink, four_keys(2), 10s)), "AA");
  EXPECT_GT(sink->max_message_bytes(), 0u);
}

TEST(NatsSink, UserAndPassword) {
  REQUIRE_NATS_SERVER();
  NatsServer server({"--user", "relay", "--pass", "pw-123"}, "relay:pw-123");
  NatsClient client(server.client_url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto wrong = make_nats_sink(server, {{"user", "relay"}, {"password", "wrong"}});
  auto outcomes = send(*wrong, four_keys(1), 500ms);
  EXPECT_TRUE(all_unavailable(outcomes, "not connected to NATS"));
  EXPECT_EQ(first_error(outcomes).find("wrong"), std::string::npos);
  auto sink = make_nats_sink(server, {{"user", "relay"}, {"password", "pw-123"}});
  EXPECT_EQ(summary(send(*sink, four_keys(2), 10s)), "AA");
  EXPECT_EQ(sink->describe().find("pw-123"), std::string::npos);
  for (const LogLine& line : wrong->take_log()) {
    EXPECT_EQ(line.text.find("wrong"), std::string::npos) << line.text;
  }
}

TEST(NatsSink, Token) {
  REQUIRE_NATS_SERVER();
  NatsServer server({"--auth", "tok-456"}, "tok-456");
  NatsClient client(server.client_url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server, {{"token", "tok-456"}});
  EXPECT_EQ(summary(send(*sink, four_keys(2), 10s)), "AA");
  EXPECT_EQ(client.read("OUTBOX").size(), 2u);
}

TEST(NatsSink, CloudEventsHeaders) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("OUTBOX", "outbox.event.>");
  auto sink = make_nats_sink(server, {{"cloudevents", "true"}, {"cloudevents.source", "/shop"}});
  Events events;
  events.add("order", "o-17", "OrderCreated", "{\"a\": 1}");
  EXPECT_EQ(summary(send(*sink, events, 10s)), "A");
  const auto stored = client.read("OUTBOX");
  ASSERT_EQ(stored.size(), 1u);
  const auto& h = stored[0].headers;
  EXPECT_EQ(h.at("ce-specversion"), "1.0");
  EXPECT_EQ(h.at("ce-id"), events.data[0].id);
  EXPECT_EQ(h.at("ce-source"), "/shop");
  EXPECT_EQ(h.at("ce-type"), "OrderCreated");
  EXPECT_EQ(h.at("ce-subject"), "o-17");
  EXPECT_EQ(h.at("ce-time"), "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(h.at("ce-datacontenttype"), "application/json");
  EXPECT_EQ(h.at("Content-Type"), "application/json");
  EXPECT_EQ(h.at("Nats-Msg-Id"), events.data[0].id);
}

}  // namespace
