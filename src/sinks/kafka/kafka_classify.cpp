// How a librdkafka error counts for one message (KafkaSink::classify): whether retrying the
// message later can help; and how it reads (KafkaSink::error_text).
#include <string>

#include "sinks/kafka/kafka_sink.hpp"

namespace outbox::sinks {

std::string KafkaSink::error_text(rd_kafka_resp_err_t err, const char* detail) {
  std::string out = detail != nullptr && *detail != '\0' ? detail : rd_kafka_err2str(err);
  out += " (";
  out += rd_kafka_err2name(err);
  out += ")";
  return out;
}

Delivery KafkaSink::classify(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return Delivery::kAcked;
    // This message can never be accepted as it is: retrying it later will not help.
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
    case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
    case RD_KAFKA_RESP_ERR__BAD_MSG:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return Delivery::kRejected;
    // Everything else concerns the connection, the cluster or the producer as a whole:
    // __TRANSPORT, __ALL_BROKERS_DOWN, __MSG_TIMED_OUT, __TIMED_OUT, __QUEUE_FULL,
    // NOT_ENOUGH_REPLICAS(_AFTER_APPEND), LEADER_NOT_AVAILABLE, NOT_LEADER_FOR_PARTITION,
    // REQUEST_TIMED_OUT, CLUSTER_AUTHORIZATION_FAILED, SASL errors, __FATAL, __PURGE_*, ...
    default:
      return Delivery::kUnavailable;
  }
}

}  // namespace outbox::sinks
