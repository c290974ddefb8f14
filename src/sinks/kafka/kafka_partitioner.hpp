// The Kafka sink's partitioner: the one the `partitioner` property selects (murmur2_random by the
// sink's default), plus a check that the chosen partition has a leader. A message for a partition
// without one is refused at once (producev, or the delivery report of a message that waited for
// the topic's first metadata, fails with __UNKNOWN_PARTITION), instead of waiting in librdkafka's
// queue until the batch's deadline while the other partitions' messages are acknowledged.
// "Available" is librdkafka's view: the partition is served by its leader's broker thread. That
// is also briefly false while a partition moves to a new leader (its messages then fail as if
// leaderless: the relay retries their keys) and during the first kSettling after a topic's first
// partitioning, when its messages are queued instead (they wait, as before).
//
// Order: once a message of a (topic, key) was refused, every later message of that (topic, key)
// is refused too ("held"), even if the leader is back meanwhile, until clear_held(): a later
// message can never be partitioned ahead of a refused one. The sink clears it when no batch is
// started (nothing of its own can be overtaken any more).
//
// librdkafka calls the partitioner on any thread (producev's caller, or its main thread for
// messages that waited for metadata), holding the topic's lock; it may call no librdkafka
// function but rd_kafka_topic_partition_available(). So it takes only its own mutex.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace outbox::sinks {

class KafkaPartitioner {
 public:
  using Fn = int32_t (*)(const rd_kafka_topic_t* rkt, const void* key, size_t keylen,
                         int32_t partition_cnt, void* rkt_opaque, void* msg_opaque);

  // Why a message was refused.
  struct Refusal {
    int32_t partition = -1;  // the partition without a leader
    bool held = false;       // refused because an earlier message of its (topic, key) was
  };

  // Throws std::invalid_argument for a `partitioner` name librdkafka 2.0 does not have.
  explicit KafkaPartitioner(const std::string& name);

  // Makes `conf` (for rd_kafka_topic_new) partition with this.
  void install(rd_kafka_topic_conf_t* conf);

  // The refusal of the message whose opaque is `seq`, if it was refused; forgets it.
  std::optional<Refusal> take(std::uint64_t seq);
  void clear_held();

 private:
  static int32_t partition(const rd_kafka_topic_t* rkt, const void* key, size_t keylen,
                           int32_t partition_cnt, void* rkt_opaque, void* msg_opaque);

  Fn fn_;
  std::mutex mu_;
  std::unordered_map<std::uint64_t, Refusal> refused_;  // by the message's opaque
  // When each topic was first partitioned: its partitions become available a moment later.
  static constexpr std::chrono::milliseconds kSettling{1000};
  std::map<const void*, std::chrono::steady_clock::time_point> first_partitioned_;
  // (topic handle, key) of the refused messages, with their partition.
  std::map<std::pair<const void*, std::string>, int32_t> held_;
};

}  // namespace outbox::sinks
