#include "sinks/nats/nats_subject.hpp"

#include "sinks/common/quoted.hpp"

namespace outbox::sinks::nats {

namespace {

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

std::string subject_char_error(char c) {
  const char* why = bad_char(c);
  return why != nullptr ? std::string(why) : std::string();
}

const EventTemplate::Rules kSubjectRules{
    "subject.template",
    EventTemplate::kAggregateType | EventTemplate::kAggregateId | EventTemplate::kType,
    &subject_char_error};

}  // namespace

SubjectTemplate::SubjectTemplate(std::string_view text) : template_(text, kSubjectRules) {
  // Empty tokens in the literal text: a placeholder's value cannot fill them, since a "."
  // next to a placeholder only ends or starts its token. Checked on the template with each
  // placeholder standing for one non-empty token.
  const std::string shape = template_.shape("x");
  if (shape.front() == '.' || shape.back() == '.' || shape.find("..") != std::string::npos) {
    throw ConfigError("subject.template: empty token (a leading or trailing '.', or \"..\") in " +
                      quoted(text));
  }
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
