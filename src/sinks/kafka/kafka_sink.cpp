// The Kafka sink (kafka_sink.hpp says what it sends and what each outcome means): the
// producer, its thread, start() and the queuing of batches (finish(): kafka_finish.cpp).
//
// A librdkafka fatal error (e.g. the idempotent producer's unrecoverable sequence errors)
// makes every pending outcome of every started batch kUnavailable and usable() false for
// good; the relay then destroys the sink and creates a new one.
//
// Outcome vectors are written only between a batch's start() and the end of its finish()
// (or of send()). A batch's messages and outcomes must stay valid until then, or until the
// sink is destroyed: the destructor stops the thread first, and a batch still started then
// is forgotten, its outcomes not touched.
//
// Threads: besides librdkafka's, one of the sink's own, started in the constructor (with
// signals blocked, as the relay creates sinks) and joined by the destructor. start() hands it
// the batch; it queues the messages (routing, headers), flushes, and serves the delivery
// reports, beside the relay's database work. One mutex guards the sink's state; callbacks take
// it and never throw; no librdkafka call that serves callbacks is made, nor the WaitObserver
// called (by finish(), on the relay's thread, every 100 ms, with the latest error_cb text),
// while it is held. librdkafka's log lines are kept for take_log() (at most kMaxLogLines
// between two calls), never written to stderr.
#include "sinks/kafka/kafka_sink.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "sinks/kafka/kafka_options.hpp"

namespace outbox::sinks {

namespace {

using Clock = std::chrono::steady_clock;

// How long one rd_kafka_poll may wait before `deadline`: at most 100 ms, so that a fatal error
// is noticed soon.
int poll_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count(), 0, 100));
}

}  // namespace

KafkaSink::KafkaSink(const Options& options) {
  KafkaSettings settings = kafka_settings(options);
  std::unique_ptr<rd_kafka_conf_t, ConfDeleter> conf = std::move(settings.conf);
  queue_.configure(std::move(settings.topic_template), settings.timestamp_from_event,
                   std::move(settings.cloudevents));
  description_ = std::move(settings.description);
  max_message_bytes_ = settings.max_message_bytes;
  secrets_ = std::move(settings.secrets);
  straggler_timeout_ = settings.straggler_timeout;
  try {
    partitioner_ = std::make_unique<KafkaPartitioner>(settings.partitioner);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("kafka sink: ") + e.what());
  }

  rd_kafka_conf_set_opaque(conf.get(), this);
  rd_kafka_conf_set_dr_msg_cb(conf.get(), &KafkaSink::on_delivery);
  rd_kafka_conf_set_error_cb(conf.get(), &KafkaSink::on_error);
  rd_kafka_conf_set_log_cb(conf.get(), &KafkaSink::on_log);

  char errstr[512];
  rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), errstr, sizeof errstr);
  if (rk_ == nullptr) {
    throw ConfigError(redacted(std::string("kafka sink: ") + errstr, secrets_));
  }
  conf.release();  // rd_kafka_new took it
  queue_.attach(rk_, partitioner_.get());
  try {
    thread_ = std::thread(&KafkaSink::run, this);
  } catch (...) {
    rd_kafka_destroy(rk_);
    throw;
  }
}

KafkaSink::~KafkaSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  // Drop what is still queued or in flight: from batches that timed out (their outcomes were
  // reported as kUnavailable already) and from batches still started (the relay has given up
  // on them; their outcome vectors may be gone, so the reports must find no batch). The relay
  // sends them again.
  std::unique_lock<std::mutex> lock(mu_);
  queue_.drop_jobs();
  batches_.clear();
  lock.unlock();
  rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_poll(rk_, 0);
  queue_.destroy_topics();
  rd_kafka_destroy(rk_);
}

std::string KafkaSink::describe() const { return description_; }

void KafkaSink::run() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (queue_.has_job()) {
      const KafkaQueue::Job job = queue_.take_job();
      try {
        queue(lock, *job.batch, *job.messages);
        pass_rejected_keys_on(*job.batch);
      } catch (...) {
        // Out of memory: what was not queued fails, and holds back what comes after.
        if (!lock.owns_lock()) lock.lock();
        if (!stopping_) {
          job.batch->fail_pending("not sent: the kafka sink ran out of memory");
          queue_.hold_back("not sent: an earlier message could not be queued");
        }
      }
      if (stopping_) break;
      job.batch->queued = true;
      job.batch->progress_at = Clock::now();
      changed_.notify_all();
      continue;
    }
    if (!any_pending()) {
      changed_.wait(lock);
      continue;
    }
    // Serve reports. A whole batch is queued now: flush, so that it goes out at once
    // instead of after linger.ms. Both return within 1 ms: a new job is not kept waiting.
    const bool flush = rd_kafka_outq_len(rk_) > 0;
    lock.unlock();
    if (flush) {
      rd_kafka_flush(rk_, 1);
    } else {
      rd_kafka_poll(rk_, 1);
    }
    lock.lock();
    changed_.notify_all();
  }
}

