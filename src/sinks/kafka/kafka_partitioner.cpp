#include "sinks/kafka/kafka_partitioner.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

namespace outbox::sinks {

namespace {
std::string key_text(const void* key, size_t keylen) {
  return key == nullptr ? std::string() : std::string(static_cast<const char*>(key), keylen);
}
}  // namespace

KafkaPartitioner::KafkaPartitioner(const std::string& name) {
  // librdkafka 2.0's names (rdkafka_topic.c), each with the function it stands for.
  static const std::pair<const char*, Fn> kByName[] = {
      {"random", &rd_kafka_msg_partitioner_random},
      {"consistent", &rd_kafka_msg_partitioner_consistent},
      {"consistent_random", &rd_kafka_msg_partitioner_consistent_random},
      {"murmur2", &rd_kafka_msg_partitioner_murmur2},
      {"murmur2_random", &rd_kafka_msg_partitioner_murmur2_random},
      {"fnv1a", &rd_kafka_msg_partitioner_fnv1a},
      {"fnv1a_random", &rd_kafka_msg_partitioner_fnv1a_random},
  };
  fn_ = name.empty() ? &rd_kafka_msg_partitioner_consistent_random : nullptr;
  for (const auto& [known, fn] : kByName) {
    if (name == known) fn_ = fn;
  }
  if (fn_ == nullptr) throw std::invalid_argument("unknown partitioner \"" + name + "\"");
}

void KafkaPartitioner::install(rd_kafka_topic_conf_t* conf) {
  rd_kafka_topic_conf_set_opaque(conf, this);
  rd_kafka_topic_conf_set_partitioner_cb(conf, &KafkaPartitioner::partition);
}

std::optional<KafkaPartitioner::Refusal> KafkaPartitioner::take(std::uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = refused_.find(seq);
  if (it == refused_.end()) return std::nullopt;
  Refusal refusal = it->second;
  refused_.erase(it);
  return refusal;
}

void KafkaPartitioner::clear_held() {
  std::lock_guard<std::mutex> lock(mu_);
  held_.clear();
  refused_.clear();
}

int32_t KafkaPartitioner::partition(const rd_kafka_topic_t* rkt, const void* key, size_t keylen,
                                    int32_t partition_cnt, void* rkt_opaque, void* msg_opaque) {
  auto* self = static_cast<KafkaPartitioner*>(rkt_opaque);
  const int32_t p = self->fn_(rkt, key, keylen, partition_cnt, rkt_opaque, msg_opaque);
  // Out of range: librdkafka fails this message alone with __UNKNOWN_PARTITION (returning
  // RD_KAFKA_PARTITION_UA would park it in the topic's unassigned queue instead).
  const int32_t refuse = partition_cnt;
  const auto seq = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(msg_opaque));
  try {
    std::lock_guard<std::mutex> lock(self->mu_);
    const auto now = std::chrono::steady_clock::now();
    const auto first = self->first_partitioned_.emplace(rkt, now).first->second;
    if (!self->held_.empty()) {
      auto it = self->held_.find({rkt, key_text(key, keylen)});
      if (it != self->held_.end()) {
        self->refused_[seq] = Refusal{it->second, true};
        return refuse;
      }
    }
    if (p < 0 || p >= partition_cnt || rd_kafka_topic_partition_available(rkt, p)) return p;
    // Right after the topic's first metadata, its partitions are not available yet either
    // (librdkafka hands each to its leader's broker thread asynchronously): those wait.
    if (now - first < kSettling) return p;
    self->refused_[seq] = Refusal{p, false};
    self->held_.emplace(std::make_pair(rkt, key_text(key, keylen)), p);
    return refuse;
  } catch (...) {
    // Out of memory: no refusal can be noted, so the message waits for a leader as before.
    return p;
  }
}

}  // namespace outbox::sinks
