// The HTTP sink when the receiver fails: a failing request holds back only its key, trouble
// of the whole endpoint (a refused connection, Retry-After) stops what is not started yet,
// and pipelined batches (start, start, finish, finish) keep each key's order across them.
// Outcomes are compared message by message.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "http_test_support.hpp"
#include "sinks/http/http_sink.hpp"

namespace {

using namespace outbox::sinks;
using outbox::test::Batch;
using outbox::test::ids_of;
using outbox::test::Received;
using outbox::test::Reply;
using outbox::test::send;
using outbox::test::TestServer;
using namespace std::chrono_literals;

const char* name(Delivery d) {
  switch (d) {
    case Delivery::kAcked:
      return "acked";
    case Delivery::kUnavailable:
      return "unavailable";
    case Delivery::kRejected:
      return "rejected";
    case Delivery::kDeferred:
      return "deferred";
  }
  return "?";
}

// Each message's id -> its delivery.
std::map<std::string, std::string> deliveries(const Batch& b, const std::vector<Outcome>& out) {
  std::map<std::string, std::string> result;
  for (std::size_t i = 0; i < b.ids.size(); ++i) result[b.ids[i]] = name(out[i].delivery);
  return result;
}

std::string error_of(const Batch& b, const std::vector<Outcome>& out, const std::string& id) {
  for (std::size_t i = 0; i < b.ids.size(); ++i) {
    if (b.ids[i] == id) return out[i].error;
  }
  return "(no such message)";
}

using Expected = std::map<std::string, std::string>;

TEST(HttpSinkFailure, FlakyAnswersHoldBackOnlyTheirKeys) {
  TestServer server([](const Received& r) {
    const std::string id = r.header("webhook-id");
    return Reply{id == "a-2" || id == "c-3" ? 503 : 200, {}, "", 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}, {"max_concurrency", "3"}});
  Batch b;
  for (int n = 1; n <= 4; ++n) {
    b.add("a", n);
    b.add("b", n);
    b.add("c", n);
  }
  const std::vector<Outcome> out = send(sink, b);
  EXPECT_EQ(deliveries(b, out), (Expected{{"a-1", "acked"},
                                          {"a-2", "unavailable"},
                                          {"a-3", "deferred"},
                                          {"a-4", "deferred"},
                                          {"b-1", "acked"},
                                          {"b-2", "acked"},
                                          {"b-3", "acked"},
                                          {"b-4", "acked"},
                                          {"c-1", "acked"},
                                          {"c-2", "acked"},
                                          {"c-3", "unavailable"},
                                          {"c-4", "deferred"}}));
  EXPECT_EQ(error_of(b, out, "a-2"), "http: the receiver answered 503");
  EXPECT_EQ(error_of(b, out, "a-4"),
            "not sent: an earlier event of its key was not delivered (http: the receiver "
            "answered 503)");
  EXPECT_EQ(ids_of(server.requests()),
            (std::set<std::string>{"a-1", "a-2", "b-1", "b-2", "b-3", "b-4", "c-1", "c-2", "c-3"}));
}

TEST(HttpSinkFailure, RetryAfterStopsNewRequestsInFlightOnesSettle) {
  // a-1 is answered at once; b-1 and c-1, in flight meanwhile, later.
  TestServer server([](const Received& r) {
    const std::string id = r.header("webhook-id");
    if (id == "a-1") return Reply{503, {{"Retry-After", "5"}}, "", 0ms};
    return Reply{200, {}, "", id == "b-1" || id == "c-1" ? 300ms : 0ms};
  });
  HttpSink sink(
      Options{{"url", server.url()}, {"max_concurrency", "3"}, {"straggler.timeout.ms", "0"}});
  Batch b;
  for (int n = 1; n <= 2; ++n) {
    b.add("a", n);
    b.add("b", n);
    b.add("c", n);
  }
  b.add("d", 1);
  const std::vector<Outcome> out = send(sink, b);
  EXPECT_EQ(deliveries(b, out), (Expected{{"a-1", "unavailable"},
                                          {"a-2", "deferred"},
                                          {"b-1", "acked"},
                                          {"b-2", "deferred"},
                                          {"c-1", "acked"},
                                          {"c-2", "deferred"},
                                          {"d-1", "deferred"}}));
  EXPECT_NE(error_of(b, out, "a-1").find("the receiver asked to wait until 20"), std::string::npos)
      << error_of(b, out, "a-1");
  for (const char* id : {"b-2", "c-2", "d-1"}) {
    EXPECT_EQ(error_of(b, out, id), "not sent: the receiver asked to retry after 5 s") << id;
  }
  EXPECT_EQ(ids_of(server.requests()), (std::set<std::string>{"a-1", "b-1", "c-1"}));

  // Until then, nothing is sent: the batch is unavailable (the relay backs off).
  Batch next;
  next.add("e", 1);
  const std::vector<Outcome> later = send(sink, next);
  EXPECT_EQ(deliveries(next, later), (Expected{{"e-1", "unavailable"}}));
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(HttpSinkFailure, RefusedConnectionAcksNothing) {
  HttpSink sink(Options{{"url", "http://127.0.0.1:1/"}, {"max_concurrency", "1"}});
  Batch b;
  for (int n = 1; n <= 2; ++n) {
    b.add("a", n);
    b.add("b", n);
  }
  const std::vector<Outcome> out = send(sink, b);
  EXPECT_EQ(
      deliveries(b, out),
      (Expected{
          {"a-1", "unavailable"}, {"a-2", "deferred"}, {"b-1", "deferred"}, {"b-2", "deferred"}}));
  const std::string reason =
      "not sent: the receiver could not be reached (" + error_of(b, out, "a-1") + ")";
  EXPECT_EQ(error_of(b, out, "b-1"), reason);
  EXPECT_EQ(error_of(b, out, "b-2"), reason);

  // Several at once: each first request fails on its own, nothing is acked.
  HttpSink wide(Options{{"url", "http://127.0.0.1:1/"}});
  const std::vector<Outcome> all = send(wide, b);
  EXPECT_EQ(deliveries(b, all), (Expected{{"a-1", "unavailable"},
                                          {"a-2", "deferred"},
                                          {"b-1", "unavailable"},
                                          {"b-2", "deferred"}}));
}

TEST(HttpSinkFailure, PipelinedBatchesKeepEachKeysOrder) {
  // a-1 fails slowly, b-1 succeeds slowly: batch 2 is started while both are in flight.
  std::atomic<bool> b1_answered{false}, b1_answered_before_b2{false}, d1_overlapped{false};
  TestServer server([&](const Received& r) {
    const std::string id = r.header("webhook-id");
    if (id == "a-1" || id == "b-1") std::this_thread::sleep_for(300ms);
    if (id == "b-1") b1_answered = true;
    if (id == "b-2") b1_answered_before_b2 = b1_answered.load();
    if (id == "d-1") d1_overlapped = !b1_answered;
    return Reply{id == "a-1" ? 503 : 200, {}, "", 0ms};
  });
  // Waits for its slow requests (http_sink_straggler_test.cpp has the other way).
  HttpSink sink(Options{{"url", server.url()}, {"straggler.timeout.ms", "0"}});
  Batch one, two;
  for (const char* key : {"a", "b", "c", "x"}) one.add(key, 1);
  for (const char* key : {"a", "b", "c", "x"}) two.add(key, 2);
  two.add("d", 1);
  one.build();
  one.messages[3].type = "bad\x01type";  // x-1 cannot be sent: x-2 is deferred at start
  std::vector<Outcome> out1(one.ids.size()), out2(two.ids.size());
  sink.start(one.messages, out1, 10s);
  sink.start(two.build(), out2, 10s);
  sink.finish();
  EXPECT_EQ(
      deliveries(one, out1),
      (Expected{{"a-1", "unavailable"}, {"b-1", "acked"}, {"c-1", "acked"}, {"x-1", "rejected"}}));
  sink.finish();
  EXPECT_EQ(deliveries(two, out2), (Expected{{"a-2", "deferred"},
                                             {"b-2", "acked"},
                                             {"c-2", "acked"},
                                             {"x-2", "deferred"},
                                             {"d-1", "acked"}}));
  EXPECT_EQ(error_of(two, out2, "a-2"),
            "not sent: an earlier event of its key was not delivered (http: the receiver "
            "answered 503)");
  EXPECT_EQ(error_of(two, out2, "x-2").rfind("not sent: an earlier event of its key", 0), 0u);
  EXPECT_EQ(ids_of(server.requests()),
            (std::set<std::string>{"a-1", "b-1", "c-1", "b-2", "c-2", "d-1"}));
  EXPECT_TRUE(b1_answered_before_b2);  // one key, one request at a time
  EXPECT_TRUE(d1_overlapped);          // batch 2 went out while batch 1 waited
}

TEST(HttpSinkFailure, DestroyedWithBatchesStarted) {
  TestServer slow([](const Received&) { return Reply{200, {}, "", 300ms}; });
  auto sink = std::make_unique<HttpSink>(Options{{"url", slow.url()}});
  Batch one, two;
  one.add("a", 1);
  two.add("a", 2);
  std::vector<Outcome> out1(1), out2(1);
  sink->start(one.build(), out1, 10s);
  sink->start(two.build(), out2, 10s);
  sink.reset();  // forgets them: the outcomes are not touched
  EXPECT_EQ(out1[0].delivery, Delivery::kUnavailable);
  EXPECT_EQ(out1[0].error, "");
  EXPECT_EQ(out2[0].error, "");
}

}  // namespace
