// The NATS JetStream sink: publishes each event to a JetStream stream through cnats (the NATS
// C client, 3.4) and marks it delivered once the stream's PubAck says it is stored.
//
// Options (outbox.configure_sink('nats', '{...}')): nats_options.hpp, documented in
// docs/sink-options.md. Required: servers.
//
// Each message: subject from subject.template (nats_subject.hpp); data = the payload;
// headers Nats-Msg-Id = the event id (JetStream drops a re-send of an id it stored within the
// stream's duplicate window, and acknowledges it as a duplicate), id, type, aggregatetype,
// aggregateid, then the event's own headers; with cloudevents = true also ce-specversion,
// ce-id, ce-source, ce-type, ce-subject, ce-time, ce-datacontenttype and Content-Type (the
// CloudEvents NATS binding); with the stream option, Nats-Expected-Stream.
//
// Pipelining: start() waits until the connection is up (or the deadline), publishes every
// message of the batch asynchronously (js_PublishMsgAsync, at most max_pending unacknowledged;
// it blocks only while max_pending are unanswered) and returns; finish() waits for the oldest
// started batch until each message has its PubAck or the batch's deadline (start() +
// timeout) passed. Both call keep_waiting() at least every 100 ms while they wait, holding
// none of the sink's locks. The relay keeps at most two batches started; PubAcks find their
// batch by the sequence number their message was given. send() is start() + finish() with no
// other batch started. A batch still started when the sink is destroyed is forgotten first:
// its outcomes are not touched by the destructor or later.
//
// Outcomes:
//   kAcked        a PubAck, a duplicate one included (the stream has the event).
//   kRejected     the message cannot be sent as it is: its rendered subject is not a valid
//                 subject, a header cannot travel (nats_subject.hpp), it is larger than the
//                 server's max_payload (cnats refuses it before it is sent), or the stream
//                 refused it in its PubAck (JetStream error 10054, larger than the stream's
//                 max_msg_size).
//   kDeferred     not published, because an earlier message of its key (aggregatetype,
//                 aggregateid) was rejected or deferred before it was handed to cnats, in the
//                 batch or in a batch that was unfinished when this one was started: "not
//                 sent: an earlier event of its key was not sent: <its error>".
//                 A message the stream refuses in its PubAck (or that gets "no responders")
//                 was published already, and so were the later messages of its key: they
//                 cannot be held back, and may be acked. (One connection, and one stream per
//                 subject, keep the published messages of a key in order; only what the stream
//                 refuses, or JetStream leaves unanswered while it restarts, leaves a gap.)
//                 With ${type} in subject.template, one key's messages may go to different
//                 subjects and streams: one that is not stored (its stream missing, or slow
//                 to answer) does not hold back a later one of its key that another stream
//                 stores, so the later one may be stored first.
//   kUnavailable  not connected before the deadline; the connection lost while a message
//                 waited for its PubAck ("nats: connection lost before its PubAck": cnats 3.4
//                 would keep it pending until its MaxWait, though a server that restarted
//                 never answers it; later messages of its key, in its batch and in batches
//                 started after it, are then kDeferred); a PubAck missing at the deadline
//                 ("timed out waiting for PubAck ...") or when the WaitObserver ends the wait;
//                 a publish cnats cannot take (connection closed or reconnecting: the sink
//                 has no reconnect buffer; max_pending full until the deadline), or a
//                 reconnect while the batch is published: then it and every later message of
//                 the batch are not published, nor is any message of a batch started before no
//                 started batch is left, so nothing overtakes it); any other JetStream
//                 error (storage full, no leader, ...); "no responders" that is not a
//                 confirmed missing stream (below). A message whose PubAck is missing may
//                 still be stored: the relay sends it again and the stream de-duplicates it
//                 by Nats-Msg-Id (within the duplicate window; after it, a copy).
//
// ConfigError from finish() (and send()): when no stream captures a subject, or the stream is
// not the expected one (Nats-Expected-Stream, JetStream error 10060). "No responders" to a
// publish means a missing stream or a JetStream that cannot answer (yet): a server restarting,
// JetStream disabled. finish() then asks JetStream which stream captures the subject (once
// per subject and batch, at most min(time left, 2 s); nats_lookup.hpp): only the answer "none"
// is a ConfigError. No answer, a stream found, the connection down or (re)connected less than
// kReconnectGrace ago: those messages are kUnavailable ("JetStream did not answer for subject
// ...: <why>"); nothing is cached beyond the batch. On a ConfigError the whole batch fails:
// no attempt is counted, nothing is dead-lettered, the relay reports it and tries again after
// outbox.retry_backoff_max. It is the batch's own: another started batch's PubAck does not
// make it fail.
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sinks/nats/nats_batch.hpp"
#include "sinks/nats/nats_options.hpp"
#include "sinks/common/log_buffer.hpp"
#include "sinks/common/signals_blocked.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks {

