#include "sinks/common/event_template.hpp"

#include "sinks/common/quoted.hpp"

namespace outbox::sinks {
namespace {

struct Placeholder {
  std::string_view name;
  EventTemplate::Field field;
};
constexpr Placeholder kPlaceholders[] = {{"aggregatetype", EventTemplate::kAggregateType},
                                         {"aggregateid", EventTemplate::kAggregateId},
                                         {"type", EventTemplate::kType}};

std::string_view value_of(const Message& message, unsigned field) {
  switch (field) {
    case EventTemplate::kAggregateType:
      return message.aggregatetype;
    case EventTemplate::kAggregateId:
      return message.aggregateid;
    default:
      return message.type;
  }
}

// "${aggregatetype}, ${type}": the placeholders a sink allows, for its errors.
std::string known(unsigned fields) {
  std::string out;
  for (const Placeholder& p : kPlaceholders) {
    if ((fields & p.field) == 0) continue;
    if (!out.empty()) out += ", ";
    out += "${" + std::string(p.name) + "}";
  }
  return out;
}

}  // namespace

EventTemplate::EventTemplate(std::string_view text, const Rules& rules)
    : text_(text), encode_(rules.encode) {
  const std::string prefix = std::string(rules.option) + ": ";
  if (text.empty()) throw ConfigError(prefix + "must not be empty");
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, 2, "${") == 0) {
      const std::size_t close = text.find('}', pos + 2);
      if (close == std::string_view::npos) {
        throw ConfigError(prefix + "unterminated \"${\" at position " + std::to_string(pos) +
                          " in " + quoted(text));
      }
      const std::string_view name = text.substr(pos + 2, close - pos - 2);
      unsigned field = 0;
      for (const Placeholder& p : kPlaceholders) {
        if (name == p.name) field = p.field;
      }
      if (rules.routed_by_value && name == "routedByValue") field = kAggregateType;
      if ((field & rules.fields) == 0) {
        const std::string shown = quoted(name, 40);  // "name", quotes dropped below
        throw ConfigError(prefix + "unknown placeholder ${" + shown.substr(1, shown.size() - 2) +
                          "} in " + quoted(text) + " (known: " + known(rules.fields) + ")");
      }
      parts_.push_back({field, {}});
      pos = close + 1;
      continue;
    }
    if (rules.literal_error != nullptr) {
      const std::string why = rules.literal_error(text[pos]);
      if (!why.empty()) {
        throw ConfigError(prefix + why + " (at position " + std::to_string(pos) + " of " +
                          quoted(text) + ")");
      }
    }
    if (parts_.empty() || parts_.back().field != 0) parts_.push_back({0, {}});
    parts_.back().literal += text[pos];
    ++pos;
  }
}

std::string EventTemplate::render(const Message& message) const {
  std::string out;
  for (const Part& part : parts_) {
    if (part.field == 0) {
      out += part.literal;
    } else if (encode_ != nullptr) {
      out += encode_(value_of(message, part.field));
    } else {
      out += value_of(message, part.field);
    }
  }
  return out;
}

bool EventTemplate::is_fixed() const {
  for (const Part& part : parts_) {
    if (part.field != 0) return false;
  }
  return true;
}

std::size_t EventTemplate::literal_size() const {
  std::size_t size = 0;
  for (const Part& part : parts_) size += part.literal.size();
  return size;
}

std::string EventTemplate::shape(std::string_view stand_in) const {
  std::string out;
  for (const Part& part : parts_) {
    if (part.field == 0) {
      out += part.literal;
    } else {
      out += stand_in;
    }
  }
  return out;
}

}  // namespace outbox::sinks
