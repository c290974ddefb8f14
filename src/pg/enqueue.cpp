// outbox.enqueue(): writes an event in the caller's transaction; what enqueue_batch
// (enqueue_batch.cpp) shares with it is declared in enqueue.hpp.
//
// Each event is validated by the plain C++ rules in core/event_rules, gets a UUIDv7 id
// unless the caller gave one, and is written straight into its partition
// (pg/event_insert.hpp), or, when outbox.events has a trigger or the like, with a prepared
// SPI INSERT kept for the life of the backend. The insert runs in the caller's transaction:
// the event commits or rolls back with the business rows. Per event, one guarded step reads
// what the checks need (read_measure), plain C++ checks it (validate), and one guarded step
// writes it (write_event).
//
// Which partition an event goes to (part_at) is pg/partition_route.hpp's.
// An id given by the caller is an idempotency key: enqueue with an id that an event of the
// table already has writes nothing and returns the id when the event is the same, and fails
// with 23505 when it is not (given_id_exists).
#include <algorithm>
#include <array>

#include "core/event_rules.hpp"
#include "core/uuid7.hpp"
#include "pg/boundary.hpp"
#include "pg/enqueue.hpp"
#include "pg/event_insert.hpp"
#include "pg/given_id.hpp"
#include "pg/jsonb_object.hpp"
#include "pg/partition_route.hpp"
#include "pg/commit_wake.hpp"
#include "pg/settings.hpp"
#include "pg/text_measure.hpp"

extern "C" {
#include "access/xact.h"
#include "commands/sequence.h"
#include "utils/array.h"
}

namespace outbox::pg {
namespace {

constexpr int kInsertArgs = 8;
constexpr const char* kInsertSql =
    "INSERT INTO outbox.events "
    "(id, aggregatetype, aggregateid, type, payload, headers, created_at, part_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

// Per-backend state; trivially destructible, lives as long as the backend.
struct EnqueueState {
  SPIPlanPtr insert_plan = nullptr;
  Uuid7Generator ids;
  std::array<uint8_t, 4000> random_pool{};
  size_t random_used = 4000;  // empty: filled on first use, after fork
};
EnqueueState state;

// C-style: runs inside guard().
HeadersMeasure read_headers(Datum value) {
  Jsonb* jb = DatumGetJsonbP(value);
  if (!JB_ROOT_IS_OBJECT(jb)) return {false, false, false, nullptr};
  HeadersMeasure out{true, false, false, nullptr};
  for_each_member(&jb->root, [&](const JsonbValue& key, const JsonbValue& v) {
    char* name = pnstrdup(key.val.string.val, key.val.string.len);
    const bool is_string = v.type == jbvString;
    if (is_string && name[0] != '\0' && !is_reserved_header(name)) return true;
    out = {true, true, is_string, name};
    return false;
  });
  return out;
}

void validate(const char* function, const EventDatums& e, const EventMeasure& m) {
  const std::string_view fn(function);
  check_required_text(fn, "aggregatetype", m.aggregatetype.is_null, m.aggregatetype.chars);
  check_required_text(fn, "aggregateid", m.aggregateid.is_null, m.aggregateid.chars);
  check_required_text(fn, "type", m.type.is_null, m.type.chars);
  check_payload(fn, e.payload_null, m.payload_bytes,
                static_cast<size_t>(settings.max_payload_bytes));
  if (!e.headers_null) {
    check_headers_size(fn, m.headers_bytes, static_cast<size_t>(settings.max_headers_bytes));
    check_headers_shape(fn, m.headers.is_object ? HeadersShape::kObject : HeadersShape::kNotObject);
    if (m.headers.has_bad_entry) {
      check_header(
          fn, m.headers.bad_key,
          m.headers.bad_value_is_string ? HeaderValueKind::kString : HeaderValueKind::kOther);
    }
  }
  if (m.id_nil) {
    throw Error(sqlstate::kInvalidParameterValue,
                std::string(function) + ": id must not be the nil UUID");
  }
}

// Fresh random bytes for an id. pg_strong_random (OpenSSL) costs a few microseconds per
// call, a sixth of enqueue's server time; drawing 4000 bytes at once makes it negligible.
// The bytes are used once each, so the ids stay as unpredictable as gen_random_uuid()'s.
// C-style: runs inside guard().
void random_bytes(std::array<uint8_t, 10>& out) {
  if (state.random_used + out.size() > state.random_pool.size()) {
    if (!pg_strong_random(state.random_pool.data(), state.random_pool.size()))
      ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                      errmsg("outbox: could not generate random bytes for an id")));
    state.random_used = 0;
  }
  memcpy(out.data(), state.random_pool.data() + state.random_used, out.size());
  memset(state.random_pool.data() + state.random_used, 0, out.size());
  state.random_used += out.size();
}

// A new UUIDv7 for an event created at `created`, palloc'd. C-style: runs inside guard().
pg_uuid_t* new_id(TimestampTz created) {
  std::array<uint8_t, 10> random{};
  random_bytes(random);
  const int64_t unix_ms =
      created / 1000 +
      static_cast<int64_t>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
  Uuid id = state.ids.next(unix_ms, random);
  auto* out = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
  memcpy(out->data, id.data(), UUID_LEN);
  return out;
}

// Copies an id into `context`: SPI_finish frees what was allocated while connected.
// C-style: runs inside guard().
Datum copy_id(Datum id, MemoryContext context) {
  void* out = MemoryContextAlloc(context, sizeof(pg_uuid_t));
  memcpy(out, DatumGetUUIDP(id), sizeof(pg_uuid_t));
  return UUIDPGetDatum(static_cast<pg_uuid_t*>(out));
}