class NatsSink final : public Sink {
 public:
  // Throws ConfigError for bad options; not for a server that is down (it connects later).
  explicit NatsSink(const Options& options);
  ~NatsSink() override;
  NatsSink(const NatsSink&) = delete;
  NatsSink& operator=(const NatsSink&) = delete;

  void start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
             std::chrono::milliseconds timeout) override;
  void finish() override;
  bool usable() const override;
  std::string describe() const override { return settings_.description; }
  std::vector<LogLine> take_log() override;
  // The server's max_payload once connected (0 before).
  std::size_t max_message_bytes() const override;

  static constexpr std::size_t kMaxLogLines = LogBuffer::kDefaultMaxLines;
  // How often start() and finish() ask the WaitObserver while they wait.
  static constexpr std::chrono::milliseconds kObserveEvery{100};
  // After a reconnect, "no responders" is JetStream starting, not a missing stream.
  static constexpr std::chrono::seconds kReconnectGrace{5};

  // How a JetStream PubAck error counts for its message (kUnavailable for what the relay
  // should retry; ConfigError cases are handled by finish()).
  static Delivery classify(natsStatus status, jsErrCode code);

 private:
  using Clock = std::chrono::steady_clock;

  static void on_ack(jsCtx* js, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure);
  static void on_async_error(natsConnection* nc, natsSubscription* sub, natsStatus err,
                             void* closure);
  static void on_connected(natsConnection* nc, void* closure);
  static void on_disconnected(natsConnection* nc, void* closure);
  static void on_reconnected(natsConnection* nc, void* closure);
  static void on_closed(natsConnection* nc, void* closure);

  // The live sinks: a callback uses its sink only while it is registered, with the lock held.
  static std::mutex& registry_mu();
  static std::unordered_set<const void*>& registry();

  // In nats_events.cpp.
  void acked(natsMsg* msg, const jsPubAck* pa, const jsPubAckErr* pae) noexcept;
  void connection_event(int level, const char* what, bool up) noexcept;
  // The connection is gone: what waits for a PubAck will not get one.
  void connection_lost(const std::string& why) noexcept;
  void log(int level, std::string text) noexcept;
  void teardown() noexcept;
  using Batch = nats::Batch;

  // Settles message i of `batch` unless it has an outcome; caller holds mu_.
  static void settle(Batch& batch, std::size_t i, Outcome outcome) {
    batch.settle(i, std::move(outcome));
  }
  // The started batch of a message's sequence number, or nullptr; caller holds mu_.
  Batch* batch_of(std::uint64_t seq);
  // start()'s work: publishes what may be published, settles what fails before that.
  void publish_batch(Batch& batch, const std::vector<Message>& messages, FailedKeys& failed,
                     std::string& not_sent);
  // Waits until connected; false at the deadline or when the observer stops the wait.
  bool wait_connected(Clock::time_point deadline, bool& abandoned);
  // cnats' count of reconnects: which connection a publish goes over. Relay thread only.
  std::uint64_t connection_count();
  // After wait_connected(): records the batch's connection, adds the failed keys of the
  // batches started before it to `failed`, and says why it may publish nothing ("" if it may).
  std::string prepare(Batch& batch, FailedKeys& failed);
  // In nats_finish.cpp: the ConfigError text when a lookup confirms a subject of the batch's
  // "no responders" has no stream, else "" (and their outcomes say why they are unavailable).
  // Called and returns with mu_ held; unlocks it while it asks.
  std::string confirm_missing_stream(std::unique_lock<std::mutex>& lock, Batch& batch);
  // Publishes message i; returns the cnats status (NATS_OK: handed over).
  natsStatus publish(const Message& m, std::uint64_t seq, const std::string& subject,
                     Clock::time_point deadline, std::chrono::milliseconds timeout,
                     std::optional<SignalsBlocked>& blocked, bool& abandoned);

  NatsSettings settings_;
  natsOptions* opts_ = nullptr;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  natsStatistics* stats_ = nullptr;            // connection_count()'s
  std::string name_buf_, value_buf_, id_buf_;  // publish()'s NUL-terminated copies

  // Guards the started batches, in_flight_, held_back_, last_error_ and connected_at_.
  mutable std::mutex mu_;
  std::condition_variable changed_;  // a batch is complete, or the connection came up
  std::deque<Batch> batches_;        // started and not finished, oldest first
  std::uint64_t next_seq_ = 0;
  // Messages handed to cnats and not yet answered -> their sequence number. A message is
  // owned by cnats until its PubAck handler frees it, so its address is not reused meanwhile.
  std::unordered_map<natsMsg*, std::uint64_t> in_flight_;
  // Set when a batch left messages unpublished (kUnavailable): until no batch is started, a
  // new one publishes nothing, so that none of its messages overtakes them.
  std::string held_back_;
  std::string last_error_;  // the latest connection-level trouble ("" once all is well)
  std::optional<Clock::time_point> connected_at_;  // the last (re)connect after the first

  LogBuffer log_{"nats"};
};

std::unique_ptr<Sink> create_nats_sink(const Options& options);

}  // namespace outbox::sinks
