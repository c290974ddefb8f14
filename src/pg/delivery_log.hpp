// The delivery log, outbox.deliveries (docs/design.md, "The delivery log"): one row per
// batch the relay committed, with the seqs of the events the sink acknowledged.
#pragma once

// SQL: the event aliased `e` (a string literal) is in the delivery log: one probe of the
// log's GiST index. Written out, not a function: views read the log with their owner's
// rights, and the planner sees the index.
// clang-format off
#define OUTBOX_IN_DELIVERY_LOG(e) \
  "EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.seqs OPERATOR(pg_catalog.@>) " e ".seq)"
// clang-format on
