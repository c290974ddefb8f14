// The Kafka sink's bookkeeping of started batches: outcomes, and the keys that hold back later
// messages (the per-key rule of Sink::send()).
#include <chrono>
#include <string>
#include <utility>

#include "sinks/kafka/kafka_sink.hpp"

namespace outbox::sinks {

void KafkaBatch::settle(std::size_t i, Outcome outcome) {
  if (!waiting[i]) return;
  waiting[i] = 0;
  --pending;
  acked += outcome.delivery == Delivery::kAcked;
  progress_at = Clock::now();
  (*outcomes)[i] = std::move(outcome);
}

void KafkaBatch::reject(std::size_t i, const Message& message, std::string error) {
  rejected_keys.add(message, "was rejected: " + error);
  settle(i, Outcome{Delivery::kRejected, std::move(error)});
}

void KafkaBatch::fail_pending(const std::string& error) {
  for (std::size_t i = 0; i < waiting.size() && pending > 0; ++i) {
    if (waiting[i]) settle(i, Outcome{Delivery::kUnavailable, error});
  }
}

void KafkaSink::refused(Batch& batch, std::size_t i, const KafkaPartitioner::Refusal& refusal,
                        const char* topic) {
  const std::string why =
      "partition " + std::to_string(refusal.partition) + " of topic " + topic + " has no leader";
  leader_lost_at_ = Clock::now();
  changed_.notify_all();  // finish() need not wait the whole straggler.timeout.ms any more
  if (refusal.held) {
    batch.settle(i, Outcome{Delivery::kDeferred,
                            "not sent: an earlier event of its key was not "
                            "delivered: " +
                                why});
  } else {
    batch.settle(i, Outcome{Delivery::kUnavailable, why});
  }
  hold_key(batch, (*batch.messages)[i], "was not delivered: " + why);
}

void KafkaSink::hold_key(Batch& batch, const Message& message, const std::string& reason) {
  batch.rejected_keys.add(message, reason);
  if (!batch.queued) return;  // pass_rejected_keys_on() passes it on once it is
  bool later = false;
  for (Batch& other : batches_) {
    if (later) other.earlier_keys.add(message, reason);
    later = later || &other == &batch;
  }
}

void KafkaSink::pass_rejected_keys_on(const Batch& batch) {
  if (batch.rejected_keys.empty()) return;
  bool later = false;  // batches after `batch` were started while it is unfinished
  for (Batch& other : batches_) {
    if (later) other.earlier_keys.add_all(batch.rejected_keys);
    later = later || &other == &batch;
  }
}

void KafkaSink::fail_all_on_fatal(std::unique_lock<std::mutex>& lock) {
  // Reports that are still to come may be acks; those already in are kept.
  lock.unlock();
  rd_kafka_poll(rk_, 0);
  lock.lock();
  for (Batch& batch : batches_) batch.fail_pending(fatal_error_);
}

bool KafkaSink::any_pending() const {
  for (const Batch& batch : batches_) {
    if (batch.pending > 0) return true;
  }
  return false;
}

}  // namespace outbox::sinks
