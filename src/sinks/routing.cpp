#include "sinks/routing.hpp"

#include <cstdio>

namespace outbox::sinks::routing {

namespace {

bool is_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// A name as it may appear inside an error message: quoted, non-printable bytes as \xNN,
// cut after max_chars characters.
std::string quoted(std::string_view text, std::size_t max_chars = 80) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (char c : text) {
    if (shown == max_chars) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
    ++shown;
  }
  out += '"';
  return out;
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

}  // namespace

TopicTemplate::TopicTemplate(std::string_view text) : text_(text) {
  const std::string prefix = "topic.template: ";
  if (text.empty()) {
    throw ConfigError(prefix + "must not be empty");
  }
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, 2, "${") == 0) {
      std::size_t close = text.find('}', pos + 2);
      if (close == std::string_view::npos) {
        throw ConfigError(prefix + "unterminated \"${\" at position " + std::to_string(pos) +
                          " in " + quoted(text));
      }
      std::string_view name = text.substr(pos + 2, close - pos - 2);
      if (name == "aggregatetype" || name == "routedByValue") {
        parts_.push_back({Kind::kAggregateType, {}});
      } else if (name == "type") {
        parts_.push_back({Kind::kType, {}});
      } else {
        throw ConfigError(prefix + "unknown placeholder ${" + std::string(name) + "} in " +
                          quoted(text) + " (known: ${aggregatetype}, ${type})");
      }
      pos = close + 1;
      continue;
    }
    char c = text[pos];
    if (!is_topic_char(c)) {
      throw ConfigError(prefix + describe_char(c) + " at position " + std::to_string(pos) + " of " +
                        quoted(text) + " cannot appear in a Kafka topic name (" + kLegal + ")");
    }
    if (parts_.empty() || parts_.back().kind != Kind::kLiteral) {
      parts_.push_back({Kind::kLiteral, {}});
    }
    parts_.back().literal += c;
    ++pos;
  }
  if (is_fixed()) {
    std::string error = topic_name_error(text_);
    if (!error.empty()) {
      throw ConfigError(prefix + error);
    }
  } else {
    std::size_t literal_chars = 0;
    for (const Part& part : parts_) {
      literal_chars += part.literal.size();
    }
    if (literal_chars >= kMaxTopicLength) {
      throw ConfigError(prefix + "the literal text alone has " + std::to_string(literal_chars) +
                        " characters; a Kafka topic name has at most " +
                        std::to_string(kMaxTopicLength));
    }
  }
}

bool TopicTemplate::is_fixed() const {
  for (const Part& part : parts_) {
    if (part.kind != Kind::kLiteral) return false;
  }
  return true;
}

std::string TopicTemplate::render(const Message& message) const {
  std::string out;
  for (const Part& part : parts_) {
    switch (part.kind) {
      case Kind::kLiteral:
        out += part.literal;
        break;
      case Kind::kAggregateType:
        out += message.aggregatetype;
        break;
      case Kind::kType:
        out += message.type;
        break;
    }
  }
  return out;
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
