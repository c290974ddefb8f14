#include "sinks/nats_subject.hpp"

#include <cstdio>

namespace outbox::sinks::nats {

namespace {

// Quoted for an error message: non-printable bytes as \xNN, cut after 80 characters.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (char c : text) {
    if (shown++ == 80) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool is_space_or_control(char c) {
  auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f;
}

// Why `c` cannot appear in a subject, or nullptr.
const char* bad_char(char c) {
  if (is_space_or_control(c)) return "whitespace or a control character";
  if (c == '*' || c == '>') return "a wildcard ('*' or '>'), which cannot be published to";
  return nullptr;
}

}  // namespace

SubjectTemplate::SubjectTemplate(std::string_view text) : text_(text) {
  const std::string prefix = "subject.template: ";
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
      if (name == "aggregatetype") {
        parts_.push_back({Kind::kAggregateType, {}});
      } else if (name == "aggregateid") {
        parts_.push_back({Kind::kAggregateId, {}});
      } else if (name == "type") {
        parts_.push_back({Kind::kType, {}});
      } else {
        throw ConfigError(prefix + "unknown placeholder ${" + std::string(name) + "} in " +
                          quoted(text) + " (known: ${aggregatetype}, ${aggregateid}, ${type})");
      }
      pos = close + 1;
      continue;
    }
    if (const char* why = bad_char(text[pos])) {
      throw ConfigError(prefix + why + " at position " + std::to_string(pos) + " of " +
                        quoted(text));
    }
    if (parts_.empty() || parts_.back().kind != Kind::kLiteral)
      parts_.push_back({Kind::kLiteral, {}});
    parts_.back().literal += text[pos];
    ++pos;
  }
  // Empty tokens in the literal text: a placeholder's value cannot fill them, since a "."
  // next to a placeholder only ends or starts its token. Checked on the template with each
  // placeholder standing for one non-empty token.
  std::string shape;
  for (const Part& part : parts_) shape += part.kind == Kind::kLiteral ? part.literal : "x";
  if (shape.front() == '.' || shape.back() == '.' || shape.find("..") != std::string::npos) {
    throw ConfigError(prefix + "empty token (a leading or trailing '.', or \"..\") in " +
                      quoted(text));
  }
}

std::string SubjectTemplate::render(const Message& message) const {
  std::string out;
  for (const Part& part : parts_) {
    switch (part.kind) {
      case Kind::kLiteral:
        out += part.literal;
        break;
      case Kind::kAggregateType:
        out += message.aggregatetype;
        break;
      case Kind::kAggregateId:
        out += message.aggregateid;
        break;
      case Kind::kType:
        out += message.type;
        break;
    }
  }
  return out;
}

std::string subject_error(std::string_view subject) {
  const std::string invalid = "subject " + quoted(subject) + " is not a valid NATS subject: ";
  if (subject.empty()) return "the subject is empty";
  for (std::size_t i = 0; i < subject.size(); ++i) {
    if (const char* why = bad_char(subject[i])) {
      return invalid + why + " at position " + std::to_string(i);
    }
  }
  if (subject.front() == '.' || subject.back() == '.' ||
      subject.find("..") != std::string_view::npos) {
    return invalid + "an empty token (a leading or trailing '.', or \"..\")";
  }
  return {};
}

bool route_subject(const SubjectTemplate& tmpl, const Message& message, std::string& subject,
                   std::string& error) {
  subject = tmpl.render(message);
  error = subject_error(subject);
  return error.empty();
}

std::string header_error(std::string_view name, std::string_view value) {
  if (name.empty()) return "a header name is empty";
  for (char c : name) {
    if (is_space_or_control(c) || c == ':') {
      return "header name " + quoted(name) +
             " cannot travel in a NATS message (whitespace, a control character or ':')";
    }
  }
  if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
    return "the value of header " + quoted(name) +
           " cannot travel in a NATS message (it holds a line break or a NUL byte)";
  }
  return {};
}

std::string own_header_error(std::string_view name, bool cloudevents) {
  std::string lower;
  for (char c : name) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  const auto starts = [&](std::string_view prefix) { return lower.rfind(prefix, 0) == 0; };
  const bool reserved = starts("nats-") || lower == "aggregatetype" || lower == "aggregateid" ||
                        (cloudevents && (starts("ce-") || lower == "content-type"));
  if (!reserved) return {};
  return "header " + quoted(name) +
         " is reserved by the nats sink (Nats-*, aggregatetype, aggregateid; with CloudEvents "
         "ce-* and Content-Type)";
}

}  // namespace outbox::sinks::nats
