// The Kafka sink against librdkafka's mock cluster in trouble: brokers down, timeouts, a full
// queue, late reports, fatal errors, and destruction while batches are started.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kafka_test_support.hpp"
#include "test_support.hpp"
#include "sinks/kafka/kafka_sink.hpp"

namespace {

using namespace outbox::sinks;
using namespace outbox::sinks::test;
using namespace std::chrono_literals;
using outbox::test::kLongDeadline;

TEST(KafkaSink, BrokersDownTimesOutThenRecovers) {
  MockCluster cluster(3);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");

  ASSERT_EQ(rd_kafka_mock_broker_set_down(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const Events events = four_keys(20);
  auto t0 = Clock::now();
  auto outcomes = send(*sink, events, 1500ms);
  auto took = Clock::now() - t0;
  EXPECT_EQ(summary(outcomes), std::string(20, 'U'));
  EXPECT_NE(first_error(outcomes).find("timed out waiting for delivery report"), std::string::npos)
      << first_error(outcomes);
  EXPECT_GE(took, 1500ms);  // not before the deadline; the error says the deadline ended it
  EXPECT_TRUE(sink->usable());

  // A second try while still down: the same, and nothing piles up.
  outcomes = send(*sink, events, 500ms);
  EXPECT_EQ(summary(outcomes), std::string(20, 'U'));

  ASSERT_EQ(rd_kafka_mock_broker_set_up(cluster.get(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  outcomes = send(*sink, events, 15s);
  EXPECT_EQ(summary(outcomes), std::string(20, 'A')) << first_error(outcomes);
  EXPECT_TRUE(sink->usable());

  // Queued copies of the timed-out tries were purged: each event is there once.
  auto records = consume(cluster.bootstraps(), "outbox.event.order", 21);
  EXPECT_EQ(records.size(), 21u);
}

TEST(KafkaSink, LongTransientErrorsTimeOutThenSucceed) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");

  // The ISR stays too small for longer than the send timeout: librdkafka keeps retrying
  // inside, the sink answers kUnavailable at the deadline and drops the queued retries.
  std::vector<rd_kafka_resp_err_t> errors(1000, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS);
  rd_kafka_mock_push_request_errors_array(cluster.get(), 0, errors.size(), errors.data());
  Events events;
  for (int i = 0; i < 6; ++i) events.add("order", "k" + std::to_string(i % 2), "T", "{}");
  auto outcomes = send(*sink, events, 800ms);
  EXPECT_EQ(summary(outcomes), "UUUUUU");
  EXPECT_TRUE(sink->usable());

  rd_kafka_mock_clear_request_errors(cluster.get(), 0);
  outcomes = send(*sink, events, 10s);
  EXPECT_EQ(summary(outcomes), "AAAAAA") << first_error(outcomes);
  EXPECT_TRUE(sink->usable());
  EXPECT_GE(consume(cluster.bootstraps(), "outbox.event.order", 7).size(), 7u);
}

TEST(KafkaSink, QueueFullStopsTheBatchInOrder) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster, {{"queue.buffering.max.messages", "4"}});
  ASSERT_EQ(warm_up(*sink), "A");

  rd_kafka_mock_broker_set_down(cluster.get(), -1);
  Events events;
  for (int i = 0; i < 8; ++i) events.add("order", "k", "T", "{}");
  auto outcomes = send(*sink, events, 600ms);
  EXPECT_EQ(summary(outcomes), "UUUUUUUU");
  EXPECT_NE(outcomes[4].error.find("QUEUE_FULL"), std::string::npos) << outcomes[4].error;
  EXPECT_NE(outcomes[5].error.find("not sent: an earlier message"), std::string::npos)
      << outcomes[5].error;
  EXPECT_NE(outcomes[0].error.find("timed out"), std::string::npos) << outcomes[0].error;

  rd_kafka_mock_broker_set_up(cluster.get(), -1);
  events.data.resize(4);
  outcomes = send(*sink, events, 10s);
  EXPECT_EQ(summary(outcomes), "AAAA") << first_error(outcomes);
}

TEST(KafkaSink, DestroyWhileBrokersDownIsQuick) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  Events events;
  events.add("order", "w", "T", "{}");
  ASSERT_EQ(summary(send(*sink, events, 10s)), "A");
  rd_kafka_mock_broker_set_down(cluster.get(), -1);
  for (int i = 0; i < 50; ++i) events.add("order", "k", "T", "{}");
  EXPECT_EQ(summary(send(*sink, events, 300ms)), std::string(51, 'U'));
  // Not librdkafka's message.timeout.ms (300 s): the queued messages are purged.
  auto t0 = Clock::now();
  sink.reset();
  EXPECT_LT(Clock::now() - t0, kLongDeadline);
}

TEST(KafkaSink, LateReportsOfATimedOutBatchAreIgnored) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");

  // Answers take 700 ms: the first batch times out while in flight.
  rd_kafka_mock_broker_set_rtt(cluster.get(), -1, 700);
  Events first;
  for (int i = 0; i < 5; ++i) first.add("order", "k", "T", "{}");
  auto outcomes = send(*sink, first, 200ms);
  EXPECT_EQ(summary(outcomes), "UUUUU");

  rd_kafka_mock_broker_set_rtt(cluster.get(), -1, 0);
  Events second;
  second.add("order", "k", "T", "{}");
  second.add("order", "bad key topic", "T", "{}");
  second.data[1].aggregatetype = "bad/topic";
  outcomes = send(*sink, second, 10s);
  EXPECT_EQ(summary(outcomes), "AR") << first_error(outcomes);
}

TEST(KafkaSink, FatalErrorMakesItUnusable) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  Events events;
  events.add("order", "1", "T", "{}");
  ASSERT_EQ(summary(send(*sink, events, 10s)), "A");

