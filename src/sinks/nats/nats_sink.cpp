// The NATS sink (nats_sink.hpp says what it sends and what each outcome means): the
// connection, start() and its publishes.
//
// Threads and signals: cnats runs threads of its own (a reader and a flusher per connection,
// a reconnect thread when the connection is lost, a delivery thread for the PubAck
// subscription, and the library's timer, callback and GC threads). The constructor connects
// and makes the JetStream context; the relay calls it with every signal blocked, so those
// threads, and the ones they start later (a reconnect comes from the reader or timer thread),
// inherit a blocked mask. The PubAck subscription's thread is started by the first publish,
// on the relay's thread: start() blocks every signal around its cnats publish calls (unblocked
// while it asks the WaitObserver), so that one never runs PostgreSQL's handlers either.
//
// Callbacks (PubAcks, connection events), the destructor and the log: nats_events.cpp.
//
// cnats' nats_Open (on first use, in the constructor) sets SIGPIPE to SIG_IGN for the process
// (PostgreSQL's backends and background workers ignore it already) and calls srand()
// (PostgreSQL does not use rand()).
#include "sinks/nats/nats_sink.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "sinks/common/cloudevents.hpp"
#include "sinks/common/failed_keys.hpp"
#include "sinks/nats/nats_subject.hpp"
#include "sinks/common/signals_blocked.hpp"

namespace outbox::sinks {

namespace {

using Clock = std::chrono::steady_clock;

// cnats' text for a status, with the thread's last error detail when there is one.
std::string status_text(natsStatus s) {
  std::string text = natsStatus_GetText(s);
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  if (last == s && detail != nullptr && *detail != '\0' && text != detail) {
    text += ": ";
    text += detail;
  }
  return text;
}

void check(natsStatus s, const char* what) {
  if (s != NATS_OK) throw ConfigError(std::string("nats sink: ") + what + ": " + status_text(s));
}

// Why a message cannot be sent with its headers as they are, or "".
std::string headers_error(const Message& m, bool cloudevents) {
  for (const auto& [name, value] : {std::pair<const char*, std::string_view>{"id", m.id},
                                    {"type", m.type},
                                    {"aggregatetype", m.aggregatetype},
                                    {"aggregateid", m.aggregateid}}) {
    std::string error = nats::header_error(name, value);
    if (!error.empty()) return error;
  }
  for (const auto& [name, value] : m.headers) {
    std::string error = nats::header_error(name, value);
    if (error.empty()) error = nats::own_header_error(name, cloudevents);
    if (!error.empty()) return error;
  }
  return {};
}

}  // namespace

NatsSink::NatsSink(const Options& options) : settings_(nats_settings(options)) {
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    registry().insert(this);
  }
  try {
    check(natsOptions_Create(&opts_), "options");
    std::vector<const char*> urls;
    for (const std::string& url : settings_.servers) urls.push_back(url.c_str());
    check(natsOptions_SetServers(opts_, urls.data(), static_cast<int>(urls.size())), "servers");
    check(natsOptions_SetName(opts_, "outbox-relay"), "name");
    check(natsOptions_SetTimeout(opts_, 2000), "timeout");
    // Reconnect for ever: the relay, not the client, decides when to give up on a batch.
    check(natsOptions_SetMaxReconnect(opts_, -1), "max reconnect");
    check(natsOptions_SetReconnectWait(opts_, 500), "reconnect wait");
    check(natsOptions_SetPingInterval(opts_, 10000), "ping interval");
    // No reconnect buffer: a publish while reconnecting fails at once instead of waiting there
    // to be sent after the reconnect, maybe ahead of a lost earlier message of its key.
    check(natsOptions_SetReconnectBufSize(opts_, 0), "reconnect buffer");
    // A server that is down when the sink is created is connected to later.
    check(natsOptions_SetRetryOnFailedConnect(opts_, true, &NatsSink::on_connected, this),
          "retry on failed connect");
    check(natsOptions_SetErrorHandler(opts_, &NatsSink::on_async_error, this), "error handler");
    check(natsOptions_SetDisconnectedCB(opts_, &NatsSink::on_disconnected, this), "callback");
    check(natsOptions_SetReconnectedCB(opts_, &NatsSink::on_reconnected, this), "callback");
    check(natsOptions_SetClosedCB(opts_, &NatsSink::on_closed, this), "callback");
    if (!settings_.user.empty()) {
      // Not check(): cnats' message must not carry the password.
      if (natsOptions_SetUserInfo(opts_, settings_.user.c_str(), settings_.password.c_str()) !=
          NATS_OK) {
        throw ConfigError("nats sink: user and password were refused");
      }
    }
    if (!settings_.token.empty() &&
        natsOptions_SetToken(opts_, settings_.token.c_str()) != NATS_OK) {
      throw ConfigError("nats sink: token was refused");
    }
    if (!settings_.creds.empty()) {
      check(natsOptions_SetUserCredentialsFromFiles(opts_, settings_.creds.c_str(), nullptr),
            "creds");
    }
    // cnats 3.4 does not infer TLS from a tls:// URL; verified against the system's CAs
    // unless tls.ca_file names others.
    bool tls = !settings_.ca_file.empty();
    for (const std::string& url : settings_.servers) tls = tls || url.rfind("tls://", 0) == 0;
    if (tls) check(natsOptions_SetSecure(opts_, true), "tls");
    if (!settings_.ca_file.empty()) {
      check(natsOptions_LoadCATrustedCertificates(opts_, settings_.ca_file.c_str()), "tls.ca_file");
    }
    check(natsStatistics_Create(&stats_), "statistics");
    const natsStatus s = natsConnection_Connect(&nc_, opts_);
    if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
      throw std::runtime_error("nats sink: cannot connect: " + status_text(s));
    }
    jsOptions jo;
    check(jsOptions_Init(&jo), "jetstream options");
    jo.PublishAsync.AckHandler = &NatsSink::on_ack;
    jo.PublishAsync.AckHandlerClosure = this;
    jo.PublishAsync.MaxPending = settings_.max_pending;
    jo.PublishAsync.StallWait = 50;  // a stalled publish returns in time to ask the observer
    check(natsConnection_JetStream(&js_, nc_, &jo), "jetstream context");
  } catch (...) {
    teardown();
    throw;
  }
}

