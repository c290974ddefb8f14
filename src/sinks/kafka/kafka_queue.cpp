// The Kafka sink's queue state (kafka_queue.hpp): topic handles and one produce attempt.
#include "sinks/kafka/kafka_queue.hpp"

#include <sys/types.h>

#include <utility>

namespace outbox::sinks {

void KafkaQueue::configure(routing::TopicTemplate topic_template, bool timestamp_from_event,
                           cloudevents::Settings cloudevents) {
  topic_template_ = std::move(topic_template);
  timestamp_from_event_ = timestamp_from_event;
  cloudevents_ = std::move(cloudevents);
}

void KafkaQueue::destroy_topics() noexcept {
  for (const auto& [name, rkt] : topics_) rd_kafka_topic_destroy(rkt);
  topics_.clear();
}

bool KafkaQueue::route(const Message& message, std::string& topic, std::string& error) const {
  return routing::route_topic(topic_template_, message, topic, error);
}

rd_kafka_topic_t* KafkaQueue::topic_handle(const std::string& name) {
  auto it = topics_.find(name);
  if (it != topics_.end()) return it->second;
  // Why a handle rather than rd_kafka_producev(RD_KAFKA_V_TOPIC(name)): a topic that first
  // appears by name in producev gets no metadata request of its own (librdkafka 2.0,
  // https://github.com/confluentinc/librdkafka/issues/3202). Unless the producer knew the
  // topic before its first broker connection (whose metadata request covers the known
  // topics), its messages wait for librdkafka's topic scan, which runs once a second: the
  // first batch after every sink creation, and the first one of each new topic, waited up to
  // 1 s. rd_kafka_topic_new() asks for the topic's metadata at once (asynchronously; it is
  // the request the scan would send later), against a real cluster as against the mock.
  it = topics_.emplace(name, nullptr).first;  // may throw: nothing to leak yet
  // The producer's topic properties (acks, message.timeout.ms, ...), with our partitioner.
  rd_kafka_topic_conf_t* conf = rd_kafka_default_topic_conf_dup(rk_);
  if (conf != nullptr) partitioner_->install(conf);
  it->second = rd_kafka_topic_new(rk_, name.c_str(), conf);  // takes conf, also on failure
  rd_kafka_topic_t* rkt = it->second;
  if (rkt == nullptr) topics_.erase(it);
  return rkt;
}

rd_kafka_resp_err_t KafkaQueue::produce(rd_kafka_topic_t* rkt, const Message& m,
                                        std::uint64_t seq) {
  const std::int64_t timestamp_ms =
      timestamp_from_event_ && m.created_at_unix_us > 0 ? m.created_at_unix_us / 1000 : 0;
  void* opaque = reinterpret_cast<void*>(static_cast<std::uintptr_t>(seq));
  rd_kafka_headers_t* headers = rd_kafka_headers_new(2 + m.headers.size());
  for (const auto& [name, value] : routing::message_headers(m)) {
    rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                        static_cast<ssize_t>(value.size()));
  }
  if (cloudevents_.enabled) {
    for (const auto& [name, value] : routing::cloudevents_headers(m, cloudevents_.source)) {
      rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                          static_cast<ssize_t>(value.size()));
    }
  }
  const rd_kafka_resp_err_t err = rd_kafka_producev(
      rk_, RD_KAFKA_V_RKT(rkt),
      RD_KAFKA_V_KEY(routing::message_key(m).data(), routing::message_key(m).size()),
      RD_KAFKA_V_VALUE(const_cast<char*>(m.payload.data()), m.payload.size()),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers),
      RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
  // On success the message owns the headers.
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_headers_destroy(headers);
  return err;
}

}  // namespace outbox::sinks
