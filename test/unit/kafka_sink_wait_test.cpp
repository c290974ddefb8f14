// The Kafka sink's pipeline and waits: batches started back to back keep per-key order,
// finish() waits for the oldest batch only, the purge after a timeout, and the relay's
// WaitObserver (it sees the client's errors during an outage and can end the wait).
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "kafka_test_support.hpp"
#include "test_support.hpp"
#include "sinks/kafka/kafka_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;
using outbox::test::kLongDeadline;
using outbox::test::wait_until;

// Pipelining: two batches started back to back, with the same keys, are acked and in the log
// in the order started, key by key.
TEST(KafkaSink, PipelinedBatchesKeepKeyOrder) {
  MockCluster cluster(3);
  auto sink = make_sink(cluster);
  Events first, second;
  for (int i = 0; i < 30; ++i) first.add("order", "k" + std::to_string(i % 6), "T", "{}");
  for (int i = 0; i < 30; ++i) second.add("order", "k" + std::to_string(i % 6), "T", "{}");
  const auto m1 = first.messages();
  const auto m2 = second.messages();
  std::vector<Outcome> o1(m1.size(), kUnset), o2(m2.size(), kUnset);

  sink->start(m1, o1, 10s);
  sink->start(m2, o2, 10s);
  sink->finish();
  EXPECT_EQ(summary(o1), std::string(30, 'A')) << first_error(o1);
  sink->finish();
  EXPECT_EQ(summary(o2), std::string(30, 'A')) << first_error(o2);
  sink->finish();  // nothing started: returns at once

  auto records = consume(cluster.bootstraps(), "outbox.event.order", 60);
  ASSERT_EQ(records.size(), 60u);
  // Within a key, offsets follow the order of the two batches.
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> by_key;
  for (const Record& r : records) by_key[r.key].emplace_back(r.offset, r.headers.at(0).second);
  for (int k = 0; k < 6; ++k) {
    auto& got = by_key["k" + std::to_string(k)];
    std::sort(got.begin(), got.end());
    std::vector<std::string> want, ids;
    for (const Events* events : {&first, &second}) {
      for (int i = k; i < 30; i += 6) want.push_back(events->data[i].id);
    }
    for (const auto& [offset, id] : got) ids.push_back(id);
    EXPECT_EQ(ids, want) << "k" << k;
  }
}

