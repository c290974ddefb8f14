// The NATS sink's finish(): waits for the oldest started batch, then tells a missing stream
// from a JetStream that cannot answer yet for the messages answered "no responders".
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "sinks/common/oldest_batch.hpp"
#include "sinks/nats/nats_lookup.hpp"
#include "sinks/nats/nats_sink.hpp"

namespace outbox::sinks {

namespace {

using Clock = std::chrono::steady_clock;
// A lookup is off the hot path, and a server that is up answers it at once.
constexpr auto kLookupTimeout = std::chrono::seconds(2);

std::string missing_stream_error(const std::string& subject) {
  return "nats sink: no JetStream stream stores subject \"" + subject +
         "\" (no responders). Create a stream that captures it, e.g. nats stream add OUTBOX "
         "--subjects '" +
         subject + "' (or a wildcard such as 'outbox.event.>')";
}

}  // namespace

void NatsSink::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  if (batches_.empty()) return;
  const OldestBatch<Batch> oldest(batches_);
  Batch& batch = oldest.get();

  bool abandoned = batch.abandoned;  // by the observer while start() published
  auto observe_at = Clock::now();
  while (batch.pending > 0 && !abandoned) {
    auto now = Clock::now();
    if (now >= observe_at) {
      // Without the lock: the observer may take its own locks, and PubAcks go on.
      const std::string client_error = last_error_;
      lock.unlock();
      const bool keep = keep_waiting(client_error);
      lock.lock();
      observe_at = Clock::now() + kObserveEvery;
      abandoned = !keep;
      continue;  // the batch may have completed meanwhile
    }
    if (now >= batch.deadline) break;
    changed_.wait_until(lock, std::min(batch.deadline, observe_at));
  }
  if (batch.pending > 0) {
    std::string why = abandoned ? std::string("not acknowledged: the relay stopped waiting")
                                : "timed out waiting for PubAck after " +
                                      std::to_string(batch.timeout.count()) + " ms";
    if (!last_error_.empty()) why += " (last client error: " + last_error_ + ")";
    for (std::size_t i = 0; i < batch.waiting.size(); ++i) {
      settle(batch, i, Outcome{Delivery::kUnavailable, why});
    }
  }
  if (!batch.config_error.empty()) throw ConfigError(batch.config_error);
  if (!batch.no_responders.empty() && !abandoned) {  // else they stay unavailable
    const std::string missing = confirm_missing_stream(lock, batch);
    if (!missing.empty()) throw ConfigError(missing);
  }
}

std::string NatsSink::confirm_missing_stream(std::unique_lock<std::mutex>& lock, Batch& batch) {
  // Each subject once, in the order answered.
  std::vector<std::string> subjects;
  for (const auto& entry : batch.no_responders) {
    if (std::find(subjects.begin(), subjects.end(), entry.second) == subjects.end()) {
      subjects.push_back(entry.second);
    }
  }
  const auto now = Clock::now();
  std::string all_why;  // the same reason for every subject, or ""
  if (connected_at_ && now - *connected_at_ < kReconnectGrace) {
    // JetStream may still be loading its streams: no lookup would be conclusive.
    all_why =
        "reconnected " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(now - *connected_at_).count()) +
        " ms ago, JetStream may not be ready";
  }
  std::unordered_map<std::string, std::string> why;
  std::string missing;
  if (all_why.empty()) {
    // Unlocked while it asks: PubAcks of other batches go on; only finish() removes this one.
    const auto deadline = batch.deadline;
    lock.unlock();
    struct Relock {
      std::unique_lock<std::mutex>& lock;
      ~Relock() {
        if (!lock.owns_lock()) lock.lock();
      }
    } relock{lock};
    bool stopped = false;
    const auto keep = [&] {
      std::string error;
      {
        std::lock_guard<std::mutex> guard(mu_);
        error = last_error_;
      }
      stopped = stopped || !keep_waiting(error);
      return !stopped;
    };
    for (const std::string& subject : subjects) {
      if (stopped) {
        why[subject] = "not looked up: the relay stopped waiting";
        continue;
      }
      const auto until = std::min(deadline, Clock::now() + kLookupTimeout);
      const nats::StreamLookupResult found = nats::find_stream(nc_, subject, until, keep);
      if (found.state == nats::StreamLookup::kMissing) {
        missing = missing_stream_error(subject);
        break;
      }
      why[subject] = found.state == nats::StreamLookup::kFound
                         ? found.detail + " captures it, JetStream is not ready"
                         : "stream lookup: " + found.detail;
    }
    lock.lock();
  }
  if (!missing.empty()) return missing;
  for (const auto& [i, subject] : batch.no_responders) {
    const auto it = why.find(subject);
    const std::string& reason = all_why.empty() && it != why.end() ? it->second : all_why;
    if (!reason.empty()) (*batch.outcomes)[i].error += ": " + reason;
  }
  return {};
}

}  // namespace outbox::sinks
