// outbox.inbox_receive(consumer, event_id, event_time): the consumer's inbox
// (docs/reference.md). The function finds the partition of the event's time
// (core/inbox_rules.hpp) itself, since it must tell an event past every partition (too old:
// new, unrecorded) from one ahead of them (make them), and then runs one INSERT ... ON
// CONFLICT DO NOTHING into it, planned once per partition and backend.
//
// It checks the consumer name against the role that calls it (current_user, as a privilege
// is checked: a SECURITY DEFINER function calling it acts as its owner), so it is not
// SECURITY DEFINER itself: it switches to its owner for the inbox's work, as
// fmgr_security_definer would (an error's abort restores the caller).
#include <optional>

#include "core/inbox_rules.hpp"
#include "pg/boundary.hpp"
#include "pg/inbox_consumers.hpp"
#include "pg/partition_bounds.hpp"
#include "pg/settings.hpp"
#include "pg/text_measure.hpp"

extern "C" {
#include "access/table.h"
#include "common/int.h"
#include "catalog/pg_proc.h"
#include "storage/lmgr.h"
#include "utils/syscache.h"
}

namespace outbox::pg {
namespace {

constexpr const char* kFunction = "outbox.inbox_receive";
constexpr const char* kCreatePartitionsSql =
    "SELECT pg_catalog.count(*) FROM outbox._create_inbox_partitions($1)";
constexpr Oid kInsertTypes[3] = {TIMESTAMPTZOID, UUIDOID, TEXTOID};
constexpr int kMaxPlans = 32;
// PostgreSQL's epoch (2000-01-01) in Unix microseconds.
constexpr int64 kUnixEpochUs =
    (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
    USECS_PER_DAY;  // partitions a backend keeps a plan for; then it starts over

// Per-backend; trivially destructible. A plan is used only for the partition of that oid
// and name: an oid can come back as another table's after a drop.
struct PartitionPlan {
  Oid partition;
  NameData name;
  SPIPlanPtr plan;
};
struct InboxState {
  PartitionPlan plans[kMaxPlans];
  int count = 0;
};
InboxState state;

enum class Where { kPartition, kPast, kFuture };
struct Route {
  Where where;
  Oid partition;
  TimestampTz newest_upper;  // where the newest partition ends (DT_NOBEGIN: none)
};

// The partition that holds `at`, from the partition descriptor (which follows the catalog,
// not the snapshot). outbox.inbox is locked as an INSERT locks it: rotate_inbox() drops
// partitions under ACCESS EXCLUSIVE, so none goes away before this transaction ends.
Route find_partition(TimestampTz at) {
  return guard([&]() -> Route {
    const Oid relid = get_relname_relid("inbox", get_namespace_oid("outbox", false));
    if (!OidIsValid(relid)) elog(ERROR, "outbox.inbox does not exist");
    Relation rel = table_open(relid, RowExclusiveLock);
    Route route{Where::kFuture, partition_for(rel, at), newest_upper(rel)};
    table_close(rel, NoLock);
    if (OidIsValid(route.partition)) {
      route.where = Where::kPartition;
    } else if (at < route.newest_upper) {
      route.where = Where::kPast;  // before the oldest partition, or in a hole
    }
    return route;
  });
}

// The partitions up to outbox.premake intervals ahead, as rotate_inbox() makes them: for the
// first call, and when rotation has not run for a while. Under the lock that making them
// takes: of two callers, the second finds the first one's partitions (the partition
// descriptor follows the catalog, whatever the snapshot) and makes none.
Route make_partitions(TimestampTz at) {
  guard([] {
    const Oid inbox = get_relname_relid("inbox", get_namespace_oid("outbox", false));
    LockRelationOid(inbox, ShareUpdateExclusiveLock);
  });
  const Route route = find_partition(at);
  if (route.where != Where::kFuture) return route;
  guard([] {
    Datum now = TimestampTzGetDatum(GetCurrentTimestamp());
    Oid type = TIMESTAMPTZOID;
    if (SPI_execute_with_args(kCreatePartitionsSql, 1, &type, &now, nullptr, false, 0) !=
        SPI_OK_SELECT) {
      elog(ERROR, "outbox: making the inbox's partitions failed");
    }
  });
  return find_partition(at);
}

SPIPlanPtr insert_plan(Oid partition) {
  return guard([&]() -> SPIPlanPtr {
    const char* name = get_rel_name(partition);
    const char* schema = get_namespace_name(get_rel_namespace(partition));
    if (name == nullptr || schema == nullptr) elog(ERROR, "outbox.inbox: a partition went away");
    for (int i = 0; i < state.count; ++i) {
      const PartitionPlan& p = state.plans[i];
      if (p.partition == partition && strcmp(NameStr(p.name), name) == 0) return p.plan;
    }
    if (state.count == kMaxPlans) {
      for (int i = 0; i < state.count; ++i) SPI_freeplan(state.plans[i].plan);
      state.count = 0;
    }
    const char* sql = psprintf(
        "INSERT INTO %s (event_at, event_id, consumer) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        quote_qualified_identifier(schema, name));
    SPIPlanPtr plan = SPI_prepare(sql, 3, const_cast<Oid*>(kInsertTypes));
    if (plan == nullptr || SPI_keepplan(plan) != 0) {
      elog(ERROR, "outbox: preparing the inbox's insert failed: %s",
           SPI_result_code_string(SPI_result));
    }
    PartitionPlan& kept = state.plans[state.count++];
    kept.partition = partition;
    namestrcpy(&kept.name, name);
    kept.plan = plan;
    return plan;
  });
}

// The consumer name's bytes, checked: its rules (core/inbox_rules.hpp), then its binding
// to the calling role.
void check_consumer(Datum value, bool is_null) {
  const TextMeasure consumer = measure_text(value, is_null);
  outbox::check_required_text(kFunction, "consumer", consumer.is_null, consumer.chars);
  const std::string_view name = guard([&]() -> std::string_view {
    text* t = DatumGetTextPP(value);
    return {VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)};
  });
  outbox::check_consumer_name(kFunction, name);
  check_inbox_consumer(kFunction, name, guard([] { return GetUserId(); }));
}

Oid owner_of(Oid function) {
  return guard([&] {
    HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(function));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "outbox: function %u not found", function);
    const Oid owner = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple))->proowner;
    ReleaseSysCache(tuple);
    return owner;
  });
}