bool NatsSink::usable() const { return natsConnection_Status(nc_) != NATS_CONN_STATUS_CLOSED; }

std::size_t NatsSink::max_message_bytes() const {
  const int64_t max = natsConnection_GetMaxPayload(nc_);
  return max > 0 ? static_cast<std::size_t>(max) : 0;
}

Delivery NatsSink::classify(natsStatus status, jsErrCode code) {
  if (status == NATS_MAX_PAYLOAD) return Delivery::kRejected;
  if (status == NATS_ERR && code == JSStreamMessageExceedsMaximumErr) return Delivery::kRejected;
  return Delivery::kUnavailable;
}

NatsSink::Batch* NatsSink::batch_of(std::uint64_t seq) {
  for (Batch& batch : batches_) {
    if (seq >= batch.first_seq && seq - batch.first_seq < batch.waiting.size()) return &batch;
  }
  return nullptr;
}

bool NatsSink::wait_connected(Clock::time_point deadline, bool& abandoned) {
  auto observe_at = Clock::now();
  for (;;) {
    if (natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED) return true;
    const auto now = Clock::now();
    if (now >= observe_at) {
      std::string error;
      {
        std::lock_guard<std::mutex> lock(mu_);
        error = last_error_;
      }
      if (!keep_waiting(error)) {
        abandoned = true;
        return false;
      }
      observe_at = Clock::now() + kObserveEvery;
    }
    if (now >= deadline) return false;
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_until(lock, std::min(deadline, observe_at));
  }
}

std::uint64_t NatsSink::connection_count() {
  std::uint64_t reconnects = 0;
  if (natsConnection_GetStats(nc_, stats_) != NATS_OK ||
      natsStatistics_GetCounts(stats_, nullptr, nullptr, nullptr, nullptr, &reconnects) !=
          NATS_OK) {
    return ~std::uint64_t{0};  // unknown: publishes nothing (cnats fails only when out of memory)
  }
  return reconnects;
}