// finish() waits for the oldest batch only: it has all its outcomes while the next batch is
// still waiting (here for its partition's leader, a broker that is down; a partition without a
// leader would fail fast, see kafka_sink_leader_test.cpp).
TEST(KafkaSink, FinishCompletesTheOldestBatchWhileTheNextWaits) {
  MockCluster cluster(2);
  for (auto [topic, leader] : {std::pair{"outbox.event.order", 1}, {"outbox.event.slow", 2}}) {
    ASSERT_EQ(rd_kafka_mock_topic_create(cluster.get(), topic, 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    ASSERT_EQ(rd_kafka_mock_partition_set_leader(cluster.get(), topic, 0, leader),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  ASSERT_EQ(rd_kafka_mock_broker_set_down(cluster.get(), 2), RD_KAFKA_RESP_ERR_NO_ERROR);
  auto sink = make_sink(cluster);
  Events first, second;
  for (int i = 0; i < 10; ++i) first.add("order", "k" + std::to_string(i % 3), "T", "{}");
  for (int i = 0; i < 5; ++i) second.add("slow", "k" + std::to_string(i % 3), "T", "{}");
  const auto m1 = first.messages();
  const auto m2 = second.messages();
  std::vector<Outcome> o1(m1.size(), kUnset), o2(m2.size(), kUnset);

  // The second batch can end only by its deadline while its broker is down: finish()
  // returning before that deadline did not wait for it.
  const auto t0 = Clock::now();
  sink->start(m1, o1, kLongDeadline);
  sink->start(m2, o2, kLongDeadline);
  sink->finish();
  EXPECT_LT(Clock::now() - t0, kLongDeadline);
  EXPECT_EQ(summary(o1), std::string(10, 'A')) << first_error(o1);
  EXPECT_EQ(unset(o2), o2.size()) << summary(o2);

  ASSERT_EQ(rd_kafka_mock_broker_set_up(cluster.get(), 2), RD_KAFKA_RESP_ERR_NO_ERROR);
  sink->finish();
  EXPECT_EQ(summary(o2), std::string(5, 'A')) << first_error(o2);
  EXPECT_EQ(consume(cluster.bootstraps(), "outbox.event.slow", 5).size(), 5u);
}

// The relay may come to finish() after the batch's deadline (busy with the database): the
// acks that are in by then count.
TEST(KafkaSink, LateFinishCountsTheAcksThatAreIn) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");

  Events events;
  for (int i = 0; i < 5; ++i) events.add("order", "k", "T", "{}");
  const auto messages = events.messages();
  std::vector<Outcome> outcomes(messages.size(), kUnset);
  sink->start(messages, outcomes, 300ms);
  const auto started = Clock::now();  // the deadline was set before: it is past by then
  // Every delivery report served (librdkafka's out queue counts those not yet served too).
  ASSERT_TRUE(wait_until([&] { return rd_kafka_outq_len(sink->handle_for_testing()) == 0; }));
  std::this_thread::sleep_until(started + 300ms);
  sink->finish();
  EXPECT_EQ(summary(outcomes), "AAAAA") << first_error(outcomes);
}

// Brokers down with two batches started: each finish() returns by its batch's deadline with
// every outcome set. The first one's purge drops the second's queued messages, so a batch
// started behind them is not sent either. Once nothing is started, sending works again.
TEST(KafkaSink, BrokersDownWithTwoBatchesStarted) {
  MockCluster cluster(3);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");

  ASSERT_EQ(rd_kafka_mock_broker_set_down(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const Events first = four_keys(20), second = four_keys(20), third = four_keys(4);
  const auto m1 = first.messages();
  const auto m2 = second.messages();
  const auto m3 = third.messages();
  // On the heap, and freed once finished: ASan reports any later write.
  auto o1 = std::make_unique<std::vector<Outcome>>(m1.size(), kUnset);
  std::vector<Outcome> o2(m2.size(), kUnset), o3(m3.size(), kUnset);

  // The later batches' deadlines only bound a hang: what ends their waits is the purge.
  const auto t1 = Clock::now();
  sink->start(m1, *o1, 1000ms);
  std::this_thread::sleep_for(200ms);
  sink->start(m2, o2, kLongDeadline);
  std::this_thread::sleep_for(500ms);  // the relay fetches and marks meanwhile

  sink->finish();  // by the first batch's deadline, counted from its start(): not before it
  EXPECT_GE(Clock::now() - t1, 1000ms);
  EXPECT_TRUE(all_unavailable(*o1, "timed out waiting for delivery report after 1000 ms"));
  o1.reset();

  // Started behind the purged messages of the second batch: not sent.
  sink->start(m3, o3, kLongDeadline);

  sink->finish();
  EXPECT_EQ(unset(o2), 0u) << summary(o2);
  EXPECT_TRUE(all_unavailable(o2, ""));
  EXPECT_NE(first_error(o2).find("not sent: purged when an earlier batch timed out after 1000 ms"),
            std::string::npos)
      << first_error(o2);
  sink->finish();
  EXPECT_TRUE(all_unavailable(o3, "not sent: queued messages of an earlier batch were purged"));
  EXPECT_TRUE(sink->usable());

  ASSERT_EQ(rd_kafka_mock_broker_set_up(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  for (const Events* events : {&first, &second, &third}) {
    auto outcomes = send(*sink, *events, 15s);
    EXPECT_EQ(summary(outcomes), std::string(events->data.size(), 'A')) << first_error(outcomes);
  }
  // Queued copies were purged: each event is there once.
  auto records = consume(cluster.bootstraps(), "outbox.event.order", 45);
  EXPECT_EQ(records.size(), 45u);
  EXPECT_EQ(ids_of(records).size(), 45u);
}

// A WaitObserver that says stop once `stop` is set (from another thread, as a signal handler
// would set the relay's flag), and counts its calls, and those that said stop.
class StopObserver final : public WaitObserver {
 public:
  bool keep_waiting(std::string_view) noexcept override {
    ++calls;
    if (!stop) return true;
    ++stops;
    return false;
  }
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0};
  std::atomic<int> stops{0};
};

// The observer ends the wait for a broker that is down long before the batches' timeout;
// nothing acknowledged is lost, and nothing queued is sent twice afterwards.
TEST(KafkaSink, ObserverEndsTheWait) {
  MockCluster cluster(3);
  auto sink = make_sink(cluster);
  StopObserver observer;
  sink->observe_waits(&observer);
  ASSERT_EQ(warm_up(*sink), "A");

  ASSERT_EQ(rd_kafka_mock_broker_set_down(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const Events first = four_keys(20), second = four_keys(20);
  const auto m1 = first.messages();
  const auto m2 = second.messages();
  std::vector<Outcome> o1(m1.size(), kUnset), o2(m2.size(), kUnset);
  sink->start(m1, o1, kLongDeadline);
  sink->start(m2, o2, kLongDeadline);
  std::thread stopper([&observer] {
    // Once the wait has begun: the server's stop reaching the relay.
    wait_until([&observer] { return observer.calls > 0; });
    observer.stop = true;
  });
  sink->finish();
  // The observer ended the wait (not the deadline), at the first call after the stop.
  EXPECT_EQ(observer.stops, 1);
  sink->finish();
  stopper.join();
  EXPECT_TRUE(all_unavailable(o1, "not acknowledged: the relay stopped waiting"));
  EXPECT_EQ(unset(o2), 0u) << summary(o2);
  EXPECT_TRUE(all_unavailable(o2, ""));

  // Like a relay after its restart: the same events again, once the brokers are back.
  observer.stop = false;
  ASSERT_EQ(rd_kafka_mock_broker_set_up(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  for (const Events* events : {&first, &second}) {
    auto outcomes = send(*sink, *events, 15s);
    EXPECT_EQ(summary(outcomes), std::string(events->data.size(), 'A')) << first_error(outcomes);
  }
  auto records = consume(cluster.bootstraps(), "outbox.event.order", 41);
  EXPECT_EQ(records.size(), 41u);
  EXPECT_EQ(ids_of(records).size(), 41u);
}

// A stop seen on the first call ends the wait at once, without waiting 100 ms.
TEST(KafkaSink, ObserverStopAtOnce) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");
  StopObserver observer;
  observer.stop = true;
  sink->observe_waits(&observer);
  ASSERT_EQ(rd_kafka_mock_broker_set_down(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const Events events = four_keys(4);
  auto outcomes = send(*sink, events, kLongDeadline);
  EXPECT_EQ(observer.calls, 1);
  EXPECT_TRUE(all_unavailable(outcomes, "not acknowledged: the relay stopped waiting"));
  sink->observe_waits(nullptr);  // waits until the deadline again
  EXPECT_EQ(summary(send(*sink, events, 300ms)), "UUUU");
}

// What the relay shows during an outage: the observer hears of the brokers' trouble at least
// every 100 ms, long before the batch's timeout; the timeout's error says what the client saw.
TEST(KafkaSink, ObserverSeesBrokerTroubleBeforeTheTimeout) {
  class Recorder final : public WaitObserver {
   public:
    bool keep_waiting(std::string_view client_error) noexcept override {
      calls.push_back({Clock::now(), std::string(client_error)});
      return true;
    }
    std::vector<std::pair<Clock::time_point, std::string>> calls;
  };

  MockCluster cluster(3);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");
  Recorder recorder;
  sink->observe_waits(&recorder);
  ASSERT_EQ(rd_kafka_mock_broker_set_down(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const Events events = four_keys(8);
  const auto t0 = Clock::now();
  auto outcomes = send(*sink, events, 3000ms);
  EXPECT_GE(Clock::now() - t0, 3000ms);  // not before the deadline

  // Called again and again while it waits, and never more often than every 100 ms.
  ASSERT_GE(recorder.calls.size(), 2u);
  for (std::size_t i = 1; i < recorder.calls.size(); ++i) {
    EXPECT_GE(recorder.calls[i].first - recorder.calls[i - 1].first, 100ms) << i;
  }
  // The brokers' trouble reached it during the wait, before the timeout ended it.
  std::string seen;
  for (const auto& [at, error] : recorder.calls) {
    if (!error.empty()) {
      seen = error;
      break;
    }
  }
  EXPECT_FALSE(seen.empty()) << "no client error reached the observer";
  EXPECT_TRUE(seen.find("_TRANSPORT") != std::string::npos ||
              seen.find("_ALL_BROKERS_DOWN") != std::string::npos)
      << seen;
  EXPECT_TRUE(all_unavailable(outcomes,
                              "timed out waiting for delivery report after 3000 ms (last "
                              "client error: "))
      << first_error(outcomes);
  sink->observe_waits(nullptr);
}

}  // namespace
