// What the HTTP sink's tests share: batches of messages over keys, and the ids a test
// server received.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "http_test_server.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::test {

// Messages over keys: ids "<key>-<n>", payload {"n": n}.
struct Batch {
  std::vector<std::string> ids, keys, payloads;
  std::vector<sinks::Message> messages;
  void add(const std::string& key, int n) {
    ids.push_back(key + "-" + std::to_string(n));
    keys.push_back(key);
    payloads.push_back("{\"n\": " + std::to_string(n) + "}");
  }
  // Views into the strings: call after the last add().
  const std::vector<sinks::Message>& build() {
    messages.clear();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      sinks::Message m;
      m.id = ids[i];
      m.aggregatetype = "order";
      m.aggregateid = keys[i];
      m.type = "OrderCreated";
      m.payload = payloads[i];
      m.created_at_unix_us = 1764607262123456;
      messages.push_back(m);
    }
    return messages;
  }
};

inline std::vector<sinks::Outcome> send(
    sinks::Sink& sink, Batch& batch, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::vector<sinks::Outcome> outcomes(batch.ids.size());
  sink.send(batch.build(), outcomes, timeout);
  return outcomes;
}

inline std::set<std::string> ids_of(const std::vector<Received>& requests) {
  std::set<std::string> ids;
  for (const Received& r : requests) ids.insert(r.header("webhook-id"));
  return ids;
}

}  // namespace outbox::test