  ASSERT_EQ(rd_kafka_test_fatal_error(sink->handle_for_testing(),
                                      RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "injected"),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  auto outcomes = send(*sink, events, 5s);
  EXPECT_EQ(summary(outcomes), "U");
  EXPECT_NE(first_error(outcomes).find("fatal"), std::string::npos) << first_error(outcomes);
  EXPECT_NE(first_error(outcomes).find("OUT_OF_ORDER_SEQUENCE_NUMBER"), std::string::npos)
      << first_error(outcomes);
  EXPECT_FALSE(sink->usable());
  // It stays so, and answers with the fatal error, not at the deadline.
  outcomes = send(*sink, events, kLongDeadline);
  EXPECT_EQ(summary(outcomes), "U");
  EXPECT_NE(first_error(outcomes).find("fatal"), std::string::npos) << first_error(outcomes);
  EXPECT_FALSE(sink->usable());
}

TEST(KafkaSink, FatalSequenceErrorFromTheBroker) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  Events events;
  events.add("order", "1", "T", "{}");
  ASSERT_EQ(summary(send(*sink, events, 10s)), "A");

  rd_kafka_mock_push_request_errors(cluster.get(), 0, 1,
                                    RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
  auto outcomes = send(*sink, events, 5s);
  EXPECT_EQ(summary(outcomes), "U") << first_error(outcomes);
  EXPECT_FALSE(sink->usable()) << first_error(outcomes);
}

// A message of the first batch cannot be queued: the second batch, started while the first is
// unfinished, is not sent at all (it could overtake that message in its key).
TEST(KafkaSink, QueueFullHoldsBackTheNextBatch) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster, {{"queue.buffering.max.messages", "4"}});
  ASSERT_EQ(warm_up(*sink), "A");

  rd_kafka_mock_broker_set_down(cluster.get(), -1);
  Events first, second, third;
  for (int i = 0; i < 8; ++i) first.add("order", "k", "T", "{}");
  for (int i = 0; i < 4; ++i) second.add("order", "k", "T", "{}");
  for (int i = 0; i < 4; ++i) third.add("order", "k", "T", "{}");
  const auto m1 = first.messages();
  const auto m2 = second.messages();
  std::vector<Outcome> o1(m1.size(), kUnset), o2(m2.size(), kUnset);

  sink->start(m1, o1, 600ms);  // the sink's thread waits for room until the deadline
  std::this_thread::sleep_for(800ms);

  // The first four go out now: the queue would have room for the second batch.
  rd_kafka_mock_broker_set_up(cluster.get(), -1);
  std::this_thread::sleep_for(1s);
  sink->start(m2, o2, 10s);

  sink->finish();
  EXPECT_EQ(unset(o1), 0u) << summary(o1);
  EXPECT_EQ(summary(o1).substr(4), "UUUU");
  EXPECT_NE(o1[4].error.find("QUEUE_FULL"), std::string::npos) << o1[4].error;
  EXPECT_NE(o1[7].error.find("not sent: an earlier message of the batch"), std::string::npos)
      << o1[7].error;
  sink->finish();
  EXPECT_TRUE(all_unavailable(o2, "not sent: an earlier message could not be queued"));
  EXPECT_TRUE(all_unavailable(o2, "QUEUE_FULL"));

  // Nothing started any more: the next batch goes out.
  auto outcomes = send(*sink, third, 10s);
  EXPECT_EQ(summary(outcomes), "AAAA") << first_error(outcomes);
  const auto ids = ids_of(consume(cluster.bootstraps(), "outbox.event.order", 9));
  for (const auto& d : second.data) EXPECT_EQ(ids.count(d.id), 0u) << d.id;
  for (const auto& d : third.data) EXPECT_EQ(ids.count(d.id), 1u) << d.id;
}

