// The Kafka sink's finish(): the wait for the oldest started batch (its reports, the
// WaitObserver every 100 ms, a fatal error, stragglers), and what becomes of the messages
// still waiting when it ends without them.
#include <algorithm>
#include <chrono>
#include <string>

#include "sinks/common/oldest_batch.hpp"
#include "sinks/kafka/kafka_sink.hpp"

namespace outbox::sinks {

namespace {

// How often finish() asks the WaitObserver while it waits.
constexpr auto kObserveEvery = std::chrono::milliseconds(100);

}  // namespace

void KafkaSink::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  if (batches_.empty()) return;
  const OldestBatch<Batch> oldest(batches_);
  Batch& batch = oldest.get();
  const WaitEnd end = wait_for(lock, batch);
  if (batch.pending == 0) return;
  if (end == WaitEnd::kStragglers) {
    settle_stragglers(batch);
  } else {
    give_up(batch, end == WaitEnd::kAbandoned);
  }
}

KafkaSink::WaitEnd KafkaSink::wait_for(std::unique_lock<std::mutex>& lock, Batch& batch) {
  // Reports that are in count even past the deadline (the relay may come late). The
  // thread must be done with the batch's messages before finish() returns, whatever
  // happens: it stops queuing at the deadline, or at once after a fatal error.
  bool fatal = false;
  bool abandoned = false;
  auto observe_at = Clock::now();  // the observer first hears of the wait before it starts
  while (!(batch.queued && batch.pending == 0)) {
    if (!fatal && check_fatal()) {
      fail_all_on_fatal(lock);
      fatal = true;
      continue;
    }
    auto now = Clock::now();
    if (!abandoned && now >= observe_at) {
      // Without the lock: the observer may take its own locks, and the reports go on.
      const std::string client_error = last_error_;
      lock.unlock();
      const bool keep = keep_waiting(client_error);
      lock.lock();
      now = Clock::now();
      observe_at = now + kObserveEvery;
      if (!keep) {
        // The deadline is now, for this loop and for the thread's queuing.
        abandoned = true;
        batch.deadline = std::min(batch.deadline, now);
      }
      continue;  // the batch may have completed meanwhile
    }
    // At most 100 ms at a time, so that a fatal error is noticed soon.
    auto until = now + std::chrono::milliseconds(100);
    if (!abandoned) until = std::min(until, observe_at);
    if (batch.queued) {
      if (now >= batch.deadline) break;
      until = std::min(until, batch.deadline);
      if (!abandoned && batch.acked > 0 && straggler_timeout_.count() > 0) {
        const auto patience = now - leader_lost_at_ < straggler_timeout_
                                  ? std::min(straggler_timeout_, kLeaderLostPatience)
                                  : straggler_timeout_;
        const auto straggling_at = batch.progress_at + patience;
        if (now >= straggling_at) return WaitEnd::kStragglers;
        until = std::min(until, straggling_at);
      }
    }
    changed_.wait_until(lock, until);
  }
  if (batch.queued && batch.pending == 0) return WaitEnd::kComplete;
  return abandoned ? WaitEnd::kAbandoned : WaitEnd::kDeadline;
}

void KafkaSink::settle_stragglers(Batch& batch) {
  // Others of the batch were acknowledged: these wait for their partition (most likely one
  // without a leader). They stay queued, not purged: ahead of any retry in their partition,
  // so the order of a key holds; the relay holds their keys and retries them (a duplicate if
  // the queued one gets through too). Their late reports find no batch.
  std::string error =
      "not acknowledged while the rest of the batch was "
      "(straggler.timeout.ms): still queued for a partition that may have "
      "no leader";
  if (!last_error_.empty()) error += " (last client error: " + last_error_ + ")";
  for (std::size_t i = 0; i < batch.waiting.size(); ++i) {
    if (!batch.waiting[i]) continue;
    batch.settle(i, Outcome{Delivery::kUnavailable, error});
    hold_key(batch, (*batch.messages)[i], "was not acknowledged: " + error);
  }
}

void KafkaSink::give_up(Batch& batch, bool abandoned) {
  std::string error = abandoned ? std::string("not acknowledged: the relay stopped waiting")
                                : "timed out waiting for delivery report after " +
                                      std::to_string(batch.timeout.count()) + " ms";
  if (!last_error_.empty()) error += " (last client error: " + last_error_ + ")";
  // Queued, not yet sent messages would be sent later as duplicates of the relay's retry:
  // drop them. In-flight ones cannot be recalled. The purge must block: with
  // RD_KAFKA_PURGE_F_NON_BLOCKING it runs later and also drops the messages of batches
  // started after this call. It drops those of the later batches started already: their
  // reports (_PURGE_QUEUE) make them kUnavailable, and batches started while they are
  // unfinished must not overtake them.
  queue_.purged(abandoned ? "not sent: purged when the relay stopped waiting for an earlier "
                            "batch"
                          : "not sent: purged when an earlier batch timed out after " +
                                std::to_string(batch.timeout.count()) + " ms");
  rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE);
  batch.fail_pending(error);
  for (const Batch& started : batches_) {
    if (started.pending > 0) {
      queue_.hold_back("not sent: queued messages of an earlier batch were purged: " + error);
      break;
    }
  }
}

}  // namespace outbox::sinks
