// outbox.enqueue() and outbox.enqueue_batch(): write events in the caller's transaction.
//
// Each event is validated by the plain C++ rules in core/event_rules, gets a UUIDv7 id
// unless the caller gave one, and is written straight into its partition
// (pg/event_insert.hpp), or, when outbox.events has a trigger or the like, with a prepared
// SPI INSERT kept for the life of the backend. The insert runs in the caller's transaction:
// the event commits or rolls back with the business rows.
//
// Which partition an event goes to (part_at) is pg/partition_route.hpp's.
// An id given by the caller is an idempotency key: enqueue with an id that an event of the
// table already has writes nothing and returns the id when the event is the same, and fails
// with 23505 when it is not (see insert_event).
#include <algorithm>
#include <array>

#include "core/event_rules.hpp"
#include "core/uuid7.hpp"
#include "pg/boundary.hpp"
#include "pg/event_insert.hpp"
#include "pg/given_id.hpp"
#include "pg/jsonb_object.hpp"
#include "pg/partition_route.hpp"
#include "pg/relay_shmem.hpp"
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

// One event as PostgreSQL values, before validation. Trivially destructible.
struct EventDatums {
  Datum aggregatetype, aggregateid, type, payload, headers, id;
  bool aggregatetype_null, aggregateid_null, type_null, payload_null, headers_null, id_null;
};

struct HeadersMeasure {
  bool is_object;
  bool has_bad_entry;
  bool bad_value_is_string;
  char* bad_key;  // palloc'd
};

HeadersMeasure measure_headers(Datum value) {
  return guard([&]() -> HeadersMeasure {
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
  });
}

void validate(const char* function, const EventDatums& e) {
  const std::string_view fn(function);
  auto t = measure_text(e.aggregatetype, e.aggregatetype_null);
  check_required_text(fn, "aggregatetype", t.is_null, t.chars);
  t = measure_text(e.aggregateid, e.aggregateid_null);
  check_required_text(fn, "aggregateid", t.is_null, t.chars);
  t = measure_text(e.type, e.type_null);
  check_required_text(fn, "type", t.is_null, t.chars);

  size_t payload_bytes = 0;
  if (!e.payload_null) {
    payload_bytes = guard([&]() -> size_t { return VARSIZE_ANY_EXHDR(DatumGetJsonbP(e.payload)); });
  }
  check_payload(fn, e.payload_null, payload_bytes, static_cast<size_t>(settings.max_payload_bytes));

  if (!e.headers_null) {
    const size_t header_bytes =
        guard([&]() -> size_t { return VARSIZE_ANY_EXHDR(DatumGetJsonbP(e.headers)); });
    check_headers_size(fn, header_bytes, static_cast<size_t>(settings.max_headers_bytes));
    HeadersMeasure h = measure_headers(e.headers);
    check_headers_shape(fn, h.is_object ? HeadersShape::kObject : HeadersShape::kNotObject);
    if (h.has_bad_entry) {
      check_header(fn, h.bad_key,
                   h.bad_value_is_string ? HeaderValueKind::kString : HeaderValueKind::kOther);
    }
  }
  if (!e.id_null) {
    bool nil = guard([&]() -> bool {
      static const pg_uuid_t kNil = {};
      return memcmp(DatumGetUUIDP(e.id), &kNil, UUID_LEN) == 0;
    });
    if (nil) {
      throw Error(sqlstate::kInvalidParameterValue,
                  std::string(function) + ": id must not be the nil UUID");
    }
  }
}

// Fresh random bytes for an id. pg_strong_random (OpenSSL) costs a few microseconds per
// call, a sixth of enqueue's server time; drawing 4000 bytes at once makes it negligible.
// The bytes are used once each, so the ids stay as unpredictable as gen_random_uuid()'s.
std::array<uint8_t, 10> random_bytes() {
  std::array<uint8_t, 10> out{};
  if (state.random_used + out.size() > state.random_pool.size()) {
    bool ok = guard([&]() -> bool {
      return pg_strong_random(state.random_pool.data(), state.random_pool.size());
    });
    if (!ok) {
      throw Error(sqlstate::kInternalError, "outbox: could not generate random bytes for an id");
    }
    state.random_used = 0;
  }
  memcpy(out.data(), state.random_pool.data() + state.random_used, out.size());
  memset(state.random_pool.data() + state.random_used, 0, out.size());
  state.random_used += out.size();
  return out;
}

pg_uuid_t* new_id(TimestampTz created) {
  const std::array<uint8_t, 10> random = random_bytes();
  const int64_t unix_ms =
      created / 1000 +
      static_cast<int64_t>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
  Uuid id = state.ids.next(unix_ms, random);
  return guard([&]() -> pg_uuid_t* {
    auto* out = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
    memcpy(out->data, id.data(), UUID_LEN);
    return out;
  });
}

