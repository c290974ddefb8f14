// The keys (aggregatetype, aggregateid) whose messages were not delivered in a batch: what a
// sink needs to keep the per-key rule of Sink::send() (sink.hpp), which defers every later
// message of such a key. Each key keeps the reason its first message failed, for the error
// of the messages it defers. Plain C++, header only; shared by the built-in sinks.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "sinks/common/sink.hpp"

namespace outbox::sinks {

class FailedKeys {
 public:
  // The reason the key of `message` failed, or nullptr if it has not.
  const std::string* find(const Message& message) const {
    if (reasons_.empty()) return nullptr;  // the common case: no lookup at all
    auto it = reasons_.find(message);
    return it == reasons_.end() ? nullptr : &it->second;
  }

  // Notes that a message of this key failed; the first reason stays.
  void add(const Message& message, const std::string& reason) {
    if (find(message) != nullptr) return;
    reasons_.emplace(Key{std::string(message.aggregatetype), std::string(message.aggregateid)},
                     reason);
  }

  // Adds every key of `other` that is not here yet.
  void add_all(const FailedKeys& other) {
    for (const auto& entry : other.reasons_) reasons_.insert(entry);
  }

  bool empty() const { return reasons_.empty(); }
  void clear() { reasons_.clear(); }

 private:
  // Owned: a key may outlive the batch whose message failed.
  struct Key {
    std::string aggregatetype;
    std::string aggregateid;
  };
  // Orders keys and messages alike, so that a message is looked up without a copy.
  struct Less {
    using is_transparent = void;
    static std::pair<std::string_view, std::string_view> view(const Key& k) {
      return {k.aggregatetype, k.aggregateid};
    }
    static std::pair<std::string_view, std::string_view> view(const Message& m) {
      return {m.aggregatetype, m.aggregateid};
    }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return view(a) < view(b);
    }
  };
  std::map<Key, std::string, Less> reasons_;
};

}  // namespace outbox::sinks
