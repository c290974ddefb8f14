// "No responders" to a publish: a missing stream (ConfigError) or a JetStream that cannot answer
// yet (kUnavailable): a server restarting, or running without JetStream. Against a real
// nats-server (nats_test_support.hpp), restarted on the same port and store.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "nats_test_support.hpp"
#include "test_support.hpp"
#include "sinks/nats/nats_lookup.hpp"
#include "sinks/nats/nats_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;
using outbox::test::kLongDeadline;

#define REQUIRE_NATS_SERVER() \
  if (!have_nats_server()) GTEST_SKIP() << "no nats-server (Debian: nats-server)"

// Waits until the sink logged a reconnect, so that its next publish goes to the new server.
bool wait_reconnected(Sink& sink) {
  for (int i = 0; i < 400; ++i) {
    for (const LogLine& line : sink.take_log()) {
      if (line.text.find("reconnected") != std::string::npos) return true;
    }
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

// Sends `events` again (1 s per attempt) until every one is acked or `limit` passed; a
// ConfigError fails the test. Returns the last summary and how long it took.
// The last summary, once all acked or after kLongDeadline.
std::string send_until_acked(Sink& sink, const Events& events) {
  const auto t0 = Clock::now();
  std::string last;
  while (Clock::now() - t0 < kLongDeadline) {
    last = summary(send(sink, events, 1s));
    if (last == std::string(events.data.size(), 'A')) break;
    std::this_thread::sleep_for(20ms);  // a retry's pace
  }
  return last;
}

TEST(NatsStreamLookup, ReadsTheStreamNamesAnswer) {
  using nats::StreamLookup;
  const std::string head = R"({"type":"io.nats.jetstream.api.v1.stream_names_response",)";
  auto found = nats::read_stream_names(head + R"("total":1,"streams":["OUTBOX"]})");
  EXPECT_EQ(found.state, StreamLookup::kFound);
  EXPECT_EQ(found.detail, "stream OUTBOX");
  EXPECT_EQ(nats::read_stream_names(head + R"("total":0,"streams":null})").state,
            StreamLookup::kMissing);
  EXPECT_EQ(nats::read_stream_names(head + R"("total":0,"streams": [ ]})").state,
            StreamLookup::kMissing);
  // An error answer also carries "streams":null: no verdict.
  auto error = nats::read_stream_names(
      head + R"("error":{"code":503,"err_code":10039,"description":"jetstream not enabled"},)" +
      R"("total":0,"streams":null})");
  EXPECT_EQ(error.state, StreamLookup::kUnknown);
  EXPECT_EQ(error.detail, "JetStream API error: jetstream not enabled");
  EXPECT_EQ(nats::read_stream_names("not json").state, StreamLookup::kUnknown);
  EXPECT_EQ(nats::read_stream_names("").state, StreamLookup::kUnknown);
}

TEST(NatsSinkNoResponders, AMissingStreamIsConfirmedByTheLookup) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  NatsClient client(server.url());
  client.add_stream("INVOICES", "outbox.event.invoice");
  auto sink = make_nats_sink(server);
  std::vector<Outcome> outcomes(4);
  const Events orders = four_keys(4);
  try {
    sink->send(orders.messages(), outcomes, kLongDeadline);  // answered by the lookup
    ADD_FAILURE() << "no ConfigError: " << first_error(outcomes);
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("no JetStream stream stores subject \"outbox.event.order\""),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("nats stream add"), std::string::npos) << text;
  }
  Events invoices;
  invoices.add("invoice", "i1", "T", "{}");
  EXPECT_EQ(summary(send(*sink, invoices, 10s)), "A");
}

TEST(NatsSinkNoResponders, WithoutJetStreamIsUnavailableThenDeliversOnceItIsUp) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  server.stop();
  server.set_jetstream(false);
  server.start();
  auto sink = make_nats_sink(server);  // connected at once: no reconnect grace
  const Events events = four_keys(4);
  std::vector<Outcome> outcomes;
  // Ended by the lookup's no responders (the error says so), not by the deadline.
  EXPECT_NO_THROW(outcomes = send(*sink, events, kLongDeadline));
  EXPECT_TRUE(all_unavailable(outcomes,
                              "JetStream did not answer for subject \"outbox.event.order\" (no "
                              "responders): stream lookup: no responders"));

  server.stop();
  server.set_jetstream(true);
  server.start();
  add_outbox_stream(server);
  EXPECT_EQ(send_until_acked(*sink, events), "AAAA");  // once the client has reconnected
  NatsClient client(server.url());
  EXPECT_EQ(client.read("OUTBOX").size(), 4u);
}

TEST(NatsSinkNoResponders, ARestartWithoutJetStreamIsUnavailableAndTheStoredStreamComesBack) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  add_outbox_stream(server);  // on disk, in the server's store
  auto sink = make_nats_sink(server);
  EXPECT_EQ(summary(send(*sink, four_keys(1), 5s)), "A");

  server.stop();
  server.set_jetstream(false);
  server.start();
  ASSERT_TRUE(wait_reconnected(*sink));
  const Events events = four_keys(6);
  std::vector<Outcome> outcomes;
  EXPECT_NO_THROW(outcomes = send(*sink, events, 5s));
  EXPECT_TRUE(all_unavailable(outcomes, "(no responders): reconnected"));

  server.stop();
  server.set_jetstream(true);
  server.start();
  wait_for_outbox_stream(server);
  EXPECT_EQ(send_until_acked(*sink, events), "AAAAAA");
  NatsClient client(server.url());
  EXPECT_EQ(client.read("OUTBOX").size(), 7u);
}

