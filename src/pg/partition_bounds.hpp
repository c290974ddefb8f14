// Where a time falls among the range partitions of a table partitioned by one timestamptz
// (outbox.events by part_at, outbox.inbox by event_at), read from the partition descriptor,
// which follows the catalog rather than the snapshot. Raise PostgreSQL errors: call inside
// guard().
#pragma once

#include "pg/postgres.hpp"

extern "C" {
#include "utils/relcache.h"
}

namespace outbox::pg {

// The partition of `parent` that holds `at`, as the executor's tuple routing finds it;
// InvalidOid when none does (or `parent` is not partitioned by one range column).
Oid partition_for(Relation parent, TimestampTz at);

// Where the newest partition of `parent` ends: DT_NOBEGIN when it has none, DT_NOEND when
// one goes up to MAXVALUE.
TimestampTz newest_upper(Relation parent);

}  // namespace outbox::pg
