// Helpers of the Kafka sink tests (kafka_sink*_test.cpp): librdkafka's mock cluster (a real
// Kafka protocol server inside the test process, on 127.0.0.1), events whose views stay
// valid, a consumer that reads back what was sent, and summaries of outcomes.
#pragma once

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sinks/kafka/kafka_sink.hpp"

namespace outbox::sinks::test {

using Clock = std::chrono::steady_clock;

// librdkafka's chatter about refused connections is expected in these tests.
inline constexpr const char* kLogLevel = "2";

class MockCluster {
 public:
  explicit MockCluster(int brokers) {
    char errstr[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", kLogLevel, errstr, sizeof errstr);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk_ == nullptr) throw std::runtime_error(errstr);
    mock_ = rd_kafka_mock_cluster_new(rk_, brokers);
    if (mock_ == nullptr) throw std::runtime_error("rd_kafka_mock_cluster_new failed");
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(mock_);
  }
  ~MockCluster() {
    rd_kafka_mock_cluster_destroy(mock_);
    rd_kafka_destroy(rk_);
  }
  MockCluster(const MockCluster&) = delete;
  MockCluster& operator=(const MockCluster&) = delete;

  rd_kafka_mock_cluster_t* get() const { return mock_; }
  const std::string& bootstraps() const { return bootstraps_; }

 private:
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_mock_cluster_t* mock_ = nullptr;
  std::string bootstraps_;
};

struct Record {
  int32_t partition = -1;
  int64_t offset = -1;
  int64_t timestamp = 0;
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
};

// How many records count towards `expected`: all of them, or (with duplicates in the log) the
// distinct event ids, the first header.
enum class Count { kRecords, kDistinctIds };

// Every record of `topic` from the beginning: waits until `expected` arrived (or `timeout`
// passed), then a little longer to catch extra ones.
inline std::vector<Record> consume(const std::string& bootstraps, const std::string& topic,
                                   std::size_t expected,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                   Count count = Count::kRecords) {
  char errstr[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (auto [name, value] : {std::pair{"bootstrap.servers", bootstraps.c_str()},
                             {"group.id", "outbox-test"},
                             {"enable.auto.commit", "false"},
                             {"log_level", kLogLevel}}) {
    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
      throw std::runtime_error(errstr);
    }
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (rk == nullptr) throw std::runtime_error(errstr);

  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 5000);
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR || md->topic_cnt != 1) {
    if (md != nullptr) rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    throw std::runtime_error("no metadata for " + topic);
  }
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(4);
  for (int i = 0; i < md->topics[0].partition_cnt; ++i) {
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), md->topics[0].partitions[i].id)
        ->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_metadata_destroy(md);
  rd_kafka_assign(rk, parts);
  rd_kafka_topic_partition_list_destroy(parts);

  std::vector<Record> out;
  std::set<std::string> ids;
  auto deadline = Clock::now() + timeout;
  auto extra_until = Clock::time_point::max();
  while (Clock::now() < std::min(deadline, extra_until)) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 50);
    const std::size_t got = count == Count::kRecords ? out.size() : ids.size();
    if (got >= expected && extra_until == Clock::time_point::max()) {
      extra_until = Clock::now() + std::chrono::milliseconds(300);
    }
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      Record r;
      r.partition = m->partition;
      r.offset = m->offset;
      r.timestamp = rd_kafka_message_timestamp(m, nullptr);
      r.key.assign(static_cast<const char*>(m->key), m->key_len);
      r.value.assign(static_cast<const char*>(m->payload), m->len);
      rd_kafka_headers_t* hdrs = nullptr;
      if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* value;
        size_t size;
        for (size_t i = 0; !rd_kafka_header_get_all(hdrs, i, &name, &value, &size); ++i) {
          r.headers.emplace_back(name, std::string(static_cast<const char*>(value), size));
        }
      }
      if (!r.headers.empty()) ids.insert(r.headers.front().second);
      out.push_back(std::move(r));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

