// An id given to enqueue is an idempotency key: the same id with the same event writes
// nothing, and with another event it is refused (src/pg/enqueue.cpp raises the error).
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

enum class GivenId { kNew, kSameEvent, kOtherEvent };

// The event's fields, as enqueue received them.
struct EventFields {
  Datum aggregatetype, aggregateid, type;  // text
  Datum payload, headers;                  // jsonb; headers may be NULL (headers_null)
};

// Whether an event with `id` exists, and whether it is this one. Waits first for any other
// transaction that enqueues the same id, and reads with a new snapshot, so that of two
// concurrent calls the second sees the first's event (also at REPEATABLE READ). Runs inside
// guard(); SPI must be connected.
GivenId find_given_id(Datum id, const EventFields& event, bool headers_null);

}  // namespace outbox::pg
