// Helpers of the null sink tests: batches whose text outlives their Message views, and
// summaries of outcomes.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sinks/common/sink.hpp"

namespace outbox::sinks::test {

class Batch {
 public:
  // An "order" message per aggregateid, each with a new id.
  Batch(std::initializer_list<const char*> aggregateids = {}) {
    for (const char* aggregateid : aggregateids) add(aggregateid);
  }

  // Adds a message; an empty id gets a new one ("e1", "e2", ... across batches).
  Batch& add(const std::string& aggregateid, const std::string& id = "",
             const std::string& aggregatetype = "order", const std::string& type = "T") {
    static int next_id = 1;
    Message m;
    m.aggregatetype = keep(aggregatetype);
    m.aggregateid = keep(aggregateid);
    m.id = keep(id.empty() ? "e" + std::to_string(next_id++) : id);
    m.type = keep(type);
    m.payload = "{}";
    messages_.push_back(m);
    return *this;
  }

  const std::vector<Message>& messages() const { return messages_; }
  std::string id(std::size_t i) const { return std::string(messages_.at(i).id); }

 private:
  std::string_view keep(std::string text) { return text_.emplace_back(std::move(text)); }

  std::deque<std::string> text_;  // a deque keeps its elements where they are
  std::vector<Message> messages_;
};

// One letter per outcome: Acked, Rejected, Deferred, Unavailable.
inline std::string summary(const std::vector<Outcome>& outcomes) {
  std::string s;
  for (const Outcome& o : outcomes) {
    switch (o.delivery) {
      case Delivery::kAcked:
        s += 'A';
        break;
      case Delivery::kRejected:
        s += 'R';
        break;
      case Delivery::kDeferred:
        s += 'D';
        break;
      case Delivery::kUnavailable:
        s += 'U';
        break;
    }
  }
  return s;
}

inline std::vector<Outcome> send(Sink& sink, const Batch& batch) {
  std::vector<Outcome> outcomes;
  sink.send(batch.messages(), outcomes, std::chrono::seconds(1));
  return outcomes;
}

}  // namespace outbox::sinks::test