TEST(NatsSinkNoResponders, AMissingStreamAfterAReconnectIsAConfigErrorOnceTheGraceIsOver) {
  REQUIRE_NATS_SERVER();
  NatsServer server;  // JetStream, no stream
  auto sink = make_nats_sink(server);
  server.stop();
  const auto restarted = Clock::now();  // the grace counts from the reconnect, after this
  server.start();
  ASSERT_TRUE(wait_reconnected(*sink));
  const Events events = four_keys(2);
  std::vector<Outcome> outcomes;
  EXPECT_NO_THROW(outcomes = send(*sink, events, 5s));
  EXPECT_TRUE(all_unavailable(outcomes, "(no responders): reconnected"));
  // Tried again as the relay would, until the stream lookup is trusted.
  std::string config_error;
  while (config_error.empty() &&
         Clock::now() - restarted < NatsSink::kReconnectGrace + kLongDeadline) {
    try {
      outcomes = send(*sink, events, 5s);
      EXPECT_TRUE(all_unavailable(outcomes, "(no responders): reconnected"));
      std::this_thread::sleep_for(100ms);
    } catch (const ConfigError& e) {
      config_error = e.what();
    }
  }
  EXPECT_NE(config_error.find("no JetStream stream stores subject \"outbox.event.order\""),
            std::string::npos)
      << config_error;
  EXPECT_GE(Clock::now() - restarted, NatsSink::kReconnectGrace);  // not before the grace
}

// The server stops reading with two started batches on their way, then dies: none of their
// PubAcks comes, and cnats would keep the publishes pending until their MaxWait (the batch's
// timeout + 1 s). The lost connection settles them at once; the keys they hold back stay held
// in the batch started next, and the relay's re-send after the restart keeps each key's order.
TEST(NatsSinkRestart, ALostConnectionEndsTheWaitForPubAcksAndKeepsEachKeysOrder) {
  REQUIRE_NATS_SERVER();
  NatsServer server;
  add_outbox_stream(server);
  auto sink = make_nats_sink(server);
  EXPECT_EQ(summary(send(*sink, four_keys(1), 5s)), "A");  // connected, PubAcks subscribed

  const Events first = four_keys(8);  // k0..k3 twice
  Events second;                      // started before the loss: lost too
  second.add("order", "k0", "T", "{}");
  second.add("order", "k9", "T", "{}");
  Events third;                         // started after it, while the second is unfinished
  third.add("order", "k0", "T", "{}");  // D: lost in the first
  third.add("order", "k5", "T", "{}");  // A
  third.add("order", "k9", "T", "{}");  // D: lost in the second
  const auto m1 = first.messages(), m2 = second.messages(), m3 = third.messages();
  std::vector<Outcome> o1(m1.size(), kUnset), o2(m2.size(), kUnset), o3(m3.size(), kUnset);

  server.pause();
  // Their deadlines only bound a hang: the error says the lost connection settled them.
  sink->start(m1, o1, kLongDeadline);
  sink->start(m2, o2, kLongDeadline);
  std::this_thread::sleep_for(200ms);  // written to the socket, unread
  server.kill_now();
  sink->finish();
  EXPECT_TRUE(all_unavailable(o1, "nats: connection lost before its PubAck"));

  server.start();
  wait_for_outbox_stream(server);
  sink->start(m3, o3, 10s);  // waits for the reconnect
  sink->finish();
  EXPECT_TRUE(all_unavailable(o2, "nats: connection lost before its PubAck"));
  sink->finish();
  EXPECT_EQ(summary(o3), "DAD") << first_error(o3);
  EXPECT_NE(o3[0].error.find("not sent: an earlier event of its key was not sent: nats: "
                             "connection lost before its PubAck"),
            std::string::npos)
      << o3[0].error;

  // As the relay sends them again: in order, each batch until it is acked.
  for (const Events* events : std::vector<const Events*>{&first, &second, &third}) {
    EXPECT_EQ(send_until_acked(*sink, *events), std::string(events->data.size(), 'A'));
  }
  NatsClient client(server.url());
  const auto stored = client.read("OUTBOX");
  EXPECT_EQ(stored.size(), 1u + 8 + 2 + 3);  // the one k5 sent twice is stored once
  // Per key, the stored order is the enqueue order.
  std::map<std::string, std::vector<std::string>> want, got;
  for (const Events* events : std::vector<const Events*>{&first, &second, &third}) {
    for (const auto& d : events->data) want[d.aggregateid].push_back(d.id);
  }
  for (const auto& m : stored) {
    if (m.headers.at("id") != stored.front().headers.at("id")) {
      got[m.headers.at("aggregateid")].push_back(m.headers.at("id"));
    }
  }
  EXPECT_EQ(got, want);
}

}  // namespace
