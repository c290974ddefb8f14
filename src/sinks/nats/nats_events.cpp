// The NATS sink's callbacks from cnats' threads: PubAcks and connection events, and the log
// lines they leave for take_log(). Each finds its sink through the registry of live sinks
// (nats_sink.hpp), holding the registry's lock while it uses the sink. Also the registry
// itself and the destructor.
//
// Callbacks (PubAcks, connection events) arrive on cnats' threads and may arrive after the
// sink is gone (cnats' subscription threads are detached): they find the sink through a
// registry of live sinks, and a callback for a sink no longer registered only frees what it
// was given. The destructor flushes (if connected, at most 500 ms), closes the connection,
// leaves the registry (waiting for a running callback), and destroys the context, the
// connection and the options. cnats' library-wide state stays until nats_Close() (the unit
// tests call nats_CloseAndWait() at exit).
//
// Logs: connection events (connected, disconnected, reconnected, closed) and cnats' async
// errors are kept for take_log(), at most kMaxLogLines between two calls; nothing goes to
// stderr.
#include <cstdint>
#include <string>
#include <utility>

#include "sinks/nats/nats_sink.hpp"

namespace outbox::sinks {

std::mutex& NatsSink::registry_mu() {
  static auto* mu = new std::mutex;  // never destroyed: a callback may run at exit
  return *mu;
}

std::unordered_set<const void*>& NatsSink::registry() {
  static auto* live = new std::unordered_set<const void*>;
  return *live;
}

NatsSink::~NatsSink() { teardown(); }

void NatsSink::teardown() noexcept {
  {
    // A batch still started is forgotten: PubAcks that come during the close find nothing.
    std::lock_guard<std::mutex> lock(mu_);
    batches_.clear();
  }
  if (nc_ != nullptr) {
    // What was published and not yet written goes out (the stream de-duplicates it).
    if (natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED) {
      natsConnection_FlushTimeout(nc_, 500);
    }
    natsConnection_Close(nc_);
  }
  {
    // After this, no callback touches the sink (one running now has finished).
    std::lock_guard<std::mutex> lock(registry_mu());
    registry().erase(this);
  }
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (nc_ != nullptr) natsConnection_Destroy(nc_);
  if (opts_ != nullptr) natsOptions_Destroy(opts_);
  if (stats_ != nullptr) natsStatistics_Destroy(stats_);
  stats_ = nullptr;
  js_ = nullptr;
  nc_ = nullptr;
  opts_ = nullptr;
}

void NatsSink::on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    if (registry().count(closure) != 0) static_cast<NatsSink*>(closure)->acked(msg, pa, pae);
  }
  natsMsg_Destroy(msg);  // the handler owns the message
}

void NatsSink::on_async_error(natsConnection* nc, natsSubscription*, natsStatus err,
                              void* closure) {
  std::lock_guard<std::mutex> lock(registry_mu());
  if (registry().count(closure) == 0) return;
  try {
    std::string text = std::string("asynchronous error: ") + natsStatus_GetText(err);
    const char* last = nullptr;
    if (natsConnection_GetLastError(nc, &last) != NATS_OK && last != nullptr && *last != '\0') {
      text += std::string(" (") + last + ")";
    }
    static_cast<NatsSink*>(closure)->connection_event(3, text.c_str(), false);
  } catch (...) {
  }
}

void NatsSink::on_connected(natsConnection*, void* closure) {
  std::lock_guard<std::mutex> lock(registry_mu());
  if (registry().count(closure) != 0) {
    static_cast<NatsSink*>(closure)->connection_event(6, "connected", true);
  }
}

void NatsSink::on_disconnected(natsConnection* nc, void* closure) {
  std::lock_guard<std::mutex> lock(registry_mu());
  if (registry().count(closure) == 0) return;
  try {
    std::string text = "disconnected";
    const char* last = nullptr;
    if (natsConnection_GetLastError(nc, &last) != NATS_OK && last != nullptr && *last != '\0') {
      text += std::string(" (") + last + ")";
    }
    auto* sink = static_cast<NatsSink*>(closure);
    sink->connection_event(4, text.c_str(), false);
    sink->connection_lost(text);
  } catch (...) {
  }
}

void NatsSink::on_reconnected(natsConnection*, void* closure) {
  std::lock_guard<std::mutex> lock(registry_mu());
  if (registry().count(closure) != 0) {
    static_cast<NatsSink*>(closure)->connection_event(6, "reconnected", true);
  }
}

