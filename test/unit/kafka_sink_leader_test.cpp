// The Kafka sink while one partition has no leader: the other partitions' keys keep flowing,
// the partition's keys fail fast (or, queued before the producer knew, as stragglers) and are
// held back in order; after the leader is back they are delivered, in order.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
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

constexpr const char* kTopic = "outbox.event.order";
constexpr int kKeys = 16;

std::string key(int k) { return "k" + std::to_string(k); }

// `rounds` events per key, keys interleaved: k0 k1 ... k15 k0 k1 ...
Events rounds_of(int rounds) {
  Events events;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < kKeys; ++k) events.add("order", key(k), "T", "{}");
  }
  return events;
}

// Per message: what it should be, given whether its key's partition is leaderless (`down`),
// with each down key's first message `first` and its later ones `later`.
std::string expected(const Events& events, int32_t down, char first, char later) {
  std::string want;
  std::set<std::string> seen;
  for (const auto& d : events.data) {
    if (java_partition(d.aggregateid, 4) != down) {
      want += 'A';
    } else {
      want += seen.insert(d.aggregateid).second ? first : later;
    }
  }
  return want;
}

TEST(KafkaSinkLeader, LeaderlessPartitionHoldsOnlyItsKeys) {
  MockCluster cluster(3);
  ASSERT_EQ(rd_kafka_mock_topic_create(cluster.get(), kTopic, 4, 3), RD_KAFKA_RESP_ERR_NO_ERROR);
  auto sink = make_sink(cluster);
  const int32_t down = java_partition(key(0), 4);

  // Healthy: the producer has the topic's metadata.
  const Events warm = rounds_of(1);
  ASSERT_EQ(summary(send(*sink, warm, 10s)), std::string(kKeys, 'A'));
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(cluster.get(), kTopic, down, -1),
            RD_KAFKA_RESP_ERR_NO_ERROR);

  // The producer does not know yet: the partition's messages are queued, then wait. Once the
  // rest is acked, they are stragglers, long before the send timeout (their error says so).
  const Events b1 = rounds_of(3);
  auto o1 = send(*sink, b1, kLongDeadline);
  EXPECT_EQ(summary(o1), expected(b1, down, 'U', 'U'));
  for (std::size_t i = 0; i < o1.size(); ++i) {
    if (o1[i].delivery == Delivery::kUnavailable) {
      EXPECT_NE(o1[i].error.find("straggler.timeout.ms"), std::string::npos) << o1[i].error;
    }
  }

  // Now it knows: the partition's first message of each key fails at once, its later ones
  // (in the batch, and in the batch started behind it) are deferred; the other keys flow.
  const Events b2 = rounds_of(3), b3 = rounds_of(2);
  const auto m2 = b2.messages();
  const auto m3 = b3.messages();
  std::vector<Outcome> o2(m2.size(), kUnset), o3(m3.size(), kUnset);
  sink->start(m2, o2, kLongDeadline);
  sink->start(m3, o3, kLongDeadline);
  sink->finish();
  sink->finish();
  EXPECT_EQ(summary(o2), expected(b2, down, 'U', 'D'));
  EXPECT_EQ(summary(o3), expected(b3, down, 'D', 'D'));
  const std::string no_leader =
      "partition " + std::to_string(down) + " of topic " + kTopic + " has no leader";
  for (std::size_t i = 0; i < o2.size(); ++i) {
    if (o2[i].delivery == Delivery::kUnavailable) {
      EXPECT_EQ(o2[i].error, no_leader);
    }
    if (o2[i].delivery == Delivery::kDeferred) {
      EXPECT_EQ(o2[i].error,
                "not sent: an earlier event of its key was not delivered: " + no_leader);
    }
  }
  EXPECT_TRUE(sink->usable());

  // The leader is back. Like the relay: what was not acked is sent again, in order, until it is.
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(cluster.get(), kTopic, down, 1),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  Events retry;
  for (const auto& [batch, outcomes] : {std::pair{&b1, &o1}, {&b2, &o2}, {&b3, &o3}}) {
    for (std::size_t i = 0; i < outcomes->size(); ++i) {
      if ((*outcomes)[i].delivery != Delivery::kAcked) retry.data.push_back(batch->data[i]);
    }
  }
  const std::size_t retried = retry.data.size();
  ASSERT_GT(retried, 0u);
  std::string got;
  for (int attempt = 0; attempt < 20; ++attempt) {
    got = summary(send(*sink, retry, 10s));
    if (got == std::string(retried, 'A')) break;
    std::this_thread::sleep_for(300ms);  // librdkafka learns of the leader within ~1 s
  }
  EXPECT_EQ(got, std::string(retried, 'A'));

  // Every key's events in the log, in order (a straggler may be there twice: at least once).
  std::size_t total = 0;
  for (const Events* e : {&warm, &b1, &b2, &b3}) total += e->data.size();
  // A straggler sent twice fills a count of records early: count the distinct ids.
  auto records = consume(cluster.bootstraps(), kTopic, total, 10s, Count::kDistinctIds);
  std::map<int32_t, std::vector<Record>> by_partition;
  for (Record& r : records) by_partition[r.partition].push_back(std::move(r));
  std::map<std::string, std::vector<std::string>> ids_by_key;
  for (auto& [partition, list] : by_partition) {
    std::sort(list.begin(), list.end(),
              [](const Record& a, const Record& b) { return a.offset < b.offset; });
    std::set<std::string> seen;
    for (const Record& r : list) {
      EXPECT_EQ(partition, java_partition(r.key, 4)) << r.key;
      if (seen.insert(r.headers.at(0).second).second) {
        ids_by_key[r.key].push_back(r.headers.at(0).second);
      }
    }
  }
  for (int k = 0; k < kKeys; ++k) {
    std::vector<std::string> want;
    for (const Events* e : {&warm, &b1, &b2, &b3}) {
      for (const auto& d : e->data) {
        if (d.aggregateid == key(k)) want.push_back(d.id);
      }
    }
    EXPECT_EQ(ids_by_key[key(k)], want) << key(k);
  }
}