TEST(KafkaSink, FatalErrorFailsEveryStartedBatch) {
  MockCluster cluster(1);
  auto sink = make_sink(cluster);
  ASSERT_EQ(warm_up(*sink), "A");

  rd_kafka_mock_broker_set_rtt(cluster.get(), -1, 1000);  // no ack before the fatal error
  Events first, second;
  for (int i = 0; i < 5; ++i) first.add("order", "k", "T", "{}");
  for (int i = 0; i < 5; ++i) second.add("order", "k", "T", "{}");
  const auto m1 = first.messages();
  const auto m2 = second.messages();
  std::vector<Outcome> o1(m1.size(), kUnset), o2(m2.size(), kUnset);
  // Their deadlines only bound a hang: the fatal error ends the waits.
  sink->start(m1, o1, kLongDeadline);
  sink->start(m2, o2, kLongDeadline);
  ASSERT_EQ(rd_kafka_test_fatal_error(sink->handle_for_testing(),
                                      RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "injected"),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  sink->finish();
  EXPECT_TRUE(all_unavailable(o1, "fatal producer error"));
  // The second batch's outcomes are in already.
  EXPECT_TRUE(all_unavailable(o2, "fatal producer error"));
  sink->finish();
  EXPECT_TRUE(all_unavailable(o2, "fatal producer error"));
  EXPECT_FALSE(sink->usable());
}

// The relay may destroy the sink between start() and finish(), and then frees the batches'
// messages and outcomes. Destruction stops the sink's thread, also in the middle of queuing
// a batch, and nothing reads the messages or writes the outcomes afterwards (ASan would
// report it).
TEST(KafkaSink, DestroyWithBatchesStarted) {
  MockCluster cluster(1);
  for (bool brokers_down : {false, true}) {
    for (auto pause : {0ms, 300ms}) {
      auto sink = make_sink(cluster);
      ASSERT_EQ(warm_up(*sink), "A");
      if (brokers_down) rd_kafka_mock_broker_set_down(cluster.get(), -1);

      Events first, second;
      for (int i = 0; i < 2000; ++i) first.add("order", "k" + std::to_string(i % 3), "T", "{}");
      for (int i = 0; i < 20; ++i) second.add("order", "k" + std::to_string(i % 3), "T", "{}");
      auto m1 = std::make_unique<std::vector<Message>>(first.messages());
      auto m2 = std::make_unique<std::vector<Message>>(second.messages());
      auto o1 = std::make_unique<std::vector<Outcome>>(m1->size(), kUnset);
      auto o2 = std::make_unique<std::vector<Outcome>>(m2->size(), kUnset);
      sink->start(*m1, *o1, kLongDeadline);
      sink->start(*m2, *o2, kLongDeadline);
      std::this_thread::sleep_for(pause);  // 300 ms: the acks are in (brokers up)
      auto t0 = Clock::now();
      sink.reset();
      EXPECT_LT(Clock::now() - t0, kLongDeadline) << brokers_down;  // not the batches' deadline
      o1.reset();
      o2.reset();
      m1.reset();
      m2.reset();
      first.data.clear();
      second.data.clear();
      std::this_thread::sleep_for(50ms);
      if (brokers_down) rd_kafka_mock_broker_set_up(cluster.get(), -1);
    }
  }
}

}  // namespace
