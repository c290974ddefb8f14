// The consumer's inbox (outbox.inbox_receive): where an event's record goes. Plain C++.
//
// Records are partitioned by the event's own time, so that every copy of an event finds its
// first copy's record in the same partition, and dropping a partition forgets only events
// that old. The time must then be the same for every copy: a UUIDv7 carries it; any other id
// needs the caller to give it (the event's created_at, which every copy carries).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/uuid7.hpp"

namespace outbox {

// A version 7 UUID (RFC 9562): version nibble 7, variant 10.
bool is_uuid7(const Uuid& id);

// The event's time in Unix microseconds: a UUIDv7's own (given_unix_us is then not used, so
// what a caller passes cannot split one event's copies), else given_unix_us. Throws
// outbox::Error: 22004 for a NULL id (nullptr), 22023 for the nil UUID or an id that is not
// a UUIDv7 without a time.
std::int64_t inbox_event_unix_us(const Uuid* id, std::optional<std::int64_t> given_unix_us);

// A consumer name's bytes, once check_required_text() passed it: no control character
// (U+0000-U+001F, U+007F), no space at either end. Names are compared byte for byte, as
// quoted identifiers are: "billing" and "Billing" are two consumers. Throws outbox::Error
// 22023, its message prefixed with `function`.
void check_consumer_name(std::string_view function, std::string_view name);

}  // namespace outbox