// Batches queued before the producer knew wait for the partition; once a later batch finds it
// without a leader, they are stragglers after kLeaderLostPatience, not straggler.timeout.ms.
TEST(KafkaSinkLeader, ALeaderLossEndsTheWaitForStragglersSoon) {
  MockCluster cluster(3);
  ASSERT_EQ(rd_kafka_mock_topic_create(cluster.get(), kTopic, 4, 3), RD_KAFKA_RESP_ERR_NO_ERROR);
  // An hour: only kLeaderLostPatience can end the wait before the batches' deadline.
  auto sink = make_sink(cluster, {{"straggler.timeout.ms", "3600000"}});
  const int32_t down = java_partition(key(0), 4);
  const Events warm = rounds_of(1);
  ASSERT_EQ(summary(send(*sink, warm, 10s)), std::string(kKeys, 'A'));
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(cluster.get(), kTopic, down, -1),
            RD_KAFKA_RESP_ERR_NO_ERROR);

  const Events b1 = rounds_of(2);
  const auto m1 = b1.messages();
  std::vector<Outcome> o1(m1.size(), kUnset);
  sink->start(m1, o1, kLongDeadline);
  // Later batches, as the relay would start them, until the producer learns of the loss.
  std::vector<Events> probes(6, rounds_of(1));
  std::vector<std::vector<Message>> pm;
  std::vector<std::vector<Outcome>> po;
  for (const Events& p : probes) pm.push_back(p.messages());
  for (const auto& m : pm) po.emplace_back(m.size(), kUnset);
  for (std::size_t k = 0; k < pm.size(); ++k) {
    std::this_thread::sleep_for(500ms);
    sink->start(pm[k], po[k], kLongDeadline);
  }
  sink->finish();
  EXPECT_EQ(summary(o1), expected(b1, down, 'U', 'U'));
  // Stragglers (not the deadline, nor the hour of straggler.timeout.ms).
  EXPECT_NE(first_error(o1).find("(straggler.timeout.ms)"), std::string::npos) << first_error(o1);
  for (std::size_t k = 0; k < pm.size(); ++k) sink->finish();
  bool refused = false;  // some probe found the partition without a leader
  for (const auto& outcomes : po) {
    refused = refused || first_error(outcomes).find("has no leader") != std::string::npos;
  }
  EXPECT_TRUE(refused);
}

