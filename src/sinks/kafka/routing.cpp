#include "sinks/kafka/routing.hpp"

#include <cstdio>

#include "sinks/common/quoted.hpp"

namespace outbox::sinks::routing {

namespace {

bool is_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::string describe_char(char c) {
  auto u = static_cast<unsigned char>(c);
  char buf[32];
  if (u >= 0x20 && u < 0x7f) {
    std::snprintf(buf, sizeof buf, "'%c'", c);
  } else {
    std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
  }
  return buf;
}

constexpr const char* kLegal = "only a-z, A-Z, 0-9, '.', '_' and '-' are allowed";

// Why a character cannot appear in a topic template's literal text, or "".
std::string topic_char_error(char c) {
  if (is_topic_char(c)) return {};
  return describe_char(c) + " cannot appear in a Kafka topic name (" + kLegal + ")";
}

const EventTemplate::Rules kTopicRules{"topic.template",
                                       EventTemplate::kAggregateType | EventTemplate::kType,
                                       &topic_char_error, nullptr, /*routed_by_value=*/true};

}  // namespace

TopicTemplate::TopicTemplate(std::string_view text) : template_(text, kTopicRules) {
  const std::string prefix = "topic.template: ";
  if (is_fixed()) {
    const std::string error = topic_name_error(text);
    if (!error.empty()) throw ConfigError(prefix + error);
  } else if (template_.literal_size() >= kMaxTopicLength) {
    throw ConfigError(
        prefix + "the literal text alone has " + std::to_string(template_.literal_size()) +
        " characters; a Kafka topic name has at most " + std::to_string(kMaxTopicLength));
  }
}

std::string topic_name_error(std::string_view topic) {
  if (topic.empty()) {
    return "the topic name is empty";
  }
  if (topic.size() > kMaxTopicLength) {
    return "topic " + quoted(topic) + " is not a valid Kafka topic name: it has " +
           std::to_string(topic.size()) + " characters, the limit is " +
           std::to_string(kMaxTopicLength);
  }
  if (topic == "." || topic == "..") {
    return "topic " + quoted(topic) + " is not a valid Kafka topic name";
  }
  for (std::size_t i = 0; i < topic.size(); ++i) {
    if (!is_topic_char(topic[i])) {
      return "topic " + quoted(topic) +
             " is not a valid Kafka topic name: " + describe_char(topic[i]) + " at position " +
             std::to_string(i) + " (" + kLegal + ")";
    }
  }
  return {};
}

bool route_topic(const TopicTemplate& tmpl, const Message& message, std::string& topic,
                 std::string& error) {
  topic = tmpl.render(message);
  error = topic_name_error(topic);
  return error.empty();
}

std::vector<Header> message_headers(const Message& message) {
  std::vector<Header> out;
  out.reserve(2 + message.headers.size());
  out.emplace_back(kIdHeader, message.id);
  out.emplace_back(kTypeHeader, message.type);
  for (const auto& header : message.headers) {
    out.emplace_back(header.first, header.second);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> cloudevents_headers(const Message& message,
                                                                     std::string_view source) {
  auto headers = cloudevents::attributes(message, source);
  for (auto& [name, value] : headers) {
    name = name == "datacontenttype" ? "content-type" : "ce_" + name;
  }
  return headers;
}

}  // namespace outbox::sinks::routing
