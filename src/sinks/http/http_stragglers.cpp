// The HTTP sink's stragglers: requests a batch stops waiting for (see http_sink.hpp). The
// batch bookkeeping is in http_sink.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include "sinks/http/http_batch.hpp"
#include "sinks/http/http_sink.hpp"

namespace outbox::sinks {

namespace {

using Clock = std::chrono::steady_clock;
// Give up only on requests much slower than the receiver's usual answers.
constexpr int kTypicalFactor = 4;

}  // namespace

bool HttpSink::give_up_stragglers(Batch& b) {
  // Only beside acknowledged ones: a batch with none may be a receiver that is slow for all.
  if (settings_.straggler_ms == 0 || settings_.straggler_ms >= settings_.timeout_ms ||
      b.acked == 0 || !b.ready.empty()) {
    return false;
  }
  const auto patience = std::max<Clock::duration>(std::chrono::milliseconds(settings_.straggler_ms),
                                                  kTypicalFactor * typical_);
  const auto now = Clock::now();
  std::vector<HttpRequest*> waiting;
  for (auto& [easy, request] : active_) {
    if (request->batch != b.seq) continue;
    if (now - request->started < patience) return false;
    waiting.push_back(request.get());
  }
  if (waiting.empty()) return false;
  const std::string error =
      "http: no answer within " + std::to_string(settings_.straggler_ms) +
      " ms (straggler.timeout.ms); the request goes on until timeout.ms and its key waits";
  for (HttpRequest* request : waiting) {
    request->batch = HttpRequest::kStraggler;
    straggling_[request->key] = request->id;
    settle(b, request->index, {Delivery::kUnavailable, error});
  }
  return true;
}

void HttpSink::straggler_done(const HttpRequest& request, const HttpAnswer& answer) {
  auto it = straggling_.find(request.key);
  if (it != straggling_.end() && it->second == request.id) straggling_.erase(it);
  if (answer.outcome.delivery == Delivery::kAcked) late_acks_.add(request.id);
}

bool HttpSink::settled_without_request(Batch& b, std::size_t i) {
  const Message& m = (*b.messages)[i];
  if (!straggling_.empty()) {
    auto it = straggling_.find({std::string(m.aggregatetype), std::string(m.aggregateid)});
    if (it != straggling_.end()) {
      // The relay's retry of the given-up event itself backs off on its key's schedule; a
      // deferred one would come back at once, again and again, until the request ends.
      settle(b, i,
             it->second == m.id
                 ? Outcome{Delivery::kUnavailable,
                           "http: its request from an earlier batch is still in flight "
                           "(straggler.timeout.ms)"}
                 : Outcome{Delivery::kDeferred,
                           "not sent: an earlier request of its key is still in flight "
                           "(straggler.timeout.ms)"});
      return true;
    }
  }
  if (late_acks_.take(m.id)) {
    settle(b, i, {Delivery::kAcked, {}});
    return true;
  }
  return false;
}

long HttpSink::straggler_poll_ms() const {
  constexpr long kMaxPollMs = 100;  // also how often the relay's observer is asked
  if (settings_.straggler_ms == 0) return kMaxPollMs;
  return std::clamp(settings_.straggler_ms / 4, 1L, kMaxPollMs);
}

}  // namespace outbox::sinks
