// CloudEvents 1.0 binary content mode, for every sink: the event's payload stays the message
// body, and its context attributes travel as headers (Kafka ce_*, HTTP ce-*, NATS ce-*; each
// sink adds its own prefix). Plain C++, no client library.
//
// The mapping: id = the event id, type = the event type, source = the sink's
// cloudevents.source option, subject = the aggregateid, time = the enqueue time (RFC 3339,
// UTC, microseconds), specversion = 1.0, datacontenttype = application/json.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sinks/common/sink.hpp"

namespace outbox::sinks::cloudevents {

inline constexpr std::string_view kDefaultSource = "/outbox";
inline constexpr std::string_view kContentType = "application/json";

// The options every sink declares for it (add both to the sink's option table).
inline constexpr OptionSpec kEnabledOption = {
    "cloudevents", OptionKind::kBoolean,
    "true: CloudEvents 1.0 binary mode (the context attributes as headers). Default false."};
inline constexpr OptionSpec kSourceOption = {
    "cloudevents.source", OptionKind::kText,
    "The CloudEvents source attribute (a URI reference). Default /outbox."};

struct Settings {
  bool enabled = false;
  std::string source{kDefaultSource};
};

// Takes the two options out of `options` (a sink's resolved options): what is left is the
// sink's own. Throws ConfigError for an empty source or a source without cloudevents = true.
Settings take_settings(Options& options);

using Attribute = std::pair<std::string, std::string>;

// The context attributes, names without prefix, in this order: specversion, id, source, type,
// subject, time, datacontenttype. The sink sends datacontenttype as its protocol's content
// type (Kafka content-type, HTTP Content-Type) and the others as prefix + name.
std::vector<Attribute> attributes(const Message& message, std::string_view source);

// RFC 3339 in UTC with microseconds: 2026-12-01T16:41:02.123456Z.
std::string rfc3339(std::int64_t unix_us);

}  // namespace outbox::sinks::cloudevents
