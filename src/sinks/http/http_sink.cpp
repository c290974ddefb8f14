// The HTTP sink's batches: per-key chains of requests, across the (at most two) started
// batches, and how a failure settles the rest. The requests themselves: http_request.cpp.
#include "sinks/http/http_sink.hpp"

#include <algorithm>
#include <new>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "sinks/http/http_batch.hpp"
#include "sinks/common/signals_blocked.hpp"

namespace outbox::sinks {

namespace {

using Clock = std::chrono::steady_clock;

// The error of the messages a failed one holds back; a deferred one passes its own on.
std::string deferral_of(const Outcome& failed) {
  if (failed.delivery == Delivery::kDeferred) return failed.error;
  return "not sent: an earlier event of its key was not delivered (" + failed.error + ")";
}

}  // namespace

HttpSink::HttpSink(const Options& options) : settings_(http_settings(options)) {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    throw std::runtime_error("http sink: curl_global_init failed");
  }
  multi_ = curl_multi_init();
  if (multi_ == nullptr) {
    curl_global_cleanup();
    throw std::runtime_error("http sink: curl_multi_init failed");
  }
  curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, settings_.max_concurrency);
  curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, settings_.max_concurrency);
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, settings_.max_concurrency);
}

HttpSink::~HttpSink() {
  // Started batches are forgotten: their outcomes are not touched again.
  active_.clear();  // removes the handles while the multi handle lives
  batches_.clear();
  for (CURL* easy : spare_) curl_easy_cleanup(easy);
  curl_multi_cleanup(multi_);
  curl_global_cleanup();
}

HttpSink::Batch* HttpSink::batch(std::uint64_t seq) {
  for (auto& b : batches_) {
    if (b->seq == seq) return b.get();
  }
  return nullptr;
}

void HttpSink::start(const std::vector<Message>& messages, std::vector<Outcome>& outcomes,
                     std::chrono::milliseconds timeout) {
  auto owned = std::make_unique<Batch>();
  Batch& b = *owned;
  const std::size_t n = messages.size();
  b.seq = next_seq_++;
  b.messages = &messages;
  b.outcomes = &outcomes;
  b.timeout = timeout;
  b.deadline = Clock::now() + timeout;
  b.next.assign(n, kNoNext);
  b.settled.assign(n, 0);
  b.unsettled = n;
  std::vector<std::size_t> heads;  // each key's first message
  for (std::size_t i = 0; i < n; ++i) {
    auto [it, first] = b.last.try_emplace({messages[i].aggregatetype, messages[i].aggregateid}, i);
    if (first) {
      heads.push_back(i);
    } else {
      b.next[it->second] = i;
      it->second = i;
    }
  }
  batches_.push_back(std::move(owned));
  try {
    perform();  // a given-up request that ended meanwhile frees its key first
    if (std::time(nullptr) < wait_until_) {
      const std::string error =
          "http: the receiver asked to wait until " + http_utc_text(wait_until_) + " (Retry-After)";
      for (std::size_t i = 0; i < n; ++i) {
        outcomes[i] = {Delivery::kUnavailable, error};
        b.settled[i] = 1;
        b.failed.add(messages[i], deferral_of(outcomes[i]));
      }
      b.unsettled = 0;
    } else {
      link(b, heads);
    }
    progress();
  } catch (...) {
    // Not started: nothing of it stays in curl, and no earlier batch hands a key over to it.
    drop_requests(b);
    for (auto& older : batches_) {
      for (auto it = older->handoff.begin(); it != older->handoff.end();) {
        it = it->second.first == b.seq ? older->handoff.erase(it) : std::next(it);
      }
    }
    batches_.pop_back();
    throw;
  }
}

void HttpSink::link(Batch& b, const std::vector<std::size_t>& heads) {
  for (std::size_t h : heads) {
    const Message& m = (*b.messages)[h];
    const std::string* failed = nullptr;
    for (auto& older : batches_) {
      if (older.get() != &b && (failed = older->failed.find(m)) != nullptr) break;
    }
    if (failed != nullptr) {
      settle(b, h, {Delivery::kDeferred, *failed});
      continue;
    }
    // Behind the newest earlier batch that has the key, if its message is still unanswered.
    bool waits = false;
    for (auto it = batches_.rbegin(); it != batches_.rend(); ++it) {
      Batch& older = **it;
      if (&older == &b) continue;
      auto last = older.last.find({m.aggregatetype, m.aggregateid});
      if (last == older.last.end()) continue;
      if (!older.settled[last->second]) {
        older.handoff[last->second] = {b.seq, h};
        waits = true;
      }
      break;
    }
    if (!waits) b.ready.push_back(h);
  }
}

