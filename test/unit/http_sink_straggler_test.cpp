// The HTTP sink's stragglers: once the rest of a batch is acknowledged, a request that has
// waited straggler.timeout.ms no longer holds the batch back. Its key waits while it is in
// flight; if it is answered 2xx after all, the relay's retry of its event is acknowledged
// without a second request; if it fails, the retry is sent.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "http_test_support.hpp"
#include "sinks/http/http_sink.hpp"

namespace {

using namespace outbox::sinks;
using outbox::test::Batch;
using outbox::test::Received;
using outbox::test::Reply;
using outbox::test::send;
using outbox::test::TestServer;
using namespace std::chrono_literals;

// How many requests carried `id`.
int count(const TestServer& server, const std::string& id) {
  int n = 0;
  for (const Received& r : server.requests()) n += r.header("webhook-id") == id;
  return n;
}

// a-1 a-2, and the same for each further key: the relay's retry of key a alone, or a batch.
Batch keys(std::initializer_list<const char*> names) {
  Batch b;
  for (const char* name : names) {
    b.add(name, 1);
    b.add(name, 2);
  }
  return b;
}
Batch keys_a_b() { return keys({"a", "b"}); }

TEST(HttpSinkStraggler, GivenUpHoldsItsKeyAndCountsWhenAnsweredLate) {
  TestServer server([](const Received& r) {
    return Reply{200, {}, "", r.header("webhook-id") == "a-1" ? 700ms : 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}, {"straggler.timeout.ms", "100"}});
  Batch first = keys_a_b();
  std::vector<Outcome> out = send(sink, first);  // did not wait for a-1's answer: see its error
  EXPECT_EQ(out[0].delivery, Delivery::kUnavailable);
  EXPECT_NE(out[0].error.find("straggler.timeout.ms"), std::string::npos) << out[0].error;
  EXPECT_EQ(out[1].delivery, Delivery::kDeferred);
  EXPECT_EQ(out[2].delivery, Delivery::kAcked);
  EXPECT_EQ(out[3].delivery, Delivery::kAcked);

  // The relay's retry while a-1 is still in flight: nothing of key a is sent.
  Batch retry = keys({"a"});
  out = send(sink, retry);
  EXPECT_EQ(out[0].delivery, Delivery::kUnavailable);  // backs off, not back at once
  EXPECT_NE(out[0].error.find("still in flight"), std::string::npos) << out[0].error;
  EXPECT_EQ(out[1].delivery, Delivery::kDeferred);
  EXPECT_EQ(count(server, "a-2"), 0);

  std::this_thread::sleep_for(900ms);  // a-1 is answered 200 meanwhile
  Batch again = keys({"a"});
  out = send(sink, again);
  EXPECT_EQ(out[0].delivery, Delivery::kAcked);
  EXPECT_EQ(out[1].delivery, Delivery::kAcked);
  EXPECT_EQ(count(server, "a-1"), 1);  // acknowledged late, not sent again
  EXPECT_EQ(count(server, "a-2"), 1);
}

TEST(HttpSinkStraggler, GivenUpAndTimedOutIsSentAgain) {
  std::atomic<int> a1{0};
  TestServer server([&](const Received& r) {
    const bool slow = r.header("webhook-id") == "a-1" && ++a1 == 1;  // only the first time
    return Reply{200, {}, "", slow ? 1500ms : 0ms};
  });
  HttpSink sink(
      Options{{"url", server.url()}, {"straggler.timeout.ms", "100"}, {"timeout.ms", "400"}});
  Batch first = keys_a_b();
  std::vector<Outcome> out = send(sink, first);
  EXPECT_EQ(out[0].delivery, Delivery::kUnavailable);
  EXPECT_EQ(out[2].delivery, Delivery::kAcked);

  std::this_thread::sleep_for(600ms);  // a-1 timed out meanwhile
  Batch again = keys({"a"});
  out = send(sink, again);
  EXPECT_EQ(out[0].delivery, Delivery::kAcked);
  EXPECT_EQ(out[1].delivery, Delivery::kAcked);
  EXPECT_EQ(count(server, "a-1"), 2);
}

TEST(HttpSinkStraggler, NotWithoutAnAcknowledgementNorWhenOff) {
  TestServer server([](const Received& r) {
    return Reply{200, {}, "", r.header("webhook-id") == "a-1" ? 400ms : 0ms};
  });
  // A batch whose only request is slow waits for it: the receiver may be slow for all.
  HttpSink sink(Options{{"url", server.url()}, {"straggler.timeout.ms", "100"}});
  Batch alone;
  alone.add("a", 1);
  EXPECT_EQ(send(sink, alone)[0].delivery, Delivery::kAcked);

  HttpSink off(Options{{"url", server.url()}, {"straggler.timeout.ms", "0"}});
  Batch both = keys_a_b();
  const std::vector<Outcome> out = send(off, both);
  for (const Outcome& o : out) EXPECT_EQ(o.delivery, Delivery::kAcked) << o.error;
}

}  // namespace
