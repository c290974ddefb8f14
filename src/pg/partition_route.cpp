// See partition_route.hpp.
#include "pg/partition_route.hpp"

#include <algorithm>

#include "pg/boundary.hpp"
#include "pg/partition_bounds.hpp"
#include "pg/relay_databases.hpp"

extern "C" {
#include "access/table.h"
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace outbox::pg {
namespace {

constexpr TimestampTz kLateWarningEveryUs = 10 * 60 * USECS_PER_SEC;
constexpr const char* kCreatePartitionsSql =
    "SELECT pg_catalog.count(*) FROM outbox._create_partitions($1)";

// Per-backend; trivially destructible.
struct RouteState {
  // Upper bound of the newest partition, as last read. Partitions are only ever added
  // after it, so a time below it always has a partition.
  TimestampTz newest_upper = DT_NOBEGIN;
  TimestampTz last_late_warning = 0;
};
RouteState state;

// Reads the newest partition's upper bound. Runs only when the clock passes the cached bound.
TimestampTz read_newest_upper() {
  return guard([&]() -> TimestampTz {
    Oid relid = get_relname_relid("events", get_namespace_oid("outbox", false));
    if (!OidIsValid(relid)) elog(ERROR, "outbox.events does not exist");
    Relation rel = table_open(relid, RowExclusiveLock);
    const TimestampTz newest = newest_upper(rel);
    table_close(rel, NoLock);
    return newest;
  });
}

// No partition at all: make them, as outbox.rotate() would. Under the lock that creating a
// partition takes, so that of two first enqueues the second finds the first one's partitions
// (it reads the partitions again once it has the lock). SPI must be connected.
void make_first_partitions(TimestampTz now) {
  guard([&] {
    const Oid events = get_relname_relid("events", get_namespace_oid("outbox", false));
    LockRelationOid(events, ShareUpdateExclusiveLock);
  });
  state.newest_upper = read_newest_upper();
  if (state.newest_upper != DT_NOBEGIN) return;
  guard([&] {
    Oid types[1] = {TIMESTAMPTZOID};
    Datum values[1] = {TimestampTzGetDatum(now)};
    if (SPI_execute_with_args(kCreatePartitionsSql, 1, types, values, nullptr, false, 0) !=
        SPI_OK_SELECT) {
      elog(ERROR, "outbox: making the first partitions failed");
    }
  });
  state.newest_upper = read_newest_upper();
}

TimestampTz route(TimestampTz created) {
  if (created < state.newest_upper) return created;
  state.newest_upper = read_newest_upper();
  if (created < state.newest_upper) return created;
  if (state.newest_upper == DT_NOBEGIN) make_first_partitions(created);
  if (created < state.newest_upper) return created;
  if (state.newest_upper == DT_NOBEGIN) {
    throw Error(sqlstate::kObjectNotInPrerequisiteState, "outbox.events has no partitions",
                "Every partition of outbox.events was dropped or detached by hand.",
                "Run SELECT outbox.rotate(); to make partitions again.");
  }
  if (created - state.last_late_warning >= kLateWarningEveryUs) {
    state.last_late_warning = created;
    guard([&] {
      ereport(
          WARNING,
          (errmsg("outbox: no partition covers the current time; events go to the newest "
                  "partition"),
           errdetail("The newest partition ends at %s.", timestamptz_to_str(state.newest_upper)),
           errhint("Schedule SELECT outbox.rotate(); with pg_cron, see docs/operations.md.")));
    });
  }
  return state.newest_upper - 1;
}

}  // namespace

TimestampTz partition_time(TimestampTz created) {
  TimestampTz part_at = route(created);
  // Never into a partition the relay has sealed (a clock that stepped back): the oldest one
  // it still reads, or the newest.
  const TimestampTz floor = relay_enqueue_floor(MyDatabaseId);
  if (part_at < floor) part_at = std::min(floor, state.newest_upper - 1);
  return part_at;
}

}  // namespace outbox::pg