// Writes a validated event; SPI must be connected. Returns its id, copied into `out`.
// C-style: runs inside guard().
Datum write_event(const EventDatums& e, MemoryContext out) {
  const TimestampTz created = GetCurrentTimestamp();
  const TimestampTz part_at = partition_time(created);
  const Datum id = e.id_null ? UUIDPGetDatum(new_id(created)) : e.id;
  const EventRow row{id,        e.aggregatetype, e.aggregateid, e.type, e.payload,
                     e.headers, e.headers_null,  created,       part_at};
  if (!insert_event_row(row)) {
    // A trigger, a policy or a column someone added to outbox.events: the executor's INSERT.
    if (state.insert_plan == nullptr) {
      Oid types[kInsertArgs] = {UUIDOID,  TEXTOID,  TEXTOID,        TEXTOID,
                                JSONBOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
      SPIPlanPtr plan = SPI_prepare(kInsertSql, kInsertArgs, types);
      if (plan == nullptr)
        elog(ERROR, "outbox: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
      SPI_keepplan(plan);
      state.insert_plan = plan;
    }
    Datum values[kInsertArgs] = {id,
                                 e.aggregatetype,
                                 e.aggregateid,
                                 e.type,
                                 e.payload,
                                 e.headers,
                                 TimestampTzGetDatum(created),
                                 TimestampTzGetDatum(part_at)};
    char nulls[kInsertArgs] = {' ', ' ', ' ', ' ', ' ', e.headers_null ? 'n' : ' ', ' ', ' '};
    int rc = SPI_execute_plan(state.insert_plan, values, nulls, false, 0);
    if (rc != SPI_OK_INSERT) elog(ERROR, "outbox: insert failed: %s", SPI_result_code_string(rc));
  }
  relay_wake_owner_at_commit(e.aggregatetype, e.aggregateid);
  return copy_id(id, out);
}

// An id given by the caller that an event already has: the same event writes nothing, and
// another one is an error (an idempotency key). Returns whether the event exists.
bool given_id_exists(const char* function, const EventDatums& e) {
  const GivenId existing = guard([&] {
    return find_given_id(e.id, {e.aggregatetype, e.aggregateid, e.type, e.payload, e.headers},
                         e.headers_null);
  });
  if (existing == GivenId::kSameEvent) return true;
  if (existing == GivenId::kOtherEvent) {
    const char* id = guard([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, e.id)); });
    throw Error(
        sqlstate::kUniqueViolation,
        std::string(function) + ": an event with id " + id + " exists, with different content",
        "An id given to enqueue is an idempotency key: calling again with the same id "
        "and the same event writes nothing; a different event needs a new id.",
        "Leave id out to get a new UUIDv7.");
  }
  return false;
}

}  // namespace

EventMeasure read_measure(const EventDatums& e) {
  EventMeasure m{};
  m.aggregatetype = read_text_measure(e.aggregatetype, e.aggregatetype_null);
  m.aggregateid = read_text_measure(e.aggregateid, e.aggregateid_null);
  m.type = read_text_measure(e.type, e.type_null);
  if (!e.payload_null) m.payload_bytes = VARSIZE_ANY_EXHDR(DatumGetJsonbP(e.payload));
  if (!e.headers_null) {
    m.headers_bytes = VARSIZE_ANY_EXHDR(DatumGetJsonbP(e.headers));
    // The shape is read only within the size limit: validate() refuses larger headers first.
    if (m.headers_bytes <= static_cast<size_t>(settings.max_headers_bytes))
      m.headers = read_headers(e.headers);
  }
  if (!e.id_null) {
    static const pg_uuid_t kNil = {};
    m.id_nil = memcmp(DatumGetUUIDP(e.id), &kNil, UUID_LEN) == 0;
  }
  return m;
}

Datum enqueue_measured(const char* function, const EventDatums& e, const EventMeasure& m,
                       MemoryContext out) {
  validate(function, e, m);
  if (!e.id_null && given_id_exists(function, e)) return guard([&] { return copy_id(e.id, out); });
  return guard([&] { return write_event(e, out); });
}

}  // namespace outbox::pg

using outbox::Error;
using outbox::pg::EventDatums;
using outbox::pg::guard;

// outbox.enqueue(aggregatetype, aggregateid, type, payload, headers, id) RETURNS uuid
OUTBOX_FUNCTION(outbox_enqueue) {
  using outbox::pg::EventMeasure;
  EventDatums e{PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), PG_GETARG_DATUM(3),
                PG_GETARG_DATUM(4), PG_GETARG_DATUM(5), PG_ARGISNULL(0),    PG_ARGISNULL(1),
                PG_ARGISNULL(2),    PG_ARGISNULL(3),    PG_ARGISNULL(4),    PG_ARGISNULL(5)};
  MemoryContext caller = CurrentMemoryContext;
  const EventMeasure m = guard([&] {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox: SPI_connect failed");
    return outbox::pg::read_measure(e);
  });
  Datum id = outbox::pg::enqueue_measured("outbox.enqueue", e, m, caller);
  guard([] { SPI_finish(); });
  return id;
}

// outbox._next_seq(regclass): the default of outbox.events.seq. The transaction gets its
// xid before the sequence value, so once a snapshot's xmin has passed the next xid read
// after the sequence, no transaction that could still commit an event at or below that
// value is running. The relay's low-water mark relies on it (src/relay/low_water.cpp).
OUTBOX_FUNCTION(outbox_next_seq) {
  return guard([&] {
    (void)GetTopTransactionId();
    return Int64GetDatum(nextval_internal(PG_GETARG_OID(0), true));
  });
}
