// The delivery log, outbox.deliveries (docs/design.md, "The delivery log"): one row per
// batch the relay committed, with the seqs of the events the sink acknowledged.
#pragma once

// SQL: the event aliased `e` (a string literal) is in the delivery log. One GiST probe of the
// log's range index, then a look in that row's seqs. Written out, not a function: views
// read the log with their owner's rights, and the planner sees the index.
#define OUTBOX_IN_DELIVERY_LOG(e)                                       \
  "EXISTS (SELECT 1 FROM outbox.deliveries d "                          \
  "         WHERE pg_catalog.int8range(d.first_seq, d.last_seq, '[]') " \
  "               OPERATOR(pg_catalog.@>) " e                           \
  ".seq "                                                               \
  "           AND " e ".seq OPERATOR(pg_catalog.=) ANY (d.seqs))"
