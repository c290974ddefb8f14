// The Kafka sink's options: its allowlist (kKafkaOptions, the reference is
// docs/sink-options.md) and how resolved options become a librdkafka configuration.
//
// The allowlist holds the librdkafka producer and global properties that are safe to hand to
// a role the superuser delegated configure_sink to, plus the sink's own topic.template,
// timestamp and straggler.timeout.ms. Not in it, so refused by configure_sink and by the sink
// itself: properties that run a command (sasl.kerberos.kinit.cmd) or load code
// (plugin.library.paths, ssl.engine.*, ssl.providers), install a signal handler
// (internal.termination.signal), callbacks and opaques, consumer-only, test-only (test.mock.*) and
// hidden ones, transactional ones (transactional.id, transaction.timeout.ms), deprecated ones that
// do nothing, and those that would break the sink (delivery.report.only.error, log.queue,
// enabled_events, statistics.interval.ms without a callback). sasl.kerberos.min.time.before.relogin
// is forced to 0, so librdkafka never runs kinit through the shell (its default command substitutes
// sasl.kerberos.principal and the keytab into a shell line); sasl.kerberos.keytab only feeds
// that command, so it is refused too. enable.sasl.oauthbearer.unsecure.jwt is declared but
// only false is accepted: the unsecured JWT handler is for development, and librdkafka 2.0.2
// crashes the process on a malformed sasl.oauthbearer.config.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sinks/common/cloudevents.hpp"
#include "sinks/common/option_rules.hpp"
#include "sinks/kafka/routing.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

extern const OptionSpec kKafkaOptions[];

// straggler.timeout.ms by default: long enough for a slow acknowledgement, short enough that a
// partition without a leader holds the stream back briefly.
inline constexpr long kDefaultStragglerTimeoutMs = 2000;
extern const std::size_t kKafkaOptionCount;

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};

// What the options make of a producer, before its callbacks are set.
struct KafkaSettings {
  std::unique_ptr<rd_kafka_conf_t, ConfDeleter> conf;
  routing::TopicTemplate topic_template;
  bool timestamp_from_event = true;   // timestamp=created_at
  cloudevents::Settings cloudevents;  // cloudevents, cloudevents.source
  std::string description;            // describe(): no secret and no sensitive-looking value
  std::vector<std::string> secrets;   // the kSecret values, redacted from every text
  std::size_t max_message_bytes = 0;  // the effective message.max.bytes
  std::string partitioner;            // the effective partitioner
  std::chrono::milliseconds straggler_timeout{kDefaultStragglerTimeoutMs};
};

// From the options create() receives (resolved). Throws ConfigError; an undeclared option is
// an OptionError. No message contains a secret.
KafkaSettings kafka_settings(const Options& options);

}  // namespace outbox::sinks
