#include "core/event_rules.hpp"

#include <string>

#include "core/error.hpp"

namespace outbox {

namespace {
std::string prefix(std::string_view function) { return std::string(function) + ": "; }
}  // namespace

void check_not_null(std::string_view function, std::string_view field, bool is_null) {
  if (is_null) {
    throw Error(sqlstate::kNullValueNotAllowed,
                prefix(function) + std::string(field) + " must not be NULL");
  }
}

void check_required_text(std::string_view function, std::string_view field, bool is_null,
                         std::size_t chars, std::size_t max_chars) {
  check_not_null(function, field, is_null);
  if (chars == 0) {
    throw Error(sqlstate::kInvalidParameterValue,
                prefix(function) + std::string(field) + " must not be empty");
  }
  if (chars > max_chars) {
    throw Error(sqlstate::kStringDataRightTruncation,
                prefix(function) + std::string(field) + " is too long",
                std::string(field) + " has " + std::to_string(chars) +
                    " characters; the limit is " + std::to_string(max_chars) + ".");
  }
}

void check_payload(std::string_view function, bool is_null, std::size_t bytes,
                   std::size_t limit_bytes) {
  if (is_null) {
    throw Error(sqlstate::kNullValueNotAllowed, prefix(function) + "payload must not be NULL", {},
                "Use '{}'::jsonb or 'null'::jsonb for an event without a body.");
  }
  if (bytes > limit_bytes) {
    throw Error(sqlstate::kProgramLimitExceeded, prefix(function) + "payload is too large",
                "The payload takes " + std::to_string(bytes) +
                    " bytes; outbox.max_payload_bytes is " + std::to_string(limit_bytes) + ".",
                "Store large documents elsewhere and send a reference, or raise "
                "outbox.max_payload_bytes.");
  }
}

void check_headers_size(std::string_view function, std::size_t bytes, std::size_t limit_bytes) {
  if (bytes > limit_bytes) {
    throw Error(sqlstate::kProgramLimitExceeded, prefix(function) + "headers are too large",
                "The headers take " + std::to_string(bytes) +
                    " bytes; outbox.max_headers_bytes is " + std::to_string(limit_bytes) + ".",
                "Keep headers to what a consumer needs for routing and tracing, or raise "
                "outbox.max_headers_bytes.");
  }
}

void check_headers_shape(std::string_view function, HeadersShape shape) {
  if (shape != HeadersShape::kObject) {
    throw Error(sqlstate::kInvalidParameterValue,
                prefix(function) + "headers must be a JSON object of strings", {},
                R"(For example '{"traceparent": "00-..."}'.)");
  }
}

void check_header(std::string_view function, std::string_view key, HeaderValueKind kind) {
  if (key.empty()) {
    throw Error(sqlstate::kInvalidParameterValue,
                prefix(function) + "header names must not be empty");
  }
  if (is_reserved_header(key)) {
    throw Error(sqlstate::kInvalidParameterValue,
                prefix(function) + "header \"" + std::string(key) + "\" is reserved",
                "The sinks send the event's id and type as headers \"id\" and \"type\".",
                "Pass a stable id as the id argument instead.");
  }
  if (kind != HeaderValueKind::kString) {
    throw Error(sqlstate::kInvalidParameterValue,
                prefix(function) + "headers must be a JSON object of strings",
                "Header \"" + std::string(key) + "\" is not a string.",
                "Nested objects, arrays, numbers, booleans and null are not allowed; "
                "encode them as strings.");
  }
}

}  // namespace outbox
