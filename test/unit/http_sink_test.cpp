// The HTTP sink against a loopback server (http_test_server.hpp): what each response makes of
// an event, Retry-After, redirects, per-key order and deferral, the request's headers and
// signature, connection reuse, time limits and the relay's observer.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "http_test_support.hpp"
#include "sinks/http/http_sink.hpp"
#include "sinks/http/webhook_signature.hpp"

namespace {

using namespace outbox::sinks;
using outbox::test::Batch;
using outbox::test::ids_of;
using outbox::test::Received;
using outbox::test::Reply;
using outbox::test::send;
using outbox::test::TestServer;
using namespace std::chrono_literals;

Outcome one(Sink& sink, const std::string& key) {
  Batch b;
  b.add(key, 1);
  return send(sink, b)[0];
}

TEST(HttpSink, StatusesToOutcomes) {
  TestServer server([](const Received& r) {
    Reply reply;
    reply.status = std::stoi(r.header("outbox-aggregateid"));
    if (reply.status == 410) reply.body = "gone\r\n\x01 for good";
    return reply;
  });
  HttpSink sink(Options{{"url", server.url("/hook")}});
  EXPECT_EQ(one(sink, "200").delivery, Delivery::kAcked);
  EXPECT_EQ(one(sink, "204").delivery, Delivery::kAcked);
  const Outcome gone = one(sink, "410");
  EXPECT_EQ(gone.delivery, Delivery::kRejected);
  EXPECT_EQ(gone.error, "http: the receiver answered 410: gone    for good");
  EXPECT_EQ(one(sink, "400").delivery, Delivery::kRejected);
  for (const char* status : {"408", "429", "500", "503"}) {
    const Outcome o = one(sink, status);
    EXPECT_EQ(o.delivery, Delivery::kUnavailable) << status;
    EXPECT_EQ(o.error, std::string("http: the receiver answered ") + status);
  }
  EXPECT_EQ(server.requests().size(), 8u);
}

TEST(HttpSink, RetryAfterHoldsEveryRequestBack) {
  std::atomic<int> calls{0};
  TestServer server([&](const Received&) {
    ++calls;
    return Reply{503, {{"Retry-After", "30"}}, "", 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}});
  const Outcome first = one(sink, "a");
  EXPECT_EQ(first.delivery, Delivery::kUnavailable);
  EXPECT_NE(first.error.find("the receiver asked to wait until 20"), std::string::npos)
      << first.error;
  Batch b;
  b.add("b", 1);
  b.add("c", 1);
  for (const Outcome& o : send(sink, b)) {
    EXPECT_EQ(o.delivery, Delivery::kUnavailable);
    EXPECT_NE(o.error.find("the receiver asked to wait until 20"), std::string::npos) << o.error;
  }
  EXPECT_EQ(calls.load(), 1);  // nothing was sent while it waits
}

TEST(HttpSink, RetryAfterAsAnHttpDate) {
  TestServer server([](const Received&) {
    return Reply{429, {{"Retry-After", "Wed, 21 Oct 2099 07:28:00 GMT"}}, "", 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}});
  const Outcome o = one(sink, "a");
  EXPECT_EQ(o.delivery, Delivery::kUnavailable);
  // Cut to an hour from now, not 2099.
  EXPECT_NE(o.error.find("the receiver asked to wait until 20"), std::string::npos) << o.error;
  EXPECT_EQ(o.error.find("2099"), std::string::npos) << o.error;
}

TEST(HttpSink, RedirectIsNotFollowed) {
  TestServer server([](const Received&) {
    return Reply{302, {{"Location", "http://127.0.0.1:1/elsewhere"}}, "", 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}});
  const Outcome o = one(sink, "a");
  EXPECT_EQ(o.delivery, Delivery::kRejected);
  EXPECT_EQ(o.error,
            "http: the receiver answered 302, a redirect to http://127.0.0.1:1/elsewhere, not "
            "followed (follow_redirects is false)");
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(HttpSink, RedirectFollowedWhenAsked) {
  TestServer target;
  TestServer server([&](const Received&) {
    return Reply{307, {{"Location", target.url("/moved")}}, "", 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}, {"follow_redirects", "true"}});
  EXPECT_EQ(one(sink, "a").delivery, Delivery::kAcked);
  ASSERT_EQ(target.requests().size(), 1u);
  EXPECT_EQ(target.requests()[0].method, "POST");
  EXPECT_EQ(target.requests()[0].body, "{\"n\": 1}");
}

TEST(HttpSink, PerKeyOrderAndDeferral) {
  // a-2 is refused; b's first request is slow, so keys run side by side.
  TestServer server([](const Received& r) {
    Reply reply;
    if (r.header("webhook-id") == "a-2") reply.status = 410;
    if (r.header("webhook-id") == "b-1") reply.delay = 500ms;
    return reply;
  });
  HttpSink sink(Options{{"url", server.url("/${aggregatetype}/${aggregateid}")},
                        {"straggler.timeout.ms", "0"}});  // waits for b-1
  Batch b;
  for (int n = 1; n <= 4; ++n) {
    b.add("a", n);
    b.add("b", n);
    b.add("c", n);
  }
  const std::vector<Outcome> outcomes = send(sink, b);
  for (std::size_t i = 0; i < b.ids.size(); ++i) {
    const std::string& id = b.ids[i];
    if (id == "a-1" || b.keys[i] != "a") {
      EXPECT_EQ(outcomes[i].delivery, Delivery::kAcked) << id;
    } else if (id == "a-2") {
      EXPECT_EQ(outcomes[i].delivery, Delivery::kRejected) << id;
    } else {
      EXPECT_EQ(outcomes[i].delivery, Delivery::kDeferred) << id;
      EXPECT_EQ(outcomes[i].error,
                "not sent: an earlier event of its key was not delivered (http: the receiver "
                "answered 410)");
    }
  }
  const std::vector<Received> requests = server.requests();
  EXPECT_EQ(ids_of(requests), (std::set<std::string>{"a-1", "a-2", "b-1", "b-2", "b-3", "b-4",
                                                     "c-1", "c-2", "c-3", "c-4"}));
  // Per key, in order; and c did not wait for the slow b-1.
  std::map<std::string, std::vector<std::string>> per_key;
  for (const Received& r : requests)
    per_key[r.header("outbox-aggregateid")].push_back(r.header("webhook-id"));
  EXPECT_EQ(per_key["b"], (std::vector<std::string>{"b-1", "b-2", "b-3", "b-4"}));
  EXPECT_EQ(per_key["c"], (std::vector<std::string>{"c-1", "c-2", "c-3", "c-4"}));
  const auto pos = [&](const std::string& id) {
    return std::find_if(requests.begin(), requests.end(),
                        [&](const Received& r) { return r.header("webhook-id") == id; }) -
           requests.begin();
  };
  EXPECT_LT(pos("c-4"), pos("b-2"));
  EXPECT_EQ(requests[0].target.substr(0, 7), "/order/");
}

TEST(HttpSink, UnavailableHoldsOnlyItsKey) {
  TestServer server([](const Received& r) {
    return Reply{r.header("webhook-id") == "a-1" ? 500 : 200, {}, "", 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}, {"max_concurrency", "1"}});
  Batch b;
  b.add("a", 1);
  b.add("a", 2);
  b.add("b", 1);
  b.add("b", 2);
  const std::vector<Outcome> outcomes = send(sink, b);
  EXPECT_EQ(outcomes[0].delivery, Delivery::kUnavailable);
  EXPECT_EQ(outcomes[0].error, "http: the receiver answered 500");
  EXPECT_EQ(outcomes[1].delivery, Delivery::kDeferred);
  EXPECT_EQ(outcomes[1].error,
            "not sent: an earlier event of its key was not delivered (http: the receiver "
            "answered 500)");
  EXPECT_EQ(outcomes[2].delivery, Delivery::kAcked) << outcomes[2].error;
  EXPECT_EQ(outcomes[3].delivery, Delivery::kAcked) << outcomes[3].error;
  EXPECT_EQ(ids_of(server.requests()), (std::set<std::string>{"a-1", "b-1", "b-2"}));
}

TEST(HttpSink, HeadersAndSignature) {
  TestServer server;
  const std::string key = "0123456789abcdef0123";
  HttpSink sink(Options{{"url", server.url()},
                        {"secret", "whsec_" + webhook::base64_encode(key) + " whsec_" +
                                       webhook::base64_encode("second")}});
  Batch b;
  b.add("k", 1);
  b.build();
  b.messages[0].headers = {{"tenant", "t1"}, {"bad name", "x"}, {"empty", ""}, {"crlf", "a\r\nb"}};
  std::vector<Outcome> outcomes(1);
  sink.send(b.messages, outcomes, 10s);
  ASSERT_EQ(outcomes[0].delivery, Delivery::kAcked) << outcomes[0].error;
  ASSERT_EQ(server.requests().size(), 1u);
  const Received r = server.requests()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.body, "{\"n\": 1}");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("webhook-id"), "k-1");
  const std::string ts = r.header("webhook-timestamp");
  EXPECT_LE(std::abs(std::stol(ts) - static_cast<long>(std::time(nullptr))), 5);
  EXPECT_EQ(r.header("webhook-signature"), "v1," + webhook::sign(key, "k-1", ts, r.body) + " v1," +
                                               webhook::sign("second", "k-1", ts, r.body));
  EXPECT_EQ(r.header("outbox-type"), "OrderCreated");
  EXPECT_EQ(r.header("outbox-aggregatetype"), "order");
  EXPECT_EQ(r.header("outbox-aggregateid"), "k");
  EXPECT_EQ(r.header("outbox-header-tenant"), "t1");
  EXPECT_EQ(r.headers.count("outbox-header-empty"), 1u);
  EXPECT_EQ(r.headers.count("outbox-header-crlf"), 0u);
  EXPECT_EQ(r.headers.count("expect"), 0u);
  EXPECT_EQ(r.headers.count("ce-id"), 0u);
}

