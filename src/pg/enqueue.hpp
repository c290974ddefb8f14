// What outbox.enqueue() and outbox.enqueue_batch() share (enqueue.cpp, enqueue_batch.cpp):
// an event as PostgreSQL values, what its validation needs, and the write.
#pragma once

#include "pg/postgres.hpp"
#include "pg/text_measure.hpp"

namespace outbox::pg {

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

// What validate() needs of one event: read in one guarded step, checked in plain C++.
struct EventMeasure {
  TextMeasure aggregatetype, aggregateid, type;
  size_t payload_bytes;
  size_t headers_bytes;
  HeadersMeasure headers;
  bool id_nil;
};

// Reads what validate() needs of an event. C-style: call inside guard().
EventMeasure read_measure(const EventDatums& e);

// Validates and writes one event whose measure was read; SPI must be connected. Returns
// the event id, copied into `out`. `function` names the event in errors.
Datum enqueue_measured(const char* function, const EventDatums& e, const EventMeasure& m,
                       MemoryContext out);

}  // namespace outbox::pg
