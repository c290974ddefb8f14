// The indexes of a partition that a new event row gets an entry in, opened as the
// executor's ExecOpenIndices() opens them (which opens them all).
//
// A partial index whose predicate is `column IS NOT NULL`, for a column the row leaves
// NULL, gets no entry: the relay's own `_retry` and `_dead` indexes, for every new event.
// Opening them, building their predicate and evaluating it cost about a tenth of enqueue
// (bench/cost.sh), for an entry that is never made. Which index has that shape is read from
// the catalog once per index and kept per backend until the index's relcache entry is
// invalidated (a dropped index's OID can be reused).
#pragma once

#include "pg/postgres.hpp"

extern "C" {
#include "nodes/execnodes.h"
}

namespace outbox::pg {

// Fills info->ri_NumIndices, ri_IndexRelationDescs and ri_IndexRelationInfo with the indexes
// of info's relation (locked by the caller) that the row in `isnull` (by attribute) needs,
// each opened with RowExclusiveLock; ExecCloseIndices() closes them. Raises PostgreSQL
// errors: call inside guard().
void open_event_indexes(ResultRelInfo* info, const bool* isnull);

}  // namespace outbox::pg
