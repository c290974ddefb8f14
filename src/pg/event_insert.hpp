// The row enqueue writes, written straight into its partition: the heap insert and its index
// entries, as COPY does, without planning or executing an INSERT and without routing the row
// through outbox.events (which cost more than the row itself: bench/cost.sh).
//
// enqueue has already chosen part_at (pg/partition_route.hpp) and validated every value. The
// parent outbox.events is locked as an INSERT would lock it, so outbox.rotate(), which drops
// partitions under an ACCESS EXCLUSIVE lock on it, still never runs beside an insert.
//
// What only the executor does (triggers, row security, CHECK constraints, generated columns,
// columns other than outbox's own), none of which outbox.events has unless someone added it:
// then this returns false and enqueue runs its INSERT.
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

// One event row; every value is set (headers may be NULL).
struct EventRow {
  Datum id;                                // uuid
  Datum aggregatetype, aggregateid, type;  // text, at most 255 characters each
  Datum payload, headers;                  // jsonb
  bool headers_null;
  TimestampTz created_at, part_at;
};

// Inserts the row with a new seq (outbox._next_seq()'s: the xid first). Returns false, having
// written nothing, when the row needs the executor (above). Raises PostgreSQL errors: call
// inside guard().
bool insert_event_row(const EventRow& row);

}  // namespace outbox::pg
