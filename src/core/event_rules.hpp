// The rules an event must follow before it is written. Plain C++, unit-tested without a
// server; the PostgreSQL layer measures the values and calls these checks.
#pragma once

#include <cstddef>
#include <string_view>

namespace outbox {

// Debezium's outbox table uses varchar(255) for aggregatetype, aggregateid and type.
inline constexpr std::size_t kMaxNameChars = 255;

// A required text argument: not NULL, not empty, at most max_chars characters.
// Throws outbox::Error with 22004, 22023 or 22001.
void check_required_text(std::string_view function, std::string_view field, bool is_null,
                         std::size_t chars, std::size_t max_chars = kMaxNameChars);

// An argument that must be given: 22004 "<function>: <field> must not be NULL".
void check_not_null(std::string_view function, std::string_view field, bool is_null);

// The payload must be present and no larger than the configured limit (bytes of its
// stored jsonb form). Throws 22004 or 54000.
void check_payload(std::string_view function, bool is_null, std::size_t bytes,
                   std::size_t limit_bytes);

// The headers object must be no larger than the configured limit (bytes of its stored
// jsonb form): headers travel with every message. Throws 54000.
void check_headers_size(std::string_view function, std::size_t bytes, std::size_t limit_bytes);

// Header names every sink sets itself from the event: the id (what consumers deduplicate
// on) and the type. An event may not carry its own header of these names, because a
// consumer that reads the last header of a name would then get the event's value.
inline constexpr std::string_view kIdHeader = "id";
inline constexpr std::string_view kTypeHeader = "type";
inline bool is_reserved_header(std::string_view name) {
  return name == kIdHeader || name == kTypeHeader;
}

// What a headers value may look like: a flat JSON object whose values are strings.
enum class HeadersShape { kObject, kNotObject };
enum class HeaderValueKind { kString, kOther };

// Throws 22023 when headers are not an object.
void check_headers_shape(std::string_view function, HeadersShape shape);
// Throws 22023 for an empty or reserved key, or a value that is not a string.
void check_header(std::string_view function, std::string_view key, HeaderValueKind kind);

}  // namespace outbox
