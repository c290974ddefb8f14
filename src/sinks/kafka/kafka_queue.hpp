// What the Kafka sink's thread needs to hand batches to librdkafka (kafka_sink.cpp's queue()
// and produce_one()): the batches waiting to be queued, the producer's topic handles, the form
// of a message (topic template, timestamp, headers), and the held-back state. Not
// thread-safe: the sink calls it with its mutex held.
//
// Held back: when a message cannot even be queued with a retryable error (queue full until
// the deadline, fatal error), it and every later message of the batch are kUnavailable and
// not queued, so no later message of the same key can overtake it. Nor can a later batch:
// from then until no started batch is left unfinished, every batch started is kUnavailable
// and not queued. The same holds once a timeout's purge has dropped messages of a started
// batch.
#pragma once

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sinks/common/cloudevents.hpp"
#include "sinks/common/sink.hpp"
#include "sinks/kafka/kafka_batch.hpp"
#include "sinks/kafka/kafka_partitioner.hpp"
#include "sinks/kafka/routing.hpp"

namespace outbox::sinks {

class KafkaQueue {
 public:
  KafkaQueue() = default;
  KafkaQueue(const KafkaQueue&) = delete;
  KafkaQueue& operator=(const KafkaQueue&) = delete;

  // A started batch whose messages the sink's thread has yet to queue.
  struct Job {
    KafkaBatch* batch;
    const std::vector<Message>* messages;
  };
  void add_job(Job job) { jobs_.push_back(job); }
  bool has_job() const { return !jobs_.empty(); }
  Job take_job() {  // the oldest
    const Job job = jobs_.front();
    jobs_.pop_front();
    return job;
  }
  void drop_jobs() { jobs_.clear(); }

  // The form of each message, from the sink's options.
  void configure(routing::TopicTemplate topic_template, bool timestamp_from_event,
                 cloudevents::Settings cloudevents);
  // The producer, and the partitioner every topic handle gets; set before the first message.
  void attach(rd_kafka_t* rk, KafkaPartitioner* partitioner) {
    rk_ = rk;
    partitioner_ = partitioner;
  }
  // Destroys the topic handles; before the producer is destroyed.
  void destroy_topics() noexcept;

  // The topic of `message` from the template; false with `error` set if it has none.
  bool route(const Message& message, std::string& topic, std::string& error) const;
  // The producer's handle of a topic, made on first use and kept; nullptr if librdkafka
  // refuses the name (rd_kafka_last_error() says why).
  rd_kafka_topic_t* topic_handle(const std::string& name);
  // One attempt to queue `message` for `rkt`, its delivery report carrying `seq`: librdkafka's
  // answer (RD_KAFKA_RESP_ERR__QUEUE_FULL when there is no room now).
  rd_kafka_resp_err_t produce(rd_kafka_topic_t* rkt, const Message& message, std::uint64_t seq);

  // Set when a message of a started batch was not queued, or purged from the queue: the
  // outcome of every message of the batches started from then until none is left unfinished.
  bool held_back() const { return !held_back_.empty(); }
  const std::string& held_back_reason() const { return held_back_; }
  void hold_back(std::string why) { held_back_ = std::move(why); }
  // Nothing is started: no message that a new one could overtake.
  void release() { held_back_.clear(); }

  // Why finish() last purged librdkafka's queue: the error of the purged messages' reports.
  const std::string& purge_reason() const { return purge_reason_; }
  void purged(std::string reason) { purge_reason_ = std::move(reason); }

 private:
  rd_kafka_t* rk_ = nullptr;
  KafkaPartitioner* partitioner_ = nullptr;
  // Every topic this producer has sent to (destroyed before rk_).
  std::unordered_map<std::string, rd_kafka_topic_t*> topics_;
  routing::TopicTemplate topic_template_;
  bool timestamp_from_event_ = true;
  cloudevents::Settings cloudevents_;
  std::deque<Job> jobs_;
  std::string held_back_;
  std::string purge_reason_;
};

}  // namespace outbox::sinks