// Kafka's Utils.murmur2, as the Java client's default partitioner uses it.
inline int32_t java_partition(const std::string& key, int32_t partitions) {
  const uint32_t m = 0x5bd1e995;
  const auto* data = reinterpret_cast<const unsigned char*>(key.data());
  const auto length = static_cast<uint32_t>(key.size());
  uint32_t h = 0x9747b28c ^ length;
  for (uint32_t i = 0; i + 4 <= length; i += 4) {
    uint32_t k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (uint32_t(data[i + 3]) << 24);
    k *= m;
    k ^= k >> 24;
    k *= m;
    h *= m;
    h ^= k;
  }
  const uint32_t tail = length & ~3u;
  switch (length % 4) {
    case 3:
      h ^= data[tail + 2] << 16;
      [[fallthrough]];
    case 2:
      h ^= data[tail + 1] << 8;
      [[fallthrough]];
    case 1:
      h ^= data[tail];
      h *= m;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return static_cast<int32_t>((h & 0x7fffffff) % static_cast<uint32_t>(partitions));
}

// Events whose string fields live here, so that Message views stay valid.
struct Events {
  struct Data {
    std::string id, aggregatetype, aggregateid, type, payload;
    std::vector<std::pair<std::string, std::string>> headers;
    int64_t created_at_unix_us = 0;
  };
  std::vector<Data> data;

  void add(std::string aggregatetype, std::string aggregateid, std::string type,
           std::string payload, std::vector<std::pair<std::string, std::string>> headers = {}) {
    Data d;
    static int64_t next_id = 100000000000;  // unique across Events objects
    d.id = "0190a6e0-0000-7000-8000-" + std::to_string(next_id++);
    d.aggregatetype = std::move(aggregatetype);
    d.aggregateid = std::move(aggregateid);
    d.type = std::move(type);
    d.payload = std::move(payload);
    d.headers = std::move(headers);
    d.created_at_unix_us = 1700000000000000 + static_cast<int64_t>(data.size()) * 1000;
    data.push_back(std::move(d));
  }
  std::vector<Message> messages() const {
    std::vector<Message> out;
    for (const Data& d : data) {
      Message m;
      m.id = d.id;
      m.aggregatetype = d.aggregatetype;
      m.aggregateid = d.aggregateid;
      m.type = d.type;
      m.payload = d.payload;
      for (const auto& [k, v] : d.headers) m.headers.emplace_back(k, v);
      m.created_at_unix_us = d.created_at_unix_us;
      out.push_back(std::move(m));
    }
    return out;
  }
};

// n order events over four keys (k0..k3), each with a new id.
inline Events four_keys(int n) {
  Events events;
  for (int i = 0; i < n; ++i) events.add("order", "k" + std::to_string(i % 4), "T", "{}");
  return events;
}

inline std::vector<Outcome> send(Sink& sink, const Events& events,
                                 std::chrono::milliseconds timeout) {
  std::vector<Outcome> outcomes(events.data.size());
  sink.send(events.messages(), outcomes, timeout);
  return outcomes;
}

// One letter per outcome: Acked, Rejected, Deferred, Unavailable.
inline std::string summary(const std::vector<Outcome>& outcomes) {
  std::string s;
  for (const Outcome& o : outcomes) {
    switch (o.delivery) {
      case Delivery::kAcked:
        s += 'A';
        break;
      case Delivery::kRejected:
        s += 'R';
        break;
      case Delivery::kDeferred:
        s += 'D';
        break;
      case Delivery::kUnavailable:
        s += 'U';
        break;
    }
  }
  return s;
}

// Sends one event and returns its summary ("A" once the producer is connected): the tests
// that break the cluster start from a connected producer.
inline std::string warm_up(Sink& sink) {
  Events warmup;
  warmup.add("order", "w", "T", "{}");
  return summary(send(sink, warmup, std::chrono::seconds(10)));
}

inline std::string first_error(const std::vector<Outcome>& outcomes) {
  for (const Outcome& o : outcomes) {
    if (!o.error.empty()) return o.error;
  }
  return "";
}

// What the outcomes hold before start(): the sink must replace every one.
inline const Outcome kUnset{Delivery::kRejected, "unset"};

inline std::size_t unset(const std::vector<Outcome>& outcomes) {
  std::size_t n = 0;
  for (const Outcome& o : outcomes) n += o.delivery == kUnset.delivery && o.error == kUnset.error;
  return n;
}

// Whether every outcome is kUnavailable with an error that contains `text`.
inline ::testing::AssertionResult all_unavailable(const std::vector<Outcome>& outcomes,
                                                  const std::string& text) {
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    if (o.delivery != Delivery::kUnavailable || o.error.find(text) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "outcome " << i << " of " << summary(outcomes) << ": " << o.error;
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::set<std::string> ids_of(const std::vector<Record>& records) {
  std::set<std::string> ids;
  for (const Record& r : records) ids.insert(r.headers.at(0).second);
  return ids;
}

inline std::unique_ptr<KafkaSink> make_sink(const MockCluster& cluster, Options extra = {}) {
  // librdkafka's reconnect back-off grows to 10 s by default; tests that bring brokers back
  // up would wait for it.
  Options options = {{"bootstrap.servers", cluster.bootstraps()},
                     {"log_level", kLogLevel},
                     {"reconnect.backoff.max.ms", "500"}};
  for (auto& o : extra) options.push_back(std::move(o));
  return std::make_unique<KafkaSink>(options);
}

inline std::string config_error(Options options) {
  options.emplace_back("log_level", kLogLevel);  // a good configuration connects to nothing
  try {
    KafkaSink sink(options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "none";
}

}  // namespace outbox::sinks::test