// A topic whose partition has no leader from the start: in the first second after the topic's
// first metadata, librdkafka's partitions are all still settling, so the leaderless one's messages
// are queued and become stragglers; from then on they fail fast.
TEST(KafkaSinkLeader, LeaderlessBeforeTheFirstMetadata) {
  MockCluster cluster(1);
  ASSERT_EQ(rd_kafka_mock_topic_create(cluster.get(), kTopic, 4, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const int32_t down = java_partition(key(3), 4);
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(cluster.get(), kTopic, down, -1),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  auto sink = make_sink(cluster, {{"straggler.timeout.ms", "500"}});
  const Events first = rounds_of(3), second = rounds_of(3);
  auto outcomes = send(*sink, first, kLongDeadline);
  EXPECT_EQ(summary(outcomes), expected(first, down, 'U', 'U')) << first_error(outcomes);
  EXPECT_NE(first_error(outcomes).find("(straggler.timeout.ms)"), std::string::npos)
      << first_error(outcomes);

  std::this_thread::sleep_for(1s);
  outcomes = send(*sink, second, kLongDeadline);  // refused at once: no straggler wait
  EXPECT_EQ(summary(outcomes), expected(second, down, 'U', 'D')) << first_error(outcomes);
  EXPECT_NE(first_error(outcomes).find("has no leader"), std::string::npos)
      << first_error(outcomes);
}

// The partitioner property still decides the partition: murmur2_random by the sink's default
// (the Java client's), consistent (CRC32) when set.
TEST(KafkaSinkLeader, PartitionerPropertyStillApplies) {
  for (const char* partitioner : {"", "consistent"}) {
    MockCluster cluster(1);
    ASSERT_EQ(rd_kafka_mock_topic_create(cluster.get(), kTopic, 4, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    Options extra;
    if (*partitioner != '\0') extra.emplace_back("partitioner", partitioner);
    auto sink = make_sink(cluster, extra);
    const Events events = rounds_of(1);
    ASSERT_EQ(summary(send(*sink, events, 10s)), std::string(kKeys, 'A'));
    auto records = consume(cluster.bootstraps(), kTopic, kKeys);
    ASSERT_EQ(records.size(), static_cast<std::size_t>(kKeys));
    std::set<int32_t> partitions;
    int like_java = 0;
    for (const Record& r : records) {
      partitions.insert(r.partition);
      like_java += r.partition == java_partition(r.key, 4);
    }
    EXPECT_GT(partitions.size(), 1u) << partitioner;
    if (*partitioner == '\0') {
      EXPECT_EQ(like_java, kKeys);
    } else {
      EXPECT_LT(like_java, kKeys);  // CRC32, not murmur2
    }
  }
}

TEST(KafkaSinkLeader, StragglerTimeoutOption) {
  EXPECT_NE(config_error({{"bootstrap.servers", "127.0.0.1:1"}, {"straggler.timeout.ms", "-1"}})
                .find("straggler.timeout.ms must be"),
            std::string::npos);
  EXPECT_EQ(config_error({{"bootstrap.servers", "127.0.0.1:1"}, {"straggler.timeout.ms", "0"}}),
            "none");
}

}  // namespace