std::string NatsSink::prepare(Batch& batch, FailedKeys& failed) {
  const std::uint64_t connection = connection_count();
  std::lock_guard<std::mutex> lock(mu_);
  batch.connection = connection;
  // Every batch started before this one published all it would in its start(): their failed
  // keys are known, but for those of a lost connection (nats_events.cpp adds them).
  for (const Batch& earlier : batches_) {
    if (&earlier == &batch) break;
    failed.add_all(earlier.failed);
    if (earlier.pending > 0 && earlier.connection != connection) {
      // Its connection is gone, and its loss not yet handled: its keys are not known yet.
      return "not sent: an earlier batch waits for PubAcks of a lost connection";
    }
  }
  return held_back_;
}

natsStatus NatsSink::publish(const Message& m, std::uint64_t seq, const std::string& subject,
                             Clock::time_point deadline, std::chrono::milliseconds timeout,
                             std::optional<SignalsBlocked>& blocked, bool& abandoned) {
  natsMsg* msg = nullptr;
  natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, m.payload.data(),
                                static_cast<int>(m.payload.size()));
  if (s != NATS_OK) return s;
  // cnats copies names and values; the NUL-terminated copies reuse two buffers (no
  // allocation per header once they are large enough).
  const auto add = [&](std::string_view name, std::string_view value) {
    if (s != NATS_OK) return;
    name_buf_.assign(name);
    value_buf_.assign(value);
    s = natsMsgHeader_Add(msg, name_buf_.c_str(), value_buf_.c_str());
  };
  add("id", m.id);
  add("type", m.type);
  add("aggregatetype", m.aggregatetype);
  add("aggregateid", m.aggregateid);
  for (const auto& [name, value] : m.headers) add(name, value);
  if (settings_.cloudevents.enabled) {
    for (const auto& [name, value] : cloudevents::attributes(m, settings_.cloudevents.source)) {
      add("ce-" + name, value);
      if (name == "datacontenttype") add("Content-Type", value);
    }
  }
  id_buf_.assign(m.id);
  jsPubOptions po;
  if (s == NATS_OK) s = jsPubOptions_Init(&po);
  if (s != NATS_OK) {
    natsMsg_Destroy(msg);
    return s;
  }
  po.MsgId = id_buf_.c_str();  // the Nats-Msg-Id header
  if (!settings_.stream.empty()) po.ExpectStream = settings_.stream.c_str();
  // cnats forgets an unanswered publish after this (its PubAck handler sees a timeout): a
  // second after the batch's deadline, so that finish() reports the wait it timed out itself.
  po.MaxWait = std::max<int64_t>(1, timeout.count()) + 1000;

  natsMsg* const key = msg;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_[key] = seq;  // before: the PubAck may come before js_PublishMsgAsync returns
  }
  for (;;) {
    // Signals stay blocked across the publishes of a batch (two syscalls a message saved);
    // unblocked before the observer is asked, so that it sees pending interrupts.
    if (!blocked) blocked.emplace();
    s = js_PublishMsgAsync(js_, &msg, &po);
    // NATS_TIMEOUT with the message still ours: max_pending were unanswered for StallWait.
    if (s != NATS_TIMEOUT || msg == nullptr || Clock::now() >= deadline) break;
    std::string error;
    {
      std::lock_guard<std::mutex> lock(mu_);
      error = last_error_;
    }
    blocked.reset();
    if (!keep_waiting(error)) {
      abandoned = true;
      break;
    }
  }
  if (s != NATS_OK) {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.erase(key);
    natsMsg_Destroy(msg);  // not taken: still ours
  }
  return s;
}

