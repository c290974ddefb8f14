// The Kafka sink: an idempotent librdkafka producer (enable.idempotence=true, acks=all).
//
// Options: the allowlist and the forced and changed defaults in kafka_options.hpp, the
// reference in docs/sink-options.md (required: bootstrap.servers; enable.idempotence and
// acks=all forced; partitioner murmur2_random as the Java client's). Secrets are redacted from
// every text the sink hands out. max_message_bytes() is the effective message.max.bytes.
//
// Each message: topic from the template, key = aggregateid, value = payload, headers id,
// type, then the event's own headers; timestamp per the `timestamp` option.
//
// Pipelining: start() hands a batch to the sink's thread, which queues it in librdkafka, and
// returns; finish() waits for the oldest started batch until all its outcomes are in or its
// deadline (start() + timeout) has passed. Any number of batches may be started (the relay keeps at
// most two); delivery reports find their batch by the sequence number they carry. send() is start()
// + finish() with no other batch started.
//
// Outcomes:
//   kAcked        the delivery report says the broker has it (acks=all).
//   kRejected     a permanent per-message error: too large (message.max.bytes here or on
//                 the broker), invalid record, topic name not valid, topic authorization
//                 failed, topic does not exist (and the cluster does not create it), policy
//                 violation, invalid timestamp.
//   kDeferred     not queued, because an earlier message of its key (aggregatetype,
//                 aggregateid) was settled kRejected (or kDeferred) before it was handed to
//                 librdkafka (topic routing, or a produce() error such as too large), in this
//                 batch or in a batch that was unfinished when this one was started: "not
//                 sent: an earlier event of its key was rejected: <its error>". Such keys are
//                 kept per started batch and dropped when it finishes. A rejection that
//                 arrives in a delivery report (the broker refused a message already on its
//                 way) cannot hold back the later messages of its key queued behind it: they
//                 may be acked. librdkafka's idempotent producer keeps order across retries of
//                 retriable errors only.
//   kUnavailable  a partition without a leader (kafka_partitioner.hpp): "partition N of topic
//                 T has no leader", at once, and later messages of its key kDeferred as above,
//                 while the other messages go on. Messages queued before the producer knew wait;
//                 once others of the batch are acked and the rest had no report for
//                 straggler.timeout.ms (default 2000, 0: off), the rest are kUnavailable and
//                 their keys held back the same way, but they stay queued (not purged), ahead of
//                 any retry in their partition: the retry may be a duplicate.
//                 Otherwise: brokers down, transport errors, timeouts, queue full, not
//                 enough replicas, a fatal producer error, or no delivery report before the
//                 batch's deadline ("timed out waiting for delivery report after N ms
//                 (last client error: ...)"), or when the WaitObserver ends the wait ("not
//                 acknowledged: the relay stopped waiting"). Then messages still waiting in
//                 librdkafka's queue are purged (they would otherwise pile up as duplicates
//                 while the relay retries), those of later started batches too (kUnavailable,
//                 "not sent: purged when an earlier batch timed out ..."); messages already in
//                 flight may still reach the broker: the relay sends them again (at least
//                 once, the consumer deduplicates on the id header).
// A message that cannot even be queued holds back the rest (kafka_queue.hpp).
#pragma once

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sinks/kafka/kafka_batch.hpp"
#include "sinks/kafka/kafka_partitioner.hpp"
#include "sinks/kafka/kafka_queue.hpp"
#include "sinks/common/log_buffer.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

class KafkaSink final : public Sink {
 public:
  // Throws ConfigError for bad options.
  explicit KafkaSink(const Options& options);
  ~KafkaSink() override;
  KafkaSink(const KafkaSink&) = delete;
  KafkaSink& operator=(const KafkaSink&) = delete;