// Validates and inserts one event; SPI must be connected. Returns the event id.
Datum insert_event(const char* function, const EventDatums& e) {
  validate(function, e);
  if (!e.id_null) {
    const GivenId existing = guard([&] {
      return find_given_id(e.id, {e.aggregatetype, e.aggregateid, e.type, e.payload, e.headers},
                           e.headers_null);
    });
    if (existing == GivenId::kSameEvent) return e.id;
    if (existing == GivenId::kOtherEvent) {
      const char* id = guard([&] { return DatumGetCString(DirectFunctionCall1(uuid_out, e.id)); });
      throw Error(
          sqlstate::kUniqueViolation,
          std::string(function) + ": an event with id " + id + " exists, with different content",
          "An id given to enqueue is an idempotency key: calling again with the same id "
          "and the same event writes nothing; a different event needs a new id.",
          "Leave id out to get a new UUIDv7.");
    }
  }
  const TimestampTz created = guard([] { return GetCurrentTimestamp(); });
  const TimestampTz part_at = partition_time(created);
  Datum id = e.id_null ? UUIDPGetDatum(new_id(created)) : e.id;
  guard([&] {
    const EventRow row{id,        e.aggregatetype, e.aggregateid, e.type, e.payload,
                       e.headers, e.headers_null,  created,       part_at};
    if (insert_event_row(row)) return;
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
  });
  guard([&] { relay_wake_owner_at_commit(e.aggregatetype, e.aggregateid); });
  return id;
}

// Copies an id into `context`: SPI_finish frees what was allocated while connected.
Datum copy_id(Datum id, MemoryContext context) {
  return guard([&] {
    void* out = MemoryContextAlloc(context, sizeof(pg_uuid_t));
    memcpy(out, DatumGetUUIDP(id), sizeof(pg_uuid_t));
    return UUIDPGetDatum(static_cast<pg_uuid_t*>(out));
  });
}

// Looks up a field of a batch element. Returns false when absent or JSON null.
bool batch_field(JsonbContainer* object, const char* key, JsonbValue* out) {
  JsonbValue k;
  k.type = jbvString;
  k.val.string.val = const_cast<char*>(key);
  k.val.string.len = static_cast<int>(strlen(key));
  JsonbValue* found = findJsonbValueFromContainer(object, JB_FOBJECT, &k);
  if (found == nullptr || found->type == jbvNull) return false;
  *out = *found;
  return true;
}

enum class BatchProblem { kNone, kNotObject, kUnknownKey, kNotString, kIdNotString };

struct BatchElement {
  EventDatums datums;
  BatchProblem problem;
  char* bad_key;
};

// Turns element `index` of the array into datums; C-style, runs inside guard().
BatchElement read_batch_element(JsonbValue* element) {
  static const char* const kKeys[] = {"aggregatetype", "aggregateid", "type",
                                      "payload",       "headers",     "id"};
  BatchElement out{};
  if (element->type != jbvBinary || !JsonContainerIsObject(element->val.binary.data)) {
    out.problem = BatchProblem::kNotObject;
    return out;
  }
  JsonbContainer* object = element->val.binary.data;

  // Unknown keys are refused, so that a typo such as "aggregate_id" is not a silent NULL.
  const bool all_known = for_each_member(object, [&](const JsonbValue& key, const JsonbValue&) {
    for (const char* k : kKeys) {
      if (strlen(k) == static_cast<size_t>(key.val.string.len) &&
          memcmp(k, key.val.string.val, key.val.string.len) == 0) {
        return true;
      }
    }
    out.bad_key = pnstrdup(key.val.string.val, key.val.string.len);
    return false;
  });
  if (!all_known) {
    out.problem = BatchProblem::kUnknownKey;
    return out;
  }

  struct TextField {
    const char* key;
    Datum* datum;
    bool* is_null;
  };
  EventDatums& d = out.datums;
  const TextField texts[] = {{"aggregatetype", &d.aggregatetype, &d.aggregatetype_null},
                             {"aggregateid", &d.aggregateid, &d.aggregateid_null},
                             {"type", &d.type, &d.type_null}};
  for (const TextField& f : texts) {
    JsonbValue value;
    *f.is_null = !batch_field(object, f.key, &value);
    if (*f.is_null) continue;
    if (value.type != jbvString) {
      out.problem = BatchProblem::kNotString;
      out.bad_key = pstrdup(f.key);
      return out;
    }
    *f.datum =
        PointerGetDatum(cstring_to_text_with_len(value.val.string.val, value.val.string.len));
  }
  JsonbValue value;
  d.payload_null = !batch_field(object, "payload", &value);
  if (!d.payload_null) d.payload = JsonbPGetDatum(JsonbValueToJsonb(&value));
  d.headers_null = !batch_field(object, "headers", &value);
  if (!d.headers_null) d.headers = JsonbPGetDatum(JsonbValueToJsonb(&value));
  d.id_null = !batch_field(object, "id", &value);
  if (!d.id_null) {
    if (value.type != jbvString) {
      out.problem = BatchProblem::kIdNotString;
      return out;
    }
    char* s = pnstrdup(value.val.string.val, value.val.string.len);
    d.id = DirectFunctionCall1(uuid_in, CStringGetDatum(s));
  }
  return out;
}

}  // namespace
}  // namespace outbox::pg

