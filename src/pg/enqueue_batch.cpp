// outbox.enqueue_batch(): many events in one call, each written as outbox.enqueue() writes
// one (enqueue.hpp).
#include <cstdio>
#include <string>

#include "core/error.hpp"
#include "pg/boundary.hpp"
#include "pg/enqueue.hpp"
#include "pg/jsonb_object.hpp"

extern "C" {
#include "utils/array.h"
}

namespace outbox::pg {
namespace {

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

// One element of enqueue_batch's array, read and measured in one guarded step.
struct BatchStep {
  BatchElement element;
  EventMeasure measure;
};

[[noreturn]] void refuse_element(const char* function, const BatchElement& element) {
  const std::string fn(function);
  switch (element.problem) {
    case BatchProblem::kNotObject:
      throw Error(sqlstate::kInvalidParameterValue, fn + " is not a JSON object");
    case BatchProblem::kUnknownKey:
      throw Error(sqlstate::kInvalidParameterValue,
                  fn + ": unknown key \"" + element.bad_key + "\"", {},
                  "Keys are aggregatetype, aggregateid, type, payload, headers and id.");
    case BatchProblem::kNotString:
      throw Error(sqlstate::kInvalidParameterValue,
                  fn + ": " + element.bad_key + " must be a JSON string");
    case BatchProblem::kIdNotString:
    case BatchProblem::kNone:
      break;
  }
  throw Error(sqlstate::kInvalidParameterValue, fn + ": id must be a UUID in a JSON string");
}

struct BatchSetup {
  Jsonb* events;
  bool is_array;
  int count;
  Datum* ids;
  MemoryContext per_event;
};

}  // namespace
}  // namespace outbox::pg

using outbox::Error;
using outbox::pg::guard;

// outbox.enqueue_batch(events jsonb) RETURNS uuid[]: one call for many events. Per event,
// one guarded step reads and measures it, plain C++ validates it, and one guarded step
// writes it; its name in errors is formatted on the stack.
OUTBOX_FUNCTION(outbox_enqueue_batch) {
  using outbox::pg::BatchProblem;
  using outbox::pg::BatchStep;
  MemoryContext outer = CurrentMemoryContext;
  const outbox::pg::BatchSetup setup = guard([&] {
    outbox::pg::BatchSetup out{PG_GETARG_JSONB_P(0), false, 0, nullptr, nullptr};
    out.is_array = JB_ROOT_IS_ARRAY(out.events) && !JB_ROOT_IS_SCALAR(out.events);
    if (!out.is_array) return out;
    out.count = static_cast<int>(JB_ROOT_COUNT(out.events));
    out.ids = static_cast<Datum*>(palloc0(sizeof(Datum) * (out.count + 1)));
    out.per_event =
        AllocSetContextCreate(CurrentMemoryContext, "outbox enqueue_batch", ALLOCSET_DEFAULT_SIZES);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "outbox: SPI_connect failed");
    return out;
  });
  if (!setup.is_array) {
    throw Error(outbox::sqlstate::kInvalidParameterValue,
                "outbox.enqueue_batch: events must be a JSON array of objects", {},
                R"(For example '[{"aggregatetype": "order", "aggregateid": "42", "type": )"
                R"("OrderCreated", "payload": {}}]'.)");
  }
  char function[64];
  for (int i = 0; i < setup.count; ++i) {
    snprintf(function, sizeof(function), "outbox.enqueue_batch: event %d", i + 1);
    const BatchStep step = guard([&] {
      MemoryContextReset(setup.per_event);
      MemoryContextSwitchTo(setup.per_event);
      JsonbValue* v = getIthJsonbValueFromContainer(&setup.events->root, static_cast<uint32>(i));
      BatchStep out{outbox::pg::read_batch_element(v), {}};
      if (out.element.problem == BatchProblem::kNone)
        out.measure = outbox::pg::read_measure(out.element.datums);
      return out;
    });
    if (step.element.problem != BatchProblem::kNone)
      outbox::pg::refuse_element(function, step.element);
    setup.ids[i] = outbox::pg::enqueue_measured(function, step.element.datums, step.measure, outer);
  }
  return guard([&] {
    SPI_finish();
    MemoryContextSwitchTo(outer);
    MemoryContextDelete(setup.per_event);
    ArrayType* result =
        construct_array(setup.ids, setup.count, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);
    return PointerGetDatum(result);
  });
}