void HttpSink::settle(Batch& b, std::size_t i, Outcome outcome) {
  if (b.settled[i]) return;
  b.settled[i] = 1;
  --b.unsettled;
  const bool acked = outcome.delivery == Delivery::kAcked;
  if (acked) ++b.acked;
  const std::string text = acked ? std::string() : deferral_of(outcome);
  const Message& m = (*b.messages)[i];
  (*b.outcomes)[i] = std::move(outcome);
  if (!acked) b.failed.add(m, text);
  // Walks the rest of the key: in this batch, then into the batch waiting for it.
  Batch* at = &b;
  std::size_t j = i;
  while (true) {
    std::size_t k = at->next[j];
    if (k == kNoNext) {
      auto h = at->handoff.find(j);
      if (h == at->handoff.end()) return;
      Batch* later = batch(h->second.first);
      k = h->second.second;
      at->handoff.erase(h);
      if (later == nullptr) return;
      at = later;
      if (!acked) at->failed.add(m, text);
    }
    if (acked) {
      at->ready.push_back(k);
      return;
    }
    if (!at->settled[k]) {
      at->settled[k] = 1;
      --at->unsettled;
      (*at->outcomes)[k] = {Delivery::kDeferred, text};
    }
    j = k;
  }
}

std::size_t HttpSink::pump() {
  std::size_t started = 0;
  const auto limit = static_cast<std::size_t>(settings_.max_concurrency);
  std::optional<SignalsBlocked> blocked;  // from the first request on: a mask per pump
  for (auto& owned : batches_) {
    Batch& b = *owned;
    while (!b.ready.empty()) {
      if (b.stop.empty() && active_.size() >= limit) return started;
      const std::size_t i = b.ready.front();
      b.ready.pop_front();
      if (b.settled[i]) continue;
      if (!b.stop.empty()) {
        settle(b, i, {Delivery::kDeferred, b.stop});
        continue;
      }
      if (settled_without_request(b, i)) continue;
      auto request = std::make_unique<HttpRequest>();
      request->batch = b.seq;
      request->index = i;
      request->easy = spare_easy();
      std::string error;
      if (!prepare((*b.messages)[i], *request, error)) {
        settle(b, i, {Delivery::kRejected, error});
        continue;
      }
      if (!blocked) blocked.emplace();
      if (curl_multi_add_handle(multi_, request->easy) != CURLM_OK) {
        throw std::runtime_error("http sink: curl_multi_add_handle failed");
      }
      request->multi = multi_;
      request->started = Clock::now();
      CURL* easy = request->easy;
      active_.emplace(easy, std::move(request));
      ++started;
    }
  }
  return started;
}

std::size_t HttpSink::perform() {
  int running = 0;
  CURLMcode rc;
  {
    SignalsBlocked blocked;
    rc = curl_multi_perform(multi_, &running);
  }
  if (rc != CURLM_OK)
    throw std::runtime_error(std::string("http sink: ") + curl_multi_strerror(rc));
  std::size_t done = 0;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    // msg is invalid once the handle is removed.
    complete(msg->easy_handle, msg->data.result);
    ++done;
  }
  return done;
}

void HttpSink::complete(CURL* easy, CURLcode code) {
  auto it = active_.find(easy);
  if (it == active_.end()) return;
  std::unique_ptr<HttpRequest> request = std::move(it->second);
  active_.erase(it);
  HttpAnswer answer = answer_of(*request, code);
  const auto took =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - request->started);
  typical_ += (took - typical_) / 16;
  wait_until_ = std::max(wait_until_, answer.wait_until);
  if (answer.outcome.delivery == Delivery::kAcked) {
    last_error_.clear();
  } else if (answer.outcome.delivery == Delivery::kUnavailable) {
    last_error_ = answer.outcome.error;
  }
  recycle(*request);  // frees the connection for the next request
  if (request->batch == HttpRequest::kStraggler) {
    straggler_done(*request, answer);
  } else if (Batch* b = batch(request->batch)) {
    settle(*b, request->index, std::move(answer.outcome));
  }
  if (!answer.stop.empty()) stop_all(answer.stop);
}

