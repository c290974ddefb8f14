// Partition routing of enqueue: the part_at of an event created at a given time. It never
// fails for lack of a partition: when the clock has passed the newest partition
// (outbox.rotate() has not run for a while) the event goes to the last instant of the newest
// partition, while created_at keeps the true time. Nor does it go below the relay's sealed
// partitions (pg/relay_databases.hpp), which the relay no longer reads. outbox.rotate() marks
// such a partition and keeps it until those rows are old enough. When there is no partition
// at all (CREATE EXTENSION makes none), the first enqueue makes them.
#pragma once

#include "pg/postgres.hpp"

namespace outbox::pg {

// The part_at of an event created at `created`. SPI must be connected (the first partitions
// may be made). Throws Error when every partition was dropped by hand.
TimestampTz partition_time(TimestampTz created);

}  // namespace outbox::pg
