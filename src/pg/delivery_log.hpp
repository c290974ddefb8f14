// The delivery log, outbox.deliveries (docs/design.md, "The delivery log"): one row per
// batch the relay committed, with the seqs of the events the sink acknowledged.
#pragma once

// SQL: the event aliased `e` (a string literal) is in the delivery log. Through
// outbox._delivered_at(), a fresh index scan per call: a GiST scan rescanned inside a join can
// mark live entries dead (the function's comment says why).
// clang-format off
#define OUTBOX_IN_DELIVERY_LOG(e) \
  "(outbox._delivered_at(" e ".seq) IS NOT NULL)"
// clang-format on