TEST(HttpSink, NoSecretNoSignature) {
  TestServer server;
  HttpSink sink(Options{{"url", server.url()}});
  ASSERT_EQ(one(sink, "k").delivery, Delivery::kAcked);
  EXPECT_EQ(server.requests()[0].headers.count("webhook-signature"), 0u);
  EXPECT_EQ(server.requests()[0].header("webhook-id"), "k-1");
}

TEST(HttpSink, CloudEventsBinaryMode) {
  TestServer server;
  HttpSink sink(
      Options{{"url", server.url()}, {"cloudevents", "true"}, {"cloudevents.source", "/shop"}});
  ASSERT_EQ(one(sink, "k").delivery, Delivery::kAcked);
  const Received r = server.requests()[0];
  EXPECT_EQ(r.header("ce-specversion"), "1.0");
  EXPECT_EQ(r.header("ce-id"), "k-1");
  EXPECT_EQ(r.header("ce-source"), "/shop");
  EXPECT_EQ(r.header("ce-type"), "OrderCreated");
  EXPECT_EQ(r.header("ce-subject"), "k");
  EXPECT_EQ(r.header("ce-time"), "2025-12-01T16:41:02.123456Z");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("webhook-id"), "k-1");
}

TEST(HttpSink, ConnectionsAreReusedAcrossBatches) {
  TestServer server;
  HttpSink sink(Options{{"url", server.url()}, {"max_concurrency", "2"}});
  std::set<std::string> sent;
  for (int batch = 0; batch < 5; ++batch) {
    Batch b;
    for (int n = 1; n <= 20; ++n)
      b.add("k" + std::to_string(n % 5) + "b" + std::to_string(batch), n);
    for (const Outcome& o : send(sink, b)) EXPECT_EQ(o.delivery, Delivery::kAcked);
    sent.insert(b.ids.begin(), b.ids.end());
  }
  EXPECT_EQ(ids_of(server.requests()), sent);
  EXPECT_LE(server.connections(), 2);
}

