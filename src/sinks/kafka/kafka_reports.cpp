// The Kafka sink's callbacks from librdkafka: delivery reports, client errors, log lines, and
// the fatal error check they share with the sink's thread.
#include <string>
#include <vector>

#include "sinks/kafka/kafka_options.hpp"
#include "sinks/kafka/kafka_sink.hpp"

namespace outbox::sinks {

void KafkaSink::on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
  static_cast<KafkaSink*>(opaque)->delivered(message);
}

void KafkaSink::on_error(rd_kafka_t*, int err, const char* reason, void* opaque) {
  static_cast<KafkaSink*>(opaque)->errored(err, reason);
}

void KafkaSink::on_log(const rd_kafka_t* rk, int level, const char* facility, const char* text) {
  static_cast<KafkaSink*>(rd_kafka_opaque(rk))->logged(level, facility, text);
}

void KafkaSink::logged(int level, const char* facility, const char* text) noexcept {
  try {
    // librdkafka redacts only some secrets (debug=conf shows sasl.oauthbearer.client.secret).
    log_.add(level, redacted(std::string("librdkafka ") + facility + ": " + text, secrets_));
  } catch (...) {
    // Out of memory: the line is lost.
  }
}

std::vector<LogLine> KafkaSink::take_log() { return log_.take(); }

void KafkaSink::delivered(const rd_kafka_message_t* message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    auto seq = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(message->_private));
    for (Batch& batch : batches_) {
      if (seq < batch.first_seq || seq - batch.first_seq >= batch.waiting.size()) continue;
      const std::size_t i = seq - batch.first_seq;
      if (!batch.waiting[i]) return;
      if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        batch.settle(i, Outcome{Delivery::kAcked, {}});
        last_error_.clear();  // the cluster answers again: an older error is no explanation
        return;
      }
      if (message->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
        // It waited for the topic's metadata, then its partition had no leader.
        if (auto refusal = partitioner_->take(seq)) {
          refused(batch, i, *refusal, rd_kafka_topic_name(message->rkt));
          return;
        }
      }
      std::string error;
      if (message->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE) {
        error = error_text(message->err);
      } else if (check_fatal()) {  // librdkafka purges its queues on a fatal error
        error = fatal_error_;
      } else {  // finish() purged when an earlier batch timed out or was abandoned
        error = error_text(message->err, queue_.purge_reason().c_str());
      }
      batch.settle(i, Outcome{classify(message->err), std::move(error)});
      if (message->err == RD_KAFKA_RESP_ERR__FATAL) check_fatal();
      return;
    }
  } catch (...) {
    // Out of memory while writing an error text: the message stays pending until its batch
    // times out.
  }
}

void KafkaSink::errored(int err, const char* reason) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
      check_fatal();
      return;
    }
    last_error_ = redacted(error_text(static_cast<rd_kafka_resp_err_t>(err), reason), secrets_);
  } catch (...) {
  }
}

bool KafkaSink::check_fatal() noexcept {
  if (fatal_) return true;
  char errstr[512];
  rd_kafka_resp_err_t err = rd_kafka_fatal_error(rk_, errstr, sizeof errstr);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return false;
  try {
    fatal_error_ = redacted(
        "fatal producer error, the sink must be recreated: " + error_text(err, errstr), secrets_);
  } catch (...) {
  }
  fatal_ = true;
  return true;
}

bool KafkaSink::usable() const {
  if (fatal_) return false;
  char errstr[8];
  return rd_kafka_fatal_error(rk_, errstr, sizeof errstr) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

}  // namespace outbox::sinks
