// Routing of outbox events to Kafka topics, compatible with Debezium's outbox event router
// (io.debezium.transforms.outbox.EventRouter): topic from a template over aggregatetype, key
// = aggregateid, headers id and type. Plain C++, no PostgreSQL and no librdkafka header.
//
// Topic template: literal text and placeholders.
//   ${aggregatetype}   the event's aggregatetype (Debezium's ${routedByValue} is an alias)
//   ${type}            the event's type
// Any other ${...} is a ConfigError, and so is an unterminated "${", an empty template, or a
// literal character that cannot appear in a Kafka topic name: a bad template is found when
// the sink is configured, not when the first event arrives.
//
// Topic names: Kafka allows [a-zA-Z0-9._-], 1 to 249 characters, and neither "." nor "..".
// A rendered name that breaks these rules (an aggregatetype with a space, a '/', non-ASCII,
// or one so long that the name exceeds 249 characters) is NOT mangled into a legal one: two
// different aggregatetypes could then share a topic without anyone noticing. The message is
// rejected instead (Delivery::kRejected, counts as an attempt) with an error that names the
// offending character or the length.
//
// Headers: `id`, then `type`, then the event's own headers in their order. outbox.enqueue
// refuses event headers named `id` or `type` (core/event_rules.hpp), so each name appears
// once whichever end a consumer reads from.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/event_rules.hpp"
#include "sinks/common/cloudevents.hpp"
#include "sinks/common/event_template.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks::routing {

inline constexpr std::string_view kDefaultTopicTemplate = "outbox.event.${aggregatetype}";
inline constexpr std::size_t kMaxTopicLength = 249;

using outbox::kIdHeader;
using outbox::kTypeHeader;

// A parsed, validated topic template.
class TopicTemplate {
 public:
  // Throws ConfigError (message starts with "topic.template: ") when the template is bad.
  explicit TopicTemplate(std::string_view text = kDefaultTopicTemplate);

  // The topic for a message, not yet validated (see route_topic).
  std::string render(const Message& message) const { return template_.render(message); }

  const std::string& text() const { return template_.text(); }
  // True when the template has no placeholder: every message goes to one topic.
  bool is_fixed() const { return template_.is_fixed(); }

 private:
  EventTemplate template_;
};

// Empty when `topic` is a legal Kafka topic name, otherwise why it is not (one sentence,
// the name quoted with non-printable bytes escaped and cut to a readable length).
std::string topic_name_error(std::string_view topic);

// Renders and validates. Returns true and sets `topic`, or returns false and sets `error`
// (the message is then to be rejected).
bool route_topic(const TopicTemplate& tmpl, const Message& message, std::string& topic,
                 std::string& error);

// The message key: the aggregate id (same key -> same partition -> kept in order).
inline std::string_view message_key(const Message& message) { return message.aggregateid; }

using Header = std::pair<std::string_view, std::string_view>;

// id, type, then the event's own headers. The views point into `message`.
std::vector<Header> message_headers(const Message& message);

// CloudEvents 1.0 binary mode in Kafka: each attribute as header ce_<name>, datacontenttype as
// content-type (sinks/common/cloudevents.hpp). Added after message_headers().
std::vector<std::pair<std::string, std::string>> cloudevents_headers(const Message& message,
                                                                     std::string_view source);

}  // namespace outbox::sinks::routing