using outbox::Error;
using outbox::pg::EventDatums;
using outbox::pg::guard;

// outbox.enqueue(aggregatetype, aggregateid, type, payload, headers, id) RETURNS uuid
OUTBOX_FUNCTION(outbox_enqueue) {
  EventDatums e{PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), PG_GETARG_DATUM(3),
                PG_GETARG_DATUM(4), PG_GETARG_DATUM(5), PG_ARGISNULL(0),    PG_ARGISNULL(1),
                PG_ARGISNULL(2),    PG_ARGISNULL(3),    PG_ARGISNULL(4),    PG_ARGISNULL(5)};
  MemoryContext caller = CurrentMemoryContext;
  guard([] {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox: SPI_connect failed");
  });
  Datum id = outbox::pg::copy_id(outbox::pg::insert_event("outbox.enqueue", e), caller);
  guard([] { SPI_finish(); });
  return id;
}

// outbox.enqueue_batch(events jsonb) RETURNS uuid[]: one call for many events.
OUTBOX_FUNCTION(outbox_enqueue_batch) {
  using outbox::pg::BatchElement;
  using outbox::pg::BatchProblem;
  Jsonb* events = guard([&] { return PG_GETARG_JSONB_P(0); });
  const bool is_array =
      guard([&] { return JB_ROOT_IS_ARRAY(events) && !JB_ROOT_IS_SCALAR(events); });
  if (!is_array) {
    throw Error(outbox::sqlstate::kInvalidParameterValue,
                "outbox.enqueue_batch: events must be a JSON array of objects", {},
                R"(For example '[{"aggregatetype": "order", "aggregateid": "42", "type": )"
                R"("OrderCreated", "payload": {}}]'.)");
  }
  const int count = guard([&] { return static_cast<int>(JB_ROOT_COUNT(events)); });
  Datum* ids = guard([&] { return static_cast<Datum*>(palloc0(sizeof(Datum) * (count + 1))); });
  MemoryContext outer = CurrentMemoryContext;
  MemoryContext per_event = guard([&] {
    return AllocSetContextCreate(CurrentMemoryContext, "outbox enqueue_batch",
                                 ALLOCSET_DEFAULT_SIZES);
  });
  guard([] {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox: SPI_connect failed");
  });
  for (int i = 0; i < count; ++i) {
    const std::string function = "outbox.enqueue_batch: event " + std::to_string(i + 1);
    BatchElement element = guard([&] {
      MemoryContextReset(per_event);
      MemoryContextSwitchTo(per_event);
      JsonbValue* v = getIthJsonbValueFromContainer(&events->root, static_cast<uint32>(i));
      return outbox::pg::read_batch_element(v);
    });
    switch (element.problem) {
      case BatchProblem::kNone:
        break;
      case BatchProblem::kNotObject:
        throw Error(outbox::sqlstate::kInvalidParameterValue, function + " is not a JSON object");
      case BatchProblem::kUnknownKey:
        throw Error(outbox::sqlstate::kInvalidParameterValue,
                    function + ": unknown key \"" + element.bad_key + "\"", {},
                    "Keys are aggregatetype, aggregateid, type, payload, headers and id.");
      case BatchProblem::kNotString:
        throw Error(outbox::sqlstate::kInvalidParameterValue,
                    function + ": " + element.bad_key + " must be a JSON string");
      case BatchProblem::kIdNotString:
        throw Error(outbox::sqlstate::kInvalidParameterValue,
                    function + ": id must be a UUID in a JSON string");
    }
    ids[i] = outbox::pg::copy_id(outbox::pg::insert_event(function.c_str(), element.datums), outer);
  }
  return guard([&] {
    SPI_finish();
    MemoryContextSwitchTo(outer);
    MemoryContextDelete(per_event);
    ArrayType* result = construct_array(ids, count, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);
    return PointerGetDatum(result);
  });
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
