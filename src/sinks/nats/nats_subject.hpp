// NATS subjects and headers for the NATS sink: the subject template and the checks that keep
// a message from being mangled. Plain C++, no cnats header.
//
// Subject template: literal text and placeholders ${aggregatetype}, ${aggregateid}, ${type}.
// Any other ${...}, an unterminated "${", an empty template, whitespace or a control
// character, a "*" or ">" (wildcards: one cannot publish to them), or an empty token (a
// leading or trailing ".", or "..") in the literal text is a ConfigError at create().
//
// A rendered subject that is not a valid subject to publish to (a placeholder's value with
// whitespace, a control character, "*", ">", or that leaves an empty token) is NOT mangled:
// the message is rejected (kRejected) with an error that says why. A "." inside a value adds
// tokens, as it does in any NATS subject.
//
// Headers: NATS headers are lines "name: value" (as HTTP/1), so a name with a control
// character, a space or ':' and a value with CR or LF would break the framing: such a message
// is rejected too, never sent with a header cut or changed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sinks/common/event_template.hpp"
#include "sinks/common/sink.hpp"

namespace outbox::sinks::nats {

inline constexpr std::string_view kDefaultSubjectTemplate = "outbox.event.${aggregatetype}";

class SubjectTemplate {
 public:
  // Throws ConfigError (message starts with "subject.template: ") when the template is bad.
  explicit SubjectTemplate(std::string_view text = kDefaultSubjectTemplate);

  // The subject for a message, not yet validated (see route_subject).
  std::string render(const Message& message) const { return template_.render(message); }
  const std::string& text() const { return template_.text(); }

 private:
  EventTemplate template_;
};

// Empty when `subject` is a valid subject to publish to, otherwise why it is not.
std::string subject_error(std::string_view subject);

// Renders and validates: true and `subject` set, or false and `error` set (reject it).
bool route_subject(const SubjectTemplate& tmpl, const Message& message, std::string& subject,
                   std::string& error);

// Empty when the header can travel as given, otherwise why it cannot.
std::string header_error(std::string_view name, std::string_view value);

// Empty when an event may carry its own header of this name. Refused (case-insensitive):
// Nats-* (JetStream acts on them: Nats-Msg-Id, Nats-Rollup, Nats-Expected-*, ...), the names
// the sink sets itself (aggregatetype, aggregateid), and with CloudEvents ce-* and
// Content-Type; so each name the sink sets appears once.
std::string own_header_error(std::string_view name, bool cloudevents);

}  // namespace outbox::sinks::nats