// A credential in the URL would be stored in clear: the sink itself refuses it too.
TEST(HttpSink, UserinfoIsRefused) {
  EXPECT_THROW(HttpSink(Options{{"url", "http://a@127.0.0.1:1/"}}), ConfigError);
  EXPECT_THROW(HttpSink(Options{{"url", "http://a:b@127.0.0.1:1/"}}), ConfigError);
}

TEST(HttpSink, ServerErrorBodyAndRedirectToAProtocolNotAllowed) {
  TestServer server([](const Received& r) {
    if (r.header("outbox-aggregateid") == "ftp") {
      return Reply{302, {{"Location", "ftp://127.0.0.1/x"}}, "", 0ms};
    }
    return Reply{500, {}, "database\tdown", 0ms};
  });
  HttpSink sink(Options{{"url", server.url()}, {"follow_redirects", "true"}});
  EXPECT_EQ(one(sink, "k").error, "http: the receiver answered 500: database down");
  // curl may follow http(s) only (CURLOPT_REDIR_PROTOCOLS_STR): the event is rejected.
  const Outcome o = one(sink, "ftp");
  EXPECT_EQ(o.delivery, Delivery::kRejected) << o.error;
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpSink, RefusedConnectionAndTimeout) {
  HttpSink refused(Options{{"url", "http://127.0.0.1:1/"}});
  const Outcome o = one(refused, "k");
  EXPECT_EQ(o.delivery, Delivery::kUnavailable);
  EXPECT_NE(o.error.find("http: "), std::string::npos);

  TestServer slow([](const Received&) { return Reply{200, {}, "", 1500ms}; });
  HttpSink sink(Options{{"url", slow.url()}, {"timeout.ms", "200"}});
  const Outcome late = one(sink, "k");
  EXPECT_EQ(late.delivery, Delivery::kUnavailable);
  EXPECT_NE(late.error.find("timed out"), std::string::npos) << late.error;
}

