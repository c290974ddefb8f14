// The Kafka sink: an idempotent librdkafka producer (enable.idempotence=true, acks=all).
//
// Options (outbox.configure_sink('kafka', '{...}')):
//   topic.template    outbox-level: topic per event, default "outbox.event.${aggregatetype}"
//                     (see routing.hpp: ${aggregatetype}, ${type}; Debezium's
//                     ${routedByValue} is an alias of ${aggregatetype}).
//   timestamp         outbox-level: "created_at" (default: the event's created_at becomes
//                     the Kafka message timestamp) or "now" (the time of sending).
//   anything else     a librdkafka property, passed to rd_kafka_conf_set as is
//                     (bootstrap.servers, security.protocol, sasl.*, compression.type,
//                     linger.ms, message.max.bytes, ...). An unknown property or a bad value
//                     is a ConfigError with librdkafka's own message.
// Required: bootstrap.servers (or test.mock.num.brokers, for tests).
// Forced: enable.idempotence=true and acks=all; setting either to anything weaker is a
// ConfigError, and so is transactional.id (a transactional producer could not produce
// outside a transaction). max.in.flight must stay <= 5 (librdkafka refuses more with
// idempotence), which is what keeps messages of one key in order across retries.
// Defaults that differ from librdkafka's: partitioner=murmur2_random (the Java client's
// partitioner, so a key lands on the same partition as from Debezium or any Java producer)
// client.id=outbox-relay, and linger.ms=0 (the relay sends a whole batch and waits for it,
// so lingering would only add latency). All can be overridden.
//
// Each message: topic from the template, key = aggregateid, value = payload, headers id,
// type, then the event's own headers; timestamp per the `timestamp` option.
//
// Outcomes:
//   kAcked        the delivery report says the broker has it (acks=all).
//   kRejected     a permanent per-message error: too large (message.max.bytes here or on
//                 the broker), invalid record, topic name not valid, topic authorization
//                 failed, topic does not exist (and the cluster does not create it), policy
//                 violation, invalid timestamp.
//   kUnavailable  anything else: brokers down, transport errors, timeouts, queue full, not
//                 enough replicas, a fatal producer error, or no delivery report before the
//                 send() timeout ("timed out waiting for delivery report"). When send() times
//                 out, messages still waiting in librdkafka's queue are purged (they would
//                 otherwise pile up as duplicates while the relay retries); those already in
//                 flight may still reach the broker: the relay sends them again (at least
//                 once, the consumer deduplicates on the id header).
// When a message cannot even be queued with a retryable error (queue full until the
// deadline, fatal error), it and every later message of the batch are kUnavailable and not
// queued, so no later message of the same key can overtake it.
//
// A librdkafka fatal error (e.g. the idempotent producer's unrecoverable sequence errors)
// makes every pending outcome kUnavailable and usable() false for good; the relay then
// destroys the sink and creates a new one.
//
// Threads: librdkafka runs its own threads; every callback this sink registers is served by
// rd_kafka_poll on the caller's thread, inside send(). Callbacks never throw. librdkafka's
// own log lines go to stderr (its default logger), as for any librdkafka program.
#pragma once

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sinks/routing.hpp"
#include "sinks/sink.hpp"

namespace outbox::sinks {

class KafkaSink final : public Sink {
 public:
  // Throws ConfigError for bad options.
  explicit KafkaSink(const Options& options);
  ~KafkaSink() override;
  KafkaSink(const KafkaSink&) = delete;
  KafkaSink& operator=(const KafkaSink&) = delete;

  void send(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
            std::chrono::milliseconds timeout) override;
  bool usable() const override;
  std::string describe() const override;

  // How a librdkafka error code counts for one message.
  static Delivery classify(rd_kafka_resp_err_t err);

  // For tests only (e.g. rd_kafka_test_fatal_error): the producer handle.
  rd_kafka_t* handle_for_testing() const { return rk_; }

 private:
  static void on_delivery(rd_kafka_t* rk, const rd_kafka_message_t* message, void* opaque);
  static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  void delivered(const rd_kafka_message_t* message) noexcept;
  void errored(int err, const char* reason) noexcept;
  // Notes a fatal error if librdkafka has raised one; returns whether one was raised.
  bool check_fatal() noexcept;
  void fail_pending(const std::string& error);
  // The producer's handle of a topic, made on first use and kept; nullptr if librdkafka
  // refuses the name (rd_kafka_last_error() says why).
  rd_kafka_topic_t* topic_handle(const std::string& name);

  rd_kafka_t* rk_ = nullptr;
  // Every topic this producer has sent to (destroyed before rk_).
  std::unordered_map<std::string, rd_kafka_topic_t*> topics_;
  routing::TopicTemplate topic_template_;
  bool timestamp_from_event_ = true;
  std::string description_;

  std::atomic<bool> fatal_{false};
  std::string fatal_error_;  // set once, when fatal_ becomes true
  std::string last_error_;   // the latest client-level error (error_cb), for timeout messages

  // The batch inside send(): delivery reports carry a sequence number as their opaque; a
  // report whose number is outside the current batch (a late one from a batch that timed
  // out) is ignored.
  std::uint64_t next_seq_ = 1;
  std::uint64_t batch_first_seq_ = 0;
  std::vector<Outcome>* batch_outcomes_ = nullptr;
  std::vector<char> batch_waiting_;  // 1 while message i has no outcome yet
  std::size_t batch_pending_ = 0;
};

std::unique_ptr<Sink> create_kafka_sink(const Options& options);

}  // namespace outbox::sinks