  // Throws std::logic_error while batches are started (use finish() for them).
  void start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
             std::chrono::milliseconds timeout) override;
  void finish() override;
  bool usable() const override;
  std::string describe() const override;
  std::vector<LogLine> take_log() override;
  std::size_t max_message_bytes() const override { return max_message_bytes_; }

  static constexpr std::size_t kMaxLogLines =
      LogBuffer::kDefaultMaxLines;  // kept between take_log()s; more counted

  // How a librdkafka error code counts for one message, and how it reads.
  static Delivery classify(rd_kafka_resp_err_t err);
  static std::string error_text(rd_kafka_resp_err_t err, const char* detail = nullptr);

  // For tests only (e.g. rd_kafka_test_fatal_error): the producer handle.
  rd_kafka_t* handle_for_testing() const { return rk_; }

 private:
  using Clock = std::chrono::steady_clock;
  using Batch = KafkaBatch;

  static void on_delivery(rd_kafka_t* rk, const rd_kafka_message_t* message, void* opaque);
  static void on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  static void on_log(const rd_kafka_t* rk, int level, const char* facility, const char* text);
  void logged(int level, const char* facility, const char* text) noexcept;
  void delivered(const rd_kafka_message_t* message) noexcept;
  void errored(int err, const char* reason) noexcept;
  // Notes a fatal error if librdkafka has raised one; returns whether one was raised.
  bool check_fatal() noexcept;
  // The sink's thread: queues started batches, serves reports, flushes while finish() waits.
  void run() noexcept;
  // Queues the messages of `batch` in librdkafka, in one pass. Runs on the sink's thread with
  // `lock` held, released only while produce_one() waits for room in a full queue.
  void queue(std::unique_lock<std::mutex>& lock, Batch& batch,
             const std::vector<Message>& messages);
  // Hands message i of `batch` to librdkafka for `topic`; on a full queue, serves delivery
  // reports (with `lock` released) and tries again until the batch's deadline. Returns
  // librdkafka's answer, or nullopt when, after such a wait, the sink is stopping or the
  // queue is held back (the message is not queued then).
  std::optional<rd_kafka_resp_err_t> produce_one(std::unique_lock<std::mutex>& lock, Batch& batch,
                                                 std::size_t i, const std::string& topic);
  // Settles message i, which librdkafka refused with `err`; returns whether the later messages
  // of the batch may still be queued.
  bool not_queued(Batch& batch, std::size_t i, rd_kafka_resp_err_t err, const std::string& topic);
  // How finish()'s wait for `batch` ended (kafka_finish.cpp).
  enum class WaitEnd { kComplete, kDeadline, kAbandoned, kStragglers };
  WaitEnd wait_for(std::unique_lock<std::mutex>& lock, Batch& batch);
  // The rest of `batch` after kStragglers: kUnavailable, still queued, their keys held back.
  void settle_stragglers(Batch& batch);
  // The rest of `batch` after its deadline, or after the observer ended the wait: kUnavailable,
  // and librdkafka's queue purged.
  void give_up(Batch& batch, bool abandoned);
  bool any_pending() const;
  // Settles message i, refused by the partitioner (no leader), and holds its key back.
  void refused(Batch& batch, std::size_t i, const KafkaPartitioner::Refusal& refusal,
               const char* topic);
  // Later messages of the key of `message` (in `batch` and the batches started after it) are
  // kDeferred: "not sent: an earlier event of its key " + reason.
  void hold_key(Batch& batch, const Message& message, const std::string& reason);
  // Once `batch` is queued: its rejected keys hold back the batches started after it.
  void pass_rejected_keys_on(const Batch& batch);
  // After a fatal error: every started batch's pending outcomes become kUnavailable. Called
  // with `lock` held; releases it while it serves the reports that are in.
  void fail_all_on_fatal(std::unique_lock<std::mutex>& lock);

  rd_kafka_t* rk_ = nullptr;
  std::unique_ptr<KafkaPartitioner> partitioner_;  // set before rk_ makes any topic
  // straggler.timeout.ms: how long the rest of a batch that has acks may go without a report.
  std::chrono::milliseconds straggler_timeout_{0};
  // The straggler wait within straggler_timeout_ of a refusal (no leader): what is pending
  // then most likely waits for that partition.
  static constexpr std::chrono::milliseconds kLeaderLostPatience{100};
  // Guards everything below, except fatal_ (atomic) and rk_ (librdkafka is thread-safe).
  std::mutex mu_;
  std::condition_variable changed_;  // a job, reports served, a batch queued, or stopping
  bool stopping_ = false;
  // Jobs, topic handles, the messages' form, the held-back state (kafka_queue.hpp).
  KafkaQueue queue_;
  std::string description_;
  std::size_t max_message_bytes_ = 0;
  // The secrets among the options: redacted from every text the sink hands out. Set before
  // rd_kafka_new (which may log) and never changed, so read without a lock.
  std::vector<std::string> secrets_;

  std::atomic<bool> fatal_{false};
  std::string fatal_error_;  // set once, when fatal_ becomes true
  std::string last_error_;   // the latest client-level error (error_cb), for timeout messages
  Clock::time_point leader_lost_at_;  // the partitioner's latest refusal

  // Started, unfinished batches, oldest first. A delivery report whose sequence number is in
  // none of them (a late one from a batch that timed out) is ignored.
  std::deque<Batch> batches_;
  std::uint64_t next_seq_ = 1;

  // librdkafka's log lines for take_log(), behind their own mutex: librdkafka logs from
  // inside calls made with mu_ held.
  LogBuffer log_{"librdkafka"};

  std::thread thread_;  // last: starts once everything above is initialised
};

std::unique_ptr<Sink> create_kafka_sink(const Options& options);

}  // namespace outbox::sinks