void KafkaSink::start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
                      std::chrono::milliseconds timeout) {
  outcomes.resize(messages.size());
  const auto deadline = Clock::now() + timeout;

  std::unique_lock<std::mutex> lock(mu_);
  // Nothing started: no message that a new one could overtake.
  if (batches_.empty()) {
    queue_.release();
    partitioner_->clear_held();
  }

  Batch& batch = batches_.emplace_back();
  try {
    // Keys rejected in unfinished batches that are queued already; those still to be queued
    // pass theirs on when they are (pass_rejected_keys_on).
    for (const Batch& earlier : batches_) {
      if (earlier.queued) batch.earlier_keys.add_all(earlier.rejected_keys);
    }
    batch.first_seq = next_seq_;
    batch.messages = &messages;
    batch.outcomes = &outcomes;
    batch.waiting.assign(messages.size(), 1);
    batch.pending = messages.size();
    batch.deadline = deadline;
    batch.timeout = timeout;
    next_seq_ += messages.size();
    queue_.add_job(KafkaQueue::Job{&batch, &messages});
  } catch (...) {
    batches_.pop_back();  // not started: finish() must not wait for it
    throw;
  }
  lock.unlock();
  changed_.notify_all();
}

void KafkaSink::queue(std::unique_lock<std::mutex>& lock, Batch& batch,
                      const std::vector<Message>& messages) {
  if (check_fatal()) {
    fail_all_on_fatal(lock);
    return;
  }
  std::string topic;
  std::string topic_error;
  for (std::size_t i = 0; i < messages.size();) {
    if (stopping_) return;
    // An earlier batch's messages could not be queued, or were purged by a timeout (maybe
    // while produce_one waited for room): queuing this one could overtake them.
    if (queue_.held_back()) {
      batch.fail_pending(queue_.held_back_reason());
      return;
    }
    const Message& m = messages[i];
    // An earlier message of its key was not delivered: this one must not be delivered ahead of
    // it (nor may later ones of the key, here or in later batches).
    const std::string* rejected = batch.rejected_keys.find(m);
    if (rejected == nullptr) rejected = batch.earlier_keys.find(m);
    if (rejected != nullptr) {
      const std::string why = *rejected;
      batch.settle(i, Outcome{Delivery::kDeferred, "not sent: an earlier event of its key " + why});
      batch.rejected_keys.add(m, why);
    } else if (!queue_.route(m, topic, topic_error)) {
      batch.reject(i, m, topic_error);
    } else {
      const std::optional<rd_kafka_resp_err_t> err = produce_one(lock, batch, i, topic);
      if (!err) continue;  // stopping, or held back: the checks above end the pass
      if (*err != RD_KAFKA_RESP_ERR_NO_ERROR && !not_queued(batch, i, *err, topic)) return;
    }
    ++i;
  }
}

std::optional<rd_kafka_resp_err_t> KafkaSink::produce_one(std::unique_lock<std::mutex>& lock,
                                                          Batch& batch, std::size_t i,
                                                          const std::string& topic) {
  rd_kafka_topic_t* rkt = queue_.topic_handle(topic);
  if (rkt == nullptr) {
    const rd_kafka_resp_err_t err = rd_kafka_last_error();
    return err == RD_KAFKA_RESP_ERR_NO_ERROR ? RD_KAFKA_RESP_ERR__INVALID_ARG : err;
  }
  const Message& m = (*batch.messages)[i];
  for (;;) {  // until queued, or not queueable
    const rd_kafka_resp_err_t err = queue_.produce(rkt, m, batch.first_seq + i);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return err;
    const int wait_ms = poll_ms(batch.deadline);
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || wait_ms == 0) return err;
    // Make room: serve delivery reports (their callbacks take the lock).
    lock.unlock();
    rd_kafka_poll(rk_, wait_ms);
    lock.lock();
    if (stopping_ || queue_.held_back()) return std::nullopt;  // a timeout purged meanwhile
  }
}

bool KafkaSink::not_queued(Batch& batch, std::size_t i, rd_kafka_resp_err_t err,
                           const std::string& topic) {
  const Message& m = (*batch.messages)[i];
  if (err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
    // Its partition has no leader: this message alone fails, the others go on.
    if (auto refusal = partitioner_->take(batch.first_seq + i)) {
      refused(batch, i, *refusal, topic.c_str());
      return true;
    }
  }
  if (classify(err) == Delivery::kRejected) {
    batch.reject(i, m, error_text(err));
    return true;
  }
  // Cannot queue, and may not skip to later messages, of this batch or of batches started
  // before this one finishes (they could share its key).
  if (err == RD_KAFKA_RESP_ERR__FATAL) check_fatal();
  const std::string why = fatal_ ? fatal_error_ : error_text(err);
  batch.settle(i, Outcome{Delivery::kUnavailable, why});
  const std::string not_sent =
      "not sent: an earlier message of the batch could not be queued: " + why;
  for (std::size_t j = i + 1; j < batch.waiting.size(); ++j) {
    if (batch.waiting[j]) batch.settle(j, Outcome{Delivery::kUnavailable, not_sent});
  }
  queue_.hold_back("not sent: an earlier message could not be queued: " + why);
  return false;
}

std::unique_ptr<Sink> create_kafka_sink(const Options& options) {
  return std::make_unique<KafkaSink>(options);
}

}  // namespace outbox::sinks