void NatsSink::on_closed(natsConnection*, void* closure) {
  std::lock_guard<std::mutex> lock(registry_mu());
  if (registry().count(closure) != 0) {
    auto* sink = static_cast<NatsSink*>(closure);
    sink->connection_event(4, "connection closed", false);
    sink->connection_lost("connection closed");
  }
}

void NatsSink::connection_lost(const std::string& why) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_.empty()) return;
    // What the old server did not answer it never will: cnats 3.4 keeps such a publish pending
    // until its MaxWait (the batch's timeout + 1 s), and finish() would wait for it. Settled
    // now, the relay sends it again once reconnected (the stream drops a copy it stored, by
    // Nats-Msg-Id). Its late PubAck or timeout finds no entry and only frees it.
    const std::string error = "nats: connection lost before its PubAck (" + why + ")";
    for (const auto& [msg, seq] : in_flight_) {
      Batch* batch = batch_of(seq);
      if (batch == nullptr) continue;
      const std::size_t i = static_cast<std::size_t>(seq - batch->first_seq);
      if (!batch->waiting[i]) continue;
      settle(*batch, i, Outcome{Delivery::kUnavailable, error});
      // It may be lost: no later message of its key may be stored before its re-send, so the
      // batches started after its own (which publish later) defer the key too.
      bool later = false;
      for (Batch& b : batches_) {
        later = later || &b == batch;
        if (later) b.failed.add((*batch->messages)[i], error);
      }
    }
    in_flight_.clear();
  } catch (...) {
    // Out of memory: what is left pending waits for its MaxWait.
  }
  changed_.notify_all();
}

void NatsSink::connection_event(int level, const char* what, bool up) noexcept {
  try {
    const std::string text = std::string("nats: ") + what;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (up) {
        last_error_.clear();
        connected_at_ = Clock::now();  // not the constructor's connect: it calls no callback
      } else {
        last_error_ = text;
      }
    }
    changed_.notify_all();
    log(level, text);
  } catch (...) {
  }
}

void NatsSink::log(int level, std::string text) noexcept { log_.add(level, std::move(text)); }

std::vector<LogLine> NatsSink::take_log() { return log_.take(); }

void NatsSink::acked(natsMsg* msg, const jsPubAck* pa, const jsPubAckErr* pae) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(msg);
    if (it == in_flight_.end()) return;
    const std::uint64_t seq = it->second;
    in_flight_.erase(it);
    Batch* batch = batch_of(seq);
    if (batch == nullptr) return;  // a late answer for a batch that is finished
    const std::size_t i = static_cast<std::size_t>(seq - batch->first_seq);
    if (pa != nullptr || pae == nullptr) {
      settle(*batch, i, Outcome{Delivery::kAcked, {}});  // a duplicate too: the stream has it
      last_error_.clear();
    } else {
      const std::string subject = natsMsg_GetSubject(msg) ? natsMsg_GetSubject(msg) : "";
      const std::string text = pae->ErrText ? pae->ErrText : natsStatus_GetText(pae->Err);
      if (pae->Err == NATS_NO_RESPONDERS) {
        // A missing stream, or JetStream not ready (restarting): finish() asks which.
        if (batch->waiting[i]) batch->no_responders.emplace_back(i, subject);
        settle(*batch, i,
               Outcome{Delivery::kUnavailable,
                       "JetStream did not answer for subject \"" + subject + "\" (no responders)"});
      } else if (pae->Err == NATS_ERR && pae->ErrCode == JSStreamNotMatchErr) {
        if (batch->config_error.empty()) {
          batch->config_error = "nats sink: subject \"" + subject +
                                "\" is not stored by stream \"" + settings_.stream +
                                "\" (the stream option): " + text;
        }
        settle(*batch, i, Outcome{Delivery::kUnavailable, batch->config_error});
      } else if (pae->Err == NATS_TIMEOUT) {
        settle(*batch, i, Outcome{Delivery::kUnavailable, "no PubAck in time: " + text});
      } else {
        std::string error = "JetStream refused subject \"" + subject + "\": " + text;
        if (pae->ErrCode != 0) error += " (error " + std::to_string(pae->ErrCode) + ")";
        settle(*batch, i, Outcome{classify(pae->Err, pae->ErrCode), std::move(error)});
      }
    }
    // Only a batch's last outcome ends finish()'s wait: no wake-up (two context switches) per
    // PubAck.
    if (batch->pending == 0) changed_.notify_all();
  } catch (...) {
    // Out of memory: the message stays pending until the deadline.
  }
}

}  // namespace outbox::sinks