CURL* HttpSink::spare_easy() {
  if (spare_.empty()) {
    CURL* easy = curl_easy_init();
    if (easy == nullptr) throw std::bad_alloc();
    return easy;
  }
  CURL* easy = spare_.back();
  spare_.pop_back();
  return easy;
}

void HttpSink::recycle(HttpRequest& request) {
  if (request.easy == nullptr) return;
  curl_multi_remove_handle(multi_, request.easy);
  request.multi = nullptr;
  if (spare_.size() < static_cast<std::size_t>(settings_.max_concurrency)) {
    curl_easy_reset(request.easy);  // keeps the connection cache: that is the multi handle's
    spare_.push_back(request.easy);
    request.easy = nullptr;
  }
}

void HttpSink::progress() {
  for (int round = 0; round < 4; ++round) {
    const std::size_t started = pump();
    if (perform() == 0 && started == 0) break;
  }
}

void HttpSink::stop_all(const std::string& reason) {
  for (auto& b : batches_) {
    if (b->stop.empty()) b->stop = reason;
  }
}

void HttpSink::drop_requests(const Batch& b) noexcept {
  for (auto it = active_.begin(); it != active_.end();) {
    it = it->second->batch == b.seq ? active_.erase(it) : std::next(it);
  }
}

void HttpSink::abandon(Batch& b, const std::string& error) {
  for (auto it = active_.begin(); it != active_.end();) {
    if (it->second->batch != b.seq) {
      ++it;
      continue;
    }
    const std::size_t i = it->second->index;
    it = active_.erase(it);
    settle(b, i, {Delivery::kUnavailable, error});
  }
  b.ready.clear();
  // In order: a key's first unsettled message fails, and defers the rest of its key.
  for (std::size_t i = 0; i < b.settled.size(); ++i) {
    if (!b.settled[i]) settle(b, i, {Delivery::kUnavailable, error});
  }
}

void HttpSink::finish() {
  if (batches_.empty()) return;
  Batch& b = *batches_.front();
  try {
    while (b.unsettled > 0) {
      pump();
      if (b.unsettled == 0) break;
      perform();
      if (b.unsettled == 0 || (give_up_stragglers(b) && b.unsettled == 0)) break;
      // Also when nothing is in flight: a key's chain of quick answers must not outlast the
      // deadline either.
      std::string stopped;
      if (!keep_waiting(last_error_)) {
        stopped = "not acknowledged: the relay stopped waiting";
        if (!last_error_.empty()) stopped += " (" + last_error_ + ")";
      } else if (Clock::now() >= b.deadline) {
        stopped = "not acknowledged within " + std::to_string(b.timeout.count()) + " ms";
      }
      if (!stopped.empty()) {
        abandon(b, stopped);
        break;
      }
      const bool startable =
          active_.size() < static_cast<std::size_t>(settings_.max_concurrency) &&
          std::any_of(batches_.begin(), batches_.end(), [](auto& s) { return !s->ready.empty(); });
      if (startable) continue;  // start the next ones at once
      const auto until_deadline =
          std::chrono::duration_cast<std::chrono::milliseconds>(b.deadline - Clock::now()).count();
      const int wait_ms =
          static_cast<int>(std::clamp<long long>(until_deadline, 1, straggler_poll_ms()));
      curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr);
    }
  } catch (...) {
    // The batch failed as a whole; still, nothing of it stays in curl, and the rest of its
    // keys in a later batch is deferred.
    drop_requests(b);
    try {
      abandon(b, "not acknowledged: the batch failed");
    } catch (...) {
    }
    batches_.pop_front();
    throw;
  }
  batches_.pop_front();
}

std::unique_ptr<Sink> create_http_sink(const Options& options) {
  return std::make_unique<HttpSink>(options);
}

}  // namespace outbox::sinks
