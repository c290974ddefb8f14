// "No responders" to a publish: a missing stream (ConfigError) or a JetStream that cannot answer
// yet (kUnavailable): a server restarting, or running without JetStream. Against a real
// nats-server (nats_test_support.hpp), restarted on the same port and store.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "nats_test_support.hpp"
#include "sinks/nats_lookup.hpp"
#include "sinks/nats_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;

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
std::pair<std::string, Clock::duration> send_until_acked(Sink& sink, const Events& events,
                                                         Clock::duration limit) {
  const auto t0 = Clock::now();
  std::string last;
  while (Clock::now() - t0 < limit) {
    last = summary(send(sink, events, 1s));
    if (last == std::string(events.data.size(), 'A')) break;
    std::this_thread::sleep_for(20ms);  // a retry's pace, not what the test measures
  }
  return {last, Clock::now() - t0};
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
  const auto t0 = Clock::now();
  try {
    sink->send(orders.messages(), outcomes, 10s);
    ADD_FAILURE() << "no ConfigError: " << first_error(outcomes);
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("no JetStream stream stores subject \"outbox.event.order\""),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("nats stream add"), std::string::npos) << text;
  }
  EXPECT_LT(Clock::now() - t0, 2s);  // JetStream answers the lookup at once
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
  const auto t0 = Clock::now();
  std::vector<Outcome> outcomes;
  EXPECT_NO_THROW(outcomes = send(*sink, events, 10s));
  EXPECT_LT(Clock::now() - t0, 2500ms);  // the lookup's no responders come at once too
  EXPECT_TRUE(all_unavailable(outcomes,
                              "JetStream did not answer for subject \"outbox.event.order\" (no "
                              "responders): stream lookup: no responders"));

  server.stop();
  server.set_jetstream(true);
  server.start();
  add_outbox_stream(server);
  const auto [result, took] = send_until_acked(*sink, events, 10s);
  EXPECT_EQ(result, "AAAA");
  EXPECT_LT(took, 2500ms);  // the client reconnects within its 500 ms reconnect wait
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
  const auto [result, took] = send_until_acked(*sink, events, 10s);
  EXPECT_EQ(result, "AAAAAA");
  EXPECT_LT(took, 2500ms);
  NatsClient client(server.url());
  EXPECT_EQ(client.read("OUTBOX").size(), 7u);
}

TEST(NatsSinkNoResponders, AMissingStreamAfterAReconnectIsAConfigErrorOnceTheGraceIsOver) {
  REQUIRE_NATS_SERVER();
  NatsServer server;  // JetStream, no stream
  auto sink = make_nats_sink(server);
  server.stop();
  server.start();
  ASSERT_TRUE(wait_reconnected(*sink));
  const auto reconnected = Clock::now();
  const Events events = four_keys(2);
  std::vector<Outcome> outcomes;
  EXPECT_NO_THROW(outcomes = send(*sink, events, 5s));
  EXPECT_TRUE(all_unavailable(outcomes, "(no responders): reconnected"));
  // Tried again as the relay would, until the stream lookup is trusted.
  std::string config_error;
  while (config_error.empty() && Clock::now() - reconnected < NatsSink::kReconnectGrace + 5s) {
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
  EXPECT_GE(Clock::now() - reconnected, NatsSink::kReconnectGrace - 1s);
}

}  // namespace