class Observer : public WaitObserver {
 public:
  bool keep_waiting(std::string_view) noexcept override { return ++calls < 3; }
  int calls = 0;
};

TEST(HttpSink, StopsWhenTheRelayStopsWaiting) {
  TestServer slow([](const Received&) { return Reply{200, {}, "", 1500ms}; });
  HttpSink sink(Options{{"url", slow.url()}});
  Observer observer;
  sink.observe_waits(&observer);
  Batch b;
  b.add("a", 1);
  b.add("a", 2);
  const std::vector<Outcome> outcomes = send(sink, b);  // not the reply's 1.5 s: see the error
  EXPECT_EQ(outcomes[0].delivery, Delivery::kUnavailable);
  EXPECT_EQ(outcomes[0].error, "not acknowledged: the relay stopped waiting");
  EXPECT_EQ(outcomes[1].delivery, Delivery::kDeferred);
  EXPECT_EQ(observer.calls, 3);
}

TEST(HttpSink, SignalMaskIsRestored) {
  TestServer server;
  HttpSink sink(Options{{"url", "http://localhost:" + std::to_string(server.port()) + "/"}});
  sigset_t before, after;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  ASSERT_EQ(one(sink, "k").delivery, Delivery::kAcked);  // a name lookup: the resolver thread
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  for (int sig = 1; sig < NSIG; ++sig) {
    EXPECT_EQ(sigismember(&before, sig), sigismember(&after, sig)) << sig;
  }
}

// The ids of this process's threads.
std::set<std::string> thread_ids() {
  std::set<std::string> ids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return ids;
  while (dirent* entry = readdir(dir)) {
    const std::string tid = entry->d_name;
    if (tid != "." && tid != "..") ids.insert(tid);
  }
  closedir(dir);
  return ids;
}

// The signals thread `tid` blocks (SigBlk of its status), or nothing once it has exited.
std::optional<unsigned long long> blocked_signals(const std::string& tid) {
  std::ifstream status("/proc/self/task/" + tid + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return std::nullopt;
}

// While send() waits for a name lookup, every other thread of the process (curl's resolver
// thread) must have the signals PostgreSQL handles blocked. A thread samples every thread's
// mask each 200 us (without the sink's blocking, the resolver thread shows mask 0). Skipped
// when no resolver thread was seen.
TEST(HttpSink, ResolverThreadsStartWithSignalsBlocked) {
  HttpSink sink(Options{{"url", "http://outbox-test.invalid/"}, {"timeout.ms", "2000"}});
  // Threads that are there before the sink resolves (left by earlier tests in this process,
  // the test's own) are not the resolver's: only threads that appear later are judged.
  const std::set<std::string> before = thread_ids();
  std::atomic<bool> stop{false};
  std::map<std::string, std::vector<unsigned long long>> masks;  // every sample of each thread
  std::atomic<int> masks_seen{0};
  std::thread sampler([&] {
    const std::string self = std::to_string(gettid());
    while (!stop) {
      for (const std::string& tid : thread_ids()) {
        if (tid == self || before.count(tid) > 0) continue;
        if (auto mask = blocked_signals(tid)) {
          masks[tid].push_back(*mask);
          ++masks_seen;
        }
      }
      usleep(200);
    }
  });
  // A lookup may end before the sampler looks: try until a resolver thread was seen.
  for (int i = 0; i < 200 && masks_seen == 0; ++i) {
    EXPECT_EQ(one(sink, "k").delivery, Delivery::kUnavailable);
  }
  stop = true;
  sampler.join();
  if (masks.empty()) GTEST_SKIP() << "the lookup ended before a thread was seen";
  // A thread's every sample counts: a resolver thread must never run with one unblocked.
  for (const auto& [tid, samples] : masks) {
    for (unsigned long long mask : samples) {
      for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD}) {
        EXPECT_TRUE(mask & (1ULL << (sig - 1)))
            << "thread " << tid << ": signal " << sig << " not blocked: " << std::hex << mask;
      }
    }
  }
}

}  // namespace
