// Event ids a receiver acknowledged after their batch had stopped waiting for them (the http
// sink's stragglers). When the relay hands such an event again, the sink counts it as
// acknowledged without sending it a second time. Bounded: past kCapacity the oldest id is
// forgotten, and that event is merely sent again (at least once allows it). Plain C++.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>

namespace outbox::sinks {

class LateAcks {
 public:
  static constexpr std::size_t kCapacity = 100000;

  void add(std::string id) {
    if (!ids_.insert(id).second) return;
    order_.push_back(std::move(id));
    if (order_.size() > kCapacity) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
  }

  // Whether `id` was acknowledged late; it is forgotten then (an id is handed once more).
  bool take(std::string_view id) {
    if (ids_.empty()) return false;  // the common case: no lookup at all
    auto it = ids_.find(std::string(id));
    if (it == ids_.end()) return false;
    ids_.erase(it);  // its entry in order_ stays until it ages out; erase() ignores it then
    return true;
  }

  std::size_t size() const { return ids_.size(); }

 private:
  std::unordered_set<std::string> ids_;
  std::deque<std::string> order_;  // insertion order, for the bound; may hold taken ids
};

}  // namespace outbox::sinks