// Runs as `user` while it lives. Both calls only set two variables: they cannot fail.
class RunAs {
 public:
  explicit RunAs(Oid user) {
    GetUserIdAndSecContext(&saved_user_, &saved_context_);
    SetUserIdAndSecContext(user, saved_context_ | SECURITY_LOCAL_USERID_CHANGE);
  }
  ~RunAs() { SetUserIdAndSecContext(saved_user_, saved_context_); }
  RunAs(const RunAs&) = delete;
  RunAs& operator=(const RunAs&) = delete;

 private:
  Oid saved_user_ = InvalidOid;
  int saved_context_ = 0;
};

std::string time_text(TimestampTz t) {
  return guard([&] { return timestamptz_to_str(t); });
}

}  // namespace
}  // namespace outbox::pg

// outbox.inbox_receive(consumer text, event_id uuid, event_time timestamptz DEFAULT NULL)
// RETURNS boolean: true when this consumer had no record of the event, which it now has (in
// the caller's transaction); false for a copy. Not STRICT: a NULL gets its own error.
OUTBOX_FUNCTION(outbox_inbox_receive) {
  using namespace outbox::pg;
  check_consumer(PG_GETARG_DATUM(0), PG_ARGISNULL(0));
  outbox::Uuid id{};
  if (!PG_ARGISNULL(1)) memcpy(id.data(), PG_GETARG_UUID_P(1)->data, id.size());
  std::optional<int64_t> given_unix_us;
  if (!PG_ARGISNULL(2)) {
    const TimestampTz given = PG_GETARG_TIMESTAMPTZ(2);
    if (TIMESTAMP_NOT_FINITE(given)) {
      throw outbox::Error(outbox::sqlstate::kInvalidParameterValue,
                          std::string(kFunction) + ": event_time must be finite");
    }
    int64 unix_us = 0;
    if (pg_add_s64_overflow(given, kUnixEpochUs, &unix_us)) {
      throw outbox::Error(outbox::sqlstate::kInvalidParameterValue,
                          std::string(kFunction) + ": event_time is out of range");
    }
    given_unix_us = unix_us;
  }
  const int64_t unix_us =
      outbox::inbox_event_unix_us(PG_ARGISNULL(1) ? nullptr : &id, given_unix_us);
  const TimestampTz at = unix_us - kUnixEpochUs;

  const RunAs owner(owner_of(fcinfo->flinfo->fn_oid));
  guard([] {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox: SPI_connect failed");
  });
  Route route = find_partition(at);
  // Making partitions helps only an event that they would cover: not one from a clock far
  // ahead, which must not take their lock on every call.
  const int64 ahead_us =
      static_cast<int64>(settings.premake + 1) * settings.partition_interval_s * USECS_PER_SEC;
  if (route.where == Where::kFuture && at < GetCurrentTimestamp() + ahead_us) {
    route = make_partitions(at);
  }
  if (route.where == Where::kFuture) {
    throw outbox::Error(outbox::sqlstate::kInvalidParameterValue,
                        std::string(kFunction) + ": the event's time (" + time_text(at) +
                            ") is past the inbox's newest partition",
                        route.newest_upper == DT_NOBEGIN
                            ? std::string("The inbox has no partition.")
                            : "Its partitions end at " + time_text(route.newest_upper) + ".",
                        "Partitions are made outbox.premake intervals ahead of the clock: "
                        "check the clock of the event's producer.");
  }
  // Past outbox.inbox_retention (or in a range whose partition was dropped by hand) no
  // record can tell a copy: the event counts as new, at least once rather than never.
  bool is_new = true;
  if (route.where == Where::kPartition) {
    SPIPlanPtr plan = insert_plan(route.partition);
    is_new = guard([&] {
      Datum values[3] = {TimestampTzGetDatum(at), PG_GETARG_DATUM(1), PG_GETARG_DATUM(0)};
      if (SPI_execute_plan(plan, values, nullptr, false, 0) != SPI_OK_INSERT) {
        elog(ERROR, "outbox: the inbox's insert failed");
      }
      return SPI_processed == 1;
    });
  }
  guard([] { SPI_finish(); });
  return BoolGetDatum(is_new);
}