void NatsSink::start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
                     std::chrono::milliseconds timeout) {
  outcomes.resize(messages.size());
  const auto deadline = Clock::now() + timeout;
  FailedKeys failed;     // keys whose messages this batch may not publish
  std::string not_sent;  // set when the rest of the batch is not published
  Batch* batch = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (batches_.empty()) held_back_.clear();  // nothing started that could be overtaken
    not_sent = held_back_;
    batch = &batches_.emplace_back();
    batch->messages = &messages;
    batch->outcomes = &outcomes;
    batch->waiting.assign(messages.size(), 1);
    batch->pending = messages.size();
    batch->first_seq = next_seq_;
    batch->deadline = deadline;
    batch->timeout = timeout;
    next_seq_ += messages.size();
  }
  try {
    publish_batch(*batch, messages, failed, not_sent);
  } catch (...) {
    // Not started: no outcome of it is written later, and no later batch overtakes what it
    // may have published.
    std::lock_guard<std::mutex> lock(mu_);
    batches_.pop_back();
    held_back_ = "not sent: an earlier batch failed while it was published";
    throw;
  }
}

void NatsSink::publish_batch(Batch& batch, const std::vector<Message>& messages, FailedKeys& failed,
                             std::string& not_sent) {
  bool abandoned = false;
  std::vector<char> published(messages.size(), 0);
  if (not_sent.empty() && !wait_connected(batch.deadline, abandoned)) {
    not_sent =
        abandoned ? "not acknowledged: the relay stopped waiting"
                  : "not connected to NATS within " + std::to_string(batch.timeout.count()) + " ms";
  }
  if (not_sent.empty()) not_sent = prepare(batch, failed);
  std::optional<SignalsBlocked> blocked;  // see publish()
  std::string subject;
  std::string error;
  for (std::size_t i = 0; i < messages.size() && not_sent.empty(); ++i) {
    const Message& m = messages[i];
    Outcome outcome;
    if (const std::string* why = failed.find(m)) {
      outcome = {Delivery::kDeferred,
                 "not sent: an earlier event of its key was not sent: " + *why};
    } else if (!nats::route_subject(settings_.subject_template, m, subject, error)) {
      outcome = {Delivery::kRejected, error};
    } else if (!(error = headers_error(m, settings_.cloudevents.enabled)).empty()) {
      outcome = {Delivery::kRejected, error};
    } else if (connection_count() != batch.connection) {
      // A message of the old connection may be lost: nothing after it goes over the new one.
      not_sent = "not sent: the connection to NATS was lost while the batch was published";
      break;
    } else {
      const natsStatus s = publish(m, batch.first_seq + i, subject, batch.deadline, batch.timeout,
                                   blocked, abandoned);
      if (s == NATS_OK) {
        published[i] = 1;
        continue;
      }
      if (abandoned) {
        not_sent = "not acknowledged: the relay stopped waiting";
        break;
      }
      if (s == NATS_MAX_PAYLOAD) {
        outcome = {Delivery::kRejected, "message too large for the server (max_payload " +
                                            std::to_string(max_message_bytes()) +
                                            " bytes, data and headers): " + status_text(s)};
      } else {
        // Nothing later may overtake it: the rest of the batch is not published.
        std::string why = status_text(s);
        if (s == NATS_INSUFFICIENT_BUFFER) why = "the connection is down (reconnecting)";
        std::lock_guard<std::mutex> lock(mu_);
        settle(batch, i, Outcome{Delivery::kUnavailable, "not published: " + why});
        not_sent = "not sent: an earlier message of the batch could not be published: " + why;
        break;
      }
    }
    failed.add(m, outcome.error);
    std::lock_guard<std::mutex> lock(mu_);
    batch.failed.add(m, outcome.error);
    settle(batch, i, std::move(outcome));
  }
  blocked.reset();
  std::lock_guard<std::mutex> lock(mu_);
  if (!not_sent.empty()) {
    // The messages not published; those published keep waiting for their PubAcks. Batches
    // started before this one finishes publish nothing (they could share a key).
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if (!published[i]) settle(batch, i, Outcome{Delivery::kUnavailable, not_sent});
    }
    if (held_back_.empty())
      held_back_ = "not sent: an earlier batch was not published: " + not_sent;
  }
  batch.abandoned = abandoned;
}

std::unique_ptr<Sink> create_nats_sink(const Options& options) {
  return std::make_unique<NatsSink>(options);
}

}  // namespace outbox::sinks
