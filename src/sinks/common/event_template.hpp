// A template over an event's fields, the one parser and renderer of ${...} for every sink:
// Kafka's topic, NATS's subject, the webhook's URL. Literal text and the placeholders
// ${aggregatetype}, ${aggregateid} and ${type}, parsed once when the sink is created, so that
// a bad template is a ConfigError then, not a surprise at the first event. Each sink gives its
// Rules: the placeholders it allows, what a literal character may be, and how a value is
// encoded into the result. Plain C++.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sinks/common/sink.hpp"

namespace outbox::sinks {

class EventTemplate {
 public:
  enum Field : unsigned { kAggregateType = 1, kAggregateId = 2, kType = 4 };
  struct Rules {
    const char* option;  // the option's name: every error starts with it
    unsigned fields;     // the Fields allowed
    // Why a literal character cannot appear (e.g. "'/' cannot appear in a Kafka topic name"),
    // empty when it may; nullptr: any may.
    std::string (*literal_error)(char c) = nullptr;
    // How a placeholder's value goes into the result; nullptr: as it is.
    std::string (*encode)(std::string_view value) = nullptr;
    bool routed_by_value = false;  // ${routedByValue} for ${aggregatetype}, as Debezium's
  };

  EventTemplate() = default;
  // Throws ConfigError ("<option>: ...") for an empty template, an unterminated "${", an
  // unknown or disallowed placeholder, or a literal character the rules refuse.
  EventTemplate(std::string_view text, const Rules& rules);

  std::string render(const Message& message) const;
  const std::string& text() const { return text_; }
  // No placeholder: every message gets the same result.
  bool is_fixed() const;
  // The literal text's length.
  std::size_t literal_size() const;
  // The literal text with each placeholder as `stand_in`: its shape, for checks the literal
  // characters alone cannot tell (NATS's empty tokens).
  std::string shape(std::string_view stand_in) const;

 private:
  struct Part {
    unsigned field;  // 0: literal
    std::string literal;
  };
  std::string text_;
  std::vector<Part> parts_;
  std::string (*encode_)(std::string_view value) = nullptr;
};

}  // namespace outbox::sinks